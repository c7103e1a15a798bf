"""What a command stopped by a signal left, said: :func:`noting` wraps a command's coroutine and
notes (:func:`servelab.cli.boundary.note_interruption`) what its interruption carries, for the
failure boundary to print on stderr before ``interrupted`` and to add to the ``--json`` failure
document (exit 128 + the signal):

- :class:`~servelab.ops.deploy.putback.PutBackInterrupted` (``case test``/``revert``/``restore``/
  ``bisect``, ``ab``, ``tune``): the deployment put back as found, or the services left down and
  the command that brings them back;
- :class:`~servelab.ops.deploy.results.DeployInterrupted` (``up``, ``restart``, a rolling
  restart): what it stopped, or left down and the command that brings it back.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from servelab.cli.boundary import note_interruption
from servelab.ops.deploy.putback import PutBackInterrupted
from servelab.ops.deploy.results import DeployInterrupted
from servelab.report.deploy import render_interruption
from servelab.report.putback import interruption_fields, put_back_fields, render_put_back

__all__ = ["noting"]

T = TypeVar("T")


async def noting(work: Awaitable[T]) -> T:
    """Await ``work``; stopped by a signal, note what it left, then let the stop go on."""
    try:
        return await work
    except PutBackInterrupted as exc:
        note_interruption(render_put_back(exc.put_back), put_back_fields(exc.put_back))
        raise
    except DeployInterrupted as exc:
        note_interruption(render_interruption(exc.report), interruption_fields(exc.report))
        raise
