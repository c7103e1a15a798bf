"""``servelab investigate`` on a wedged decode that no recorded change explains (split from
test_investigate_inside_cli.py so the two run side by side).

One change recorded (the decode knob 256 → 512), then the decode wedges (the simulator's
``wedge`` fault: /health 200, nothing decodes). The hang is localized to the decode; the knob's
experiment co-restarts the decode, which clears the wedge, so neither arm fails: the knob is not
convicted (inconclusive, the failure not reproduced), and the investigation ends unexplained (exit
1) with the layer named. It runs in two commands: ``--max-minutes`` stops it after the
reproduction, ``--resume`` goes on from the state recorded on the case. The localizing
verification's probe (no restart before it) fails at the soak's bound, not after 120 s.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.verify.checks import CheckCode
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from tests.support.e2ewait import e2e_waited
from tests.support.http import set_faults
from tests.support.inside import SOAK_ARGS, changed, investigate, restarts
from tests.support.inside import stack as stack


@pytest.mark.timeout(900)
def test_a_wedged_decode_is_localized_to_the_decode_and_no_knob_is_convicted(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger:
        cid = asyncio.run(changed(stack, ledger, [(DEFAULT_KNOB, "256")], "sessions hang"))
    set_faults(stack.spec.services["decode"].url, wedge=True)
    led, spec = ("--ledger", str(ledger_file)), ("-f", stack.source)
    # a budget spent by the reproduction: stopped before localizing, the state kept
    first, stderr, wall, code = investigate("--case", str(cid), "--max-minutes", "0.0001",
                                             *SOAK_ARGS, *spec, *led)  # fmt: skip
    assert code == 1 and first["stopped"] is True and first["report"] is None
    assert first["state"]["stage"] == "localize" and first["state"]["reproduced"] is True
    assert first["next"].startswith("localize") and "--resume --case" in first["lines"][-1]
    doc, more, wall2, code = investigate("--resume", "--case", str(cid), *SOAK_ARGS, *spec, *led)
    print(f"investigate, a wedged decode: {wall + wall2:.1f} s wall (stopped, then resumed), "
          f"{restarts(stderr + more)} service starts\n" + "\n".join(doc["lines"]))  # fmt: skip
    assert "resumed at localize" in more
    state = doc["state"]
    assert code == 1 and state["reproduced"] is True
    assert state["layer"] in ("engine_wedge", "decode_transfer"), state
    assert state["worker"] in ("decode", None) and state["side"] == "inside"
    (decided,) = state["decided"]
    assert decided["target"] == f"knob:decode/{DEFAULT_KNOB}"
    assert decided["outcome"] != "convicted" and state["ending"] == "unexplained"
    assert state["reverted"] == [] and "no recorded change convicted" in doc["summary"]
    # no restart since the reproducing soak: the wedge swallows the localizing probe, which fails
    # at the soak's bound (8 x 1.5 s), not after verify's 120 s
    code_, waited = e2e_waited(ledger_file, state["verification_id"])
    assert code_ is CheckCode.E2E_FAILED and waited < 60, (code_, waited)
