"""Ledger histories for tests: the reference incident's A/B, knob changes and case.

:func:`seed_history` records the A/B that adopted ``512`` for the decode knob and the change it
made; :func:`incident` records the docs' version of the story (an A/B with the C96 anomaly, the
change, a case that reverted the knob on suspicion, and the verification of the revert).
"""

from __future__ import annotations

from typing import Any

from servelab.core.ab.result import AbResult, upgrade_ab_result
from servelab.core.deploy.defaultspec import DEFAULT_KNOB as K
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import decode
from servelab.core.verify.record import read_check
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.ops.case import case as cases

__all__ = ["AB_RESULT", "INCIDENT_AB_RESULT", "K", "incident", "seed_history"]

_C64_C80 = [
    {"concurrency": 64, "ratio": 1.128, "ci": [1.10, 1.16], "verdict": "better",
     "baseline": "256", "candidate": "512"},
    {"concurrency": 80, "ratio": 1.012, "ci": [0.99, 1.03],
     "verdict": "no significant difference", "baseline": "256", "candidate": "512"},
]  # fmt: skip

_NAMED = {"service": "decode", "knob": K, "baseline": "256", "candidate": "512"}

#: 512 against 256 at C64 and C80, three repeats each (arms as the first A/Bs stored them).
AB_RESULT: dict[str, Any] = {
    **_NAMED,
    "arms": [
        {"label": "256", "value": "256", "throughput": {"64": [100.0, 101.0, 99.0]}},
        {"label": "512", "value": "512", "throughput": {"64": [112.8, 113.0, 112.6]}},
    ],
    "comparisons": _C64_C80,
    "anomalies": [],
}

#: The same at C64, C80 and C96, with 256's C96 < C64 anomaly.
INCIDENT_AB_RESULT: dict[str, Any] = {
    **_NAMED,
    "arms": [
        {"label": "256", "value": "256", "throughput": {"64": [100.0, 101.0], "96": [90.0, 91.0]}},
        {"label": "512", "value": "512", "throughput": {"64": [112.8, 113.0], "96": [95.1, 96.0]}},
    ],
    "comparisons": [
        *_C64_C80,
        {"concurrency": 96, "ratio": 1.057, "ci": [1.03, 1.08], "verdict": "better",
         "baseline": "256", "candidate": "512"},
    ],
    "anomalies": [{"arm": "256", "concurrency": 96, "previous": 64, "throughput": 90.5,
                   "previous_throughput": 100.5, "kind": "non_monotonic"}],
}  # fmt: skip


def _read(doc: dict[str, Any]) -> AbResult:
    return decode(AbResult, upgrade_ab_result(doc))


def seed_history(ledger: Ledger) -> None:
    """The reference history: the A/B that adopted 512, and the change it made."""
    ledger.record_ab(config={"repeats": 3}, result=_read(AB_RESULT))
    ledger.add(
        KnobChangeRecord(
            id=0,
            at=NOW,
            service="decode",
            name=K,
            old="256",
            new="512",
            reason="A/B: +12.8% at C64",
        )
    )


def incident(ledger: Ledger) -> int:
    """The A/B, the change, a case that reverted the knob on suspicion; returns the case id."""
    ledger.record_ab(config={}, result=_read(INCIDENT_AB_RESULT))
    ledger.add(
        KnobChangeRecord(id=0, at=NOW, service="decode", name=K, old="256", new="512", reason="A/B")
    )
    cid = cases.open_case(ledger, "Agentic sessions stall")
    cases.add_suspect(ledger, cid, f"knob:decode/{K}", "latest change")
    ledger.add(
        KnobChangeRecord(
            id=0,
            at=NOW,
            service="decode",
            name=K,
            old="512",
            new="256",
            reason="suspected",
            case_id=cid,
        )
    )
    ledger.record_verification(spec_hash="h", ok=True, checks=[read_check(
        {"layer": "live", "service": "decode", "ok": True, "detail": "match", "knob": K,
         "live": "256", "file": "256"})])  # fmt: skip
    return cid
