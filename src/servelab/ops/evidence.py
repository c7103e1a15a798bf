"""Recording a soak in the ledger, and attaching it to a case as evidence (no printing).

:func:`servelab.ops.soak.soak` calls :func:`record_soak` with the soak's stored document once it
ends (finished, cut by its deadline, or interrupted), so the row is written by ops, not the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servelab.io.store import Ledger

__all__ = ["record_soak"]


def record_soak(ledger: Ledger, document: Mapping[str, Any], case_id: int | None = None) -> int:
    """Record the soak ``document`` (config, result, findings); attach it to ``case_id`` if given.

    The case's evidence note lists the findings' layers (``"no finding"`` when there is none).
    Returns the soak's row id.
    """
    findings = list(document.get("findings") or [])
    soak_id = ledger.record_soak(
        config=document["config"], result=dict(document), findings=findings
    )
    if case_id is not None:
        note = ", ".join(str(f["layer"]) for f in findings) or "no finding"
        ledger.add_evidence(case_id=case_id, kind="soak", ref_id=soak_id, note=note)
    return soak_id
