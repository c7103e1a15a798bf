"""What a command stopped by a signal left, in words and as ``--json`` fields (returns data only).

Two kinds: a command that changes knobs put the deployment back as it found it, or could not
(:class:`~servelab.core.deploy.putback.PutBack`); an ``up``/``restart``/rolling restart names what
it stopped or left down (its report, :func:`servelab.report.deploy.render_interruption`). The
fields join the failure document a ``--json`` command prints (``down``, ``recovery``, and the
encoded ``put_back`` or ``report``).
"""

from __future__ import annotations

import shlex

from servelab.core.deploy.putback import KnobBack, PutBack
from servelab.core.ledger.codec import JsonObject, encode
from servelab.core.restart.contract import DeployReport, RestartReport
from servelab.ops.deploy.rolling_results import RollingReport

__all__ = ["interruption_fields", "put_back_fields", "render_put_back"]


def _value(value: str | None) -> str:
    return "unset" if value is None else value


def _knobs(knobs: tuple[KnobBack, ...]) -> str:
    return ", ".join(f"{k.service} {k.knob}={_value(k.value)}" for k in knobs)


def render_put_back(put: PutBack) -> str:
    """What the put-back did: the deployment as found, or what is down and how to fix it."""
    if put.ok:
        done = [f"wrote back {_knobs(put.written)}"] if put.written else []
        done += [f"co-restarted {', '.join(put.restarted)}"] if put.restarted else []
        did = "; ".join(done) or "nothing had changed"
        return f"stopped; the deployment is as this command found it ({did})\n"
    if put.interrupted:
        why = "a second signal stopped putting it back"
    else:
        why = f"putting it back failed: {put.error}"
    lines = [f"stopped; the deployment is NOT as this command found it ({why})"]
    if put.written:
        lines.append(f"  written back: {_knobs(put.written)}")
    for knob, fix in zip(put.not_written, put.fixes, strict=True):
        lines.append(
            f"  {knob.service} {knob.knob} is not back at {_value(knob.value)} in its file; "
            f"put it back with: {shlex.join(fix)}"
        )
    if put.down:
        lines.append(
            f"  down: {', '.join(put.down)}; bring them back with: {shlex.join(put.recovery)}"
        )
    return "\n".join(lines) + "\n"


def put_back_fields(put: PutBack) -> JsonObject:
    """The failure document's fields: ``down``, ``recovery`` (a shell line, or null) and the
    encoded ``put_back``."""
    return {
        "down": list(put.down),
        "recovery": shlex.join(put.recovery) if put.recovery else None,
        "put_back": encode(put),
    }


def interruption_fields(report: DeployReport | RestartReport | RollingReport) -> JsonObject:
    """An interrupted ``up``/``restart``/rolling restart: its encoded ``report``, and for a
    restart what it left ``down`` and the ``recovery`` command."""
    fields: JsonObject = {"report": encode(report)}
    if isinstance(report, RestartReport):
        fields["down"] = list(report.down)
        fields["recovery"] = shlex.join(report.recovery) if report.recovery else None
    return fields
