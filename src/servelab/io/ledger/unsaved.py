"""What a measurement keeps when the ledger refuses it: a JSON file beside the ledger.

A bench run, an A/B or a soak measures for minutes before it is recorded; a ledger that fails at
that moment (its disk full, its file made read-only or locked meanwhile) must not lose what was
measured. The writer's payload (the row it was writing, as strict JSON: a number that is not
finite is ``null``) goes to ``<ledger>.unsaved-<kind>-<UTC stamp>.json`` beside the ledger, else
into the system's temporary directory, and the :class:`~servelab.errors.StoreError` says where.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servelab.core.ledger.jsonvalues import finite
from servelab.errors import HostError, StoreError
from servelab.io.files import write_atomic

__all__ = ["keep_unsaved", "kept_on_failure"]


def _text(payload: Any) -> bytes:
    return (json.dumps(finite(payload), indent=2, default=str, allow_nan=False) + "\n").encode()


def keep_unsaved(ledger_path: Path, kind: str, payload: Any) -> Path:
    """Write ``payload`` beside the ledger (else in the temporary directory); the file written.
    Raises :class:`~servelab.errors.HostError` when neither place takes it."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    name = f"{ledger_path.name}.unsaved-{kind}-{stamp}.json"
    data = _text(payload)
    tried: list[str] = []
    for directory in (ledger_path.parent, Path(tempfile.gettempdir())):
        try:
            write_atomic(directory / name, data)
        except HostError as exc:
            tried.append(str(exc))
            continue
        return directory / name
    raise HostError("; ".join(tried))


@contextlib.contextmanager
def kept_on_failure(ledger_path: Path, kind: str, payload: Callable[[], Any]) -> Iterator[None]:
    """Run the block (one write of a measurement); when it fails with a
    :class:`~servelab.errors.StoreError`, keep ``payload()`` (:func:`keep_unsaved`) and raise the
    error again, saying where the measurement went."""
    try:
        yield
    except StoreError as exc:
        try:
            where = f"what was measured is kept in {keep_unsaved(ledger_path, kind, payload())}"
        except HostError as lost:
            where = f"what was measured could not be kept either: {lost}"
        raise StoreError(f"{exc}; {where}") from exc
