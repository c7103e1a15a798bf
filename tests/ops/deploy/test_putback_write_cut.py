"""A second signal just after a put-back's write (the thirtieth pass): it said nothing was written
back, and the knob change it recorded carried no case id, so a case whose revert it put back read
as reverted while the file held the value found. Now the cut write's file is read back (written
back: the value found), and the record of a case's put-back carries the case's id. In process, on
a real simulated stack: the put-back is cancelled (the second signal's doing) at its first pause
after its knob change is in the ledger, and nowhere else."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.deploy.putback import KnobBack, PutBack
from servelab.core.knobs.record import KnobChangeRecord
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from servelab.ops.context import Operation
from servelab.ops.deploy.putback import put_back
from servelab.ops.knob import get_knob, set_knob
from servelab.report.putback import render_put_back
from tests.support.putbacks import FOUND, pd_stack, suspect_case


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    yield from pd_stack(tmp_path_factory, "writecut")


def _put_back_rows(ledger: Ledger) -> list[KnobChangeRecord]:
    return [row for row in ledger.list(KnobChangeRecord) if row.new == FOUND]


async def _cut_after_its_record(stack: LoadedSpec, ledger: Ledger, case_id: int) -> PutBack:
    """The put-back of the decode's knob, cancelled once its change is recorded."""
    async with Operation(stack, ledger=ledger) as op:
        knob = KnobBack("decode", DEFAULT_KNOB, FOUND)
        work = asyncio.ensure_future(put_back(op, [knob], case_id=case_id))
        for _ in range(200_000):  # bounded: each turn is one pause of the put-back at most
            if work.done() or _put_back_rows(ledger):
                break
            await asyncio.sleep(0)
        assert not work.done(), "the put-back ended before it could be cut"
        work.cancel()  # the second signal: its first pause after the record
        return await work


@pytest.mark.timeout(300)
def test_a_put_back_cut_after_its_write_says_the_file_holds_the_value_found(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    case_id = int(suspect_case(ledger_file))
    with Ledger.open(ledger_file) as ledger:
        asyncio.run(set_knob(stack, "decode", DEFAULT_KNOB, "256", reason="case: reverted",
                             case_id=case_id, ledger=ledger))  # fmt: skip
        try:
            put = asyncio.run(_cut_after_its_record(stack, ledger, case_id))
            rows = _put_back_rows(ledger)
        finally:
            asyncio.run(set_knob(stack, "decode", DEFAULT_KNOB, FOUND, reason="test: as found"))
    assert asyncio.run(get_knob(stack, "decode", DEFAULT_KNOB)) == FOUND
    knob = KnobBack("decode", DEFAULT_KNOB, FOUND)
    assert put.interrupted and put.written == (knob,), put  # read back: the value found
    assert put.not_written == () and put.fixes == (), put
    said = render_put_back(put)
    assert f"back decode {DEFAULT_KNOB}={FOUND}" in said, said  # "wrote back", "written back:"
    assert [row.case_id for row in rows] == [case_id], rows  # the case reads what its file holds
