"""The process layer: the running process's environment against the env file.

The process serving the service (pid record, systemd MainPID, or port owner), its
``/proc/PID/environ`` narrowed to the tracked names at once, compared with the env file: "in file
but not live: restart needed", "live but not in file: lost on next restart", "differs". Without an
env file, the live value against the spec's pin. An argument knob's process value (its
``/proc/PID/cmdline``) is read with the engine's report (:mod:`.engine`), in one check. A router
whose environment reads blank (sglang-router writes its title, ``sglang::router``, over it) has
each knob read against the copy of the env file servelab kept when it launched the router (its pid
record's ``env_at_launch``): a value there other than the file's is "restart needed"; the same
value, or no copy, "not read back" (``live.not_read_back``, skipped: never "restart needed" from a
value that cannot be read), as ``knob set`` and the put-back word it.
"""

from __future__ import annotations

from servelab.core.knobs.rules import live_verdict, tracked_names
from servelab.core.verify.checks import (
    Check,
    CheckCode,
    KnobLive,
    KnobLiveVsSpec,
    KnobNotReadBack,
    Layer,
    LiveProcess,
)
from servelab.core.verify.events import ReadingLiveEnv
from servelab.errors import ServelabError
from servelab.io.hosts.discovery import find_process, read_live, read_live_unless_blank
from servelab.ops.sharedfile import env_at_launch
from servelab.ops.verify.layers.file import FileState, file_state
from servelab.ops.verify.layers.reader import LayerReader, ReadContext, failed

__all__ = ["PROCESS"]

_C = CheckCode


async def _checks(ctx: ReadContext, state: FileState) -> list[Check]:
    op, service = ctx.op, ctx.name
    svc = op.spec.service(service)
    host = op.host(service)
    proc = await find_process(op.loaded, service, host)
    if proc.pid is None:
        return [Check(service, False, _C.LIVE_NO_PROCESS, LiveProcess(None, proc.source))]
    pid, where = proc.pid, LiveProcess(proc.pid, proc.source)
    file_values = state.env.as_dict() if state.env is not None else {}
    names = tracked_names(svc, file_values)
    if not names:
        return [] if state.arguments else [Check(service, True, _C.LIVE_NO_KNOBS, where)]
    if state.path is not None and state.env is None:
        return [Check(service, False, _C.LIVE_FILE_UNREADABLE, where)]
    if svc.role == "router":
        read = await read_live_unless_blank(host, pid, names)
        if read is None:  # written over: nothing in it is read back
            return await _written_over(ctx, names, file_values, where)
        live = read
    else:
        live = await read_live(host, pid, names)
    if state.path is None:  # no env file (e.g. a unit's Environment=): live against the spec
        return [_vs_spec(service, name, svc.knobs.get(name), live.get(name), where)
                for name in names]  # fmt: skip
    checks = []
    for name in names:
        file, value = file_values.get(name), live.get(name)
        verdict = live_verdict(file, value)
        data = KnobLive(pid, proc.source, name, file, value, verdict)
        checks.append(Check(service, verdict.ok, _C.of_verdict(verdict), data))
    return checks


async def _written_over(
    ctx: ReadContext, names: list[str], file_values: dict[str, str], where: LiveProcess
) -> list[Check]:
    """A router that wrote over its environment: each knob against the copy of the env file
    servelab kept when it launched the router (what it runs with): one that differs from the
    file is "restart needed"; one the same, or with no copy, "not read back"."""
    assert where.pid is not None
    launched = await env_at_launch(ctx.op, ctx.name, where.pid)
    checks = []
    for name in names:
        file = file_values.get(name)
        verdict = None if launched is None else live_verdict(file, launched.get(name))
        if verdict is None or verdict.ok:
            checks.append(_not_read_back(ctx.name, name, file, where))
            continue
        assert launched is not None
        data = KnobLive(where.pid, where.pid_source, name, file, launched.get(name), verdict,
                        launched=True)  # fmt: skip
        checks.append(Check(ctx.name, False, _C.of_verdict(verdict), data))
    return checks


def _not_read_back(service: str, name: str, file: str | None, where: LiveProcess) -> Check:
    assert where.pid is not None
    data = KnobNotReadBack(where.pid, where.pid_source, name, file)
    return Check(service, True, _C.LIVE_NOT_READ_BACK, data)


def _vs_spec(
    service: str, name: str, pin: str | None, value: str | None, where: LiveProcess
) -> Check:
    assert where.pid is not None
    ok = pin is None or value == pin
    data = KnobLiveVsSpec(where.pid, where.pid_source, name, value, pin)
    return Check(service, ok, _C.LIVE_NO_ENV_FILE, data)


async def read(ctx: ReadContext) -> list[Check]:
    """The process layer's checks of one service's env knobs."""
    state = await file_state(ctx)
    ctx.op.say(ReadingLiveEnv(ctx.name))
    try:
        return await _checks(ctx, state)
    except ServelabError as exc:
        return failed(Layer.LIVE, ctx.name, exc)


PROCESS = LayerReader("process", Layer.LIVE, read)
