"""The e2e check a command's verification recorded, read back from the ledger: its code and how
long its slowest request waited (tests/cli/test_investigate_inside_cli.py,
tests/cli/test_case_test_cli.py: a long prompt the hang swallows, or investigate's localizing
probe a wedged decode swallows, fails at the soak's bound, 8 x its idle timeout, not after
verify's 120 s)."""

from __future__ import annotations

from pathlib import Path

from servelab.core.verify.checks import Check, CheckCode
from servelab.core.verify.e2e import E2EProbe
from servelab.core.verify.record import VerificationRecord
from servelab.io.ledger.ledger import Ledger

__all__ = ["e2e_waited"]


def e2e_waited(ledger_file: Path, verification_id: int) -> tuple[CheckCode, float]:
    """Verification ``verification_id``'s e2e check: its code, and the longest any of its
    requests (the probe, the long prompt) waited, in seconds."""
    with Ledger.open(ledger_file) as ledger:
        record = ledger.get(VerificationRecord, verification_id)
    assert record is not None, verification_id
    # the probe's check (the answer probes' check is in the e2e layer too)
    (e2e,) = [c for c in record.checks if isinstance(c, Check) and isinstance(c.data, E2EProbe)]
    assert isinstance(e2e.data, E2EProbe)
    probe = e2e.data
    waited = [probe.total_s, probe.long.total_s if probe.long else None]
    return e2e.code, max(w for w in waited if w is not None)
