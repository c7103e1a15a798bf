"""``servelab investigate`` on a failure inside the serving path: a guilty knob among six recorded
changes (its sibling, a wedged decode that no recorded change explains, is in
test_investigate_wedged_cli.py: split so the two run side by side).

Six changes recorded after a passing verification, one guilty:
``SGLANG_SM120_MLA_KV_TILE=16`` (the simulator's long-context fault: prompts over 1024 tokens
never get a token out of decode; the soak's long fresh context reaches that). The hang is
localized inside (no proxy), the good state (every change at its good value) passes its soak, so
the six changes are bisected (each probe an experiment), the tile is convicted and left reverted (a
revert under the case, verified live), the five others are exonerated and kept.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from servelab.core.verify.checks import CheckCode
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from servelab.ops.case import case as cases
from servelab.ops.knob import get_knob
from tests.support.e2ewait import e2e_waited
from tests.support.inside import HARMLESS_ENV, SIX, SOAK_ARGS, TILE, changed, investigate, restarts
from tests.support.inside import stack as stack


@pytest.mark.timeout(1200)
def test_a_guilty_knob_among_six_is_convicted_and_left_reverted(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger:
        cid = asyncio.run(changed(stack, ledger, SIX, "long agentic sessions hang"))
    led, spec = ("--ledger", str(ledger_file)), ("-f", stack.source)
    doc, stderr, wall, code = investigate("--case", str(cid), *SOAK_ARGS, *spec, *led)
    print(f"investigate, a guilty knob among six: {wall:.1f} s wall, {restarts(stderr)} "
          "service starts\n" + "\n".join(doc["lines"]))  # fmt: skip
    state = doc["state"]
    assert code == 0 and state["reproduced"] is True and state["side"] == "inside"
    assert [s["knob"] for s in state["suspects"]] == [name for name, _ in SIX]
    assert state["good_fails"] is False and state["good_soak_id"] is not None  # then bisected
    verdicts = {d["target"]: (d["outcome"], d["by"]) for d in state["decided"]}
    assert verdicts.pop(f"knob:decode/{TILE}") == ("convicted", "bisect")
    assert set(verdicts.values()) == {("exonerated", "bisect")} and len(verdicts) == 5
    assert state["reverted"] == [f"knob:decode/{TILE}"] and state["ending"] == "resolved"
    assert asyncio.run(get_knob(stack, "decode", TILE)) is None  # left reverted
    assert asyncio.run(get_knob(stack, "decode", HARMLESS_ENV[1])) == "600"  # the others kept
    with Ledger.open(ledger_file) as ledger:
        view = cases.view_case(ledger, cid)
    assert view.case.status == "resolved" and view.restore_status == "nothing to restore"
    # the guilty tile's long prompt never answers: failed at the localizing bound (8 x 1.5 s),
    # not after verify's 120 s
    code_, waited = e2e_waited(ledger_file, state["verification_id"])
    assert code_ is CheckCode.E2E_LONG_FAILED and waited < 60, (code_, waited)
