"""The file layer: each declared knob in the file the engine starts from, against the spec.

- An env knob in the service's env file, against the spec's pin (when pinned) and the file's
  latest backup (the diff is shown, not judged), with the ledger's last recorded change of it.
- An argument knob in the place that wins (``args_env``, the spec's command line, ``--config``)
  and the values it overrides (:func:`servelab.ops.arguments.read_places`).

The env file and its backup are read once per service (:func:`file_state`); the process layer
compares the live environment with the same read.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from servelab.core.deploy.spec import DeploymentSpec
from servelab.core.knob import Knob, same_value
from servelab.core.knobs.argv import canonical_arg
from servelab.core.knobs.envfile import EnvFile
from servelab.core.knobs.places import FileValue
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.knobs.rules import parse_env_bytes, tracked_names
from servelab.core.verify.arguments import ArgumentDropped, ArgumentInFile, Overridden
from servelab.core.verify.checks import (
    Check,
    CheckCode,
    EnvFileFailure,
    EnvFileNoKnobs,
    KnobInFile,
    Layer,
    NoEnvFile,
)
from servelab.core.verify.events import ReadingEnvFile
from servelab.errors import KnobError, ServelabError, UnreadFileError
from servelab.io.hosts.envfiles import env_field, previous_version, read_env_bytes
from servelab.ops.arguments import config_path, dropped_arguments_of, place_path, service_engine
from servelab.ops.context import Operation
from servelab.ops.verify.layers.reader import LayerReader, ReadContext, error_text, failed

__all__ = ["FILE", "FileState", "file_state"]

_C = CheckCode


@dataclass(frozen=True)
class FileState:
    """A service's env file and latest backup, read once for both the file and process layers."""

    path: str | None
    env: EnvFile | None = None
    backup: EnvFile | None = None
    backup_path: str | None = None
    problem: CheckCode | None = None  # the config code when the file could not be read or parsed
    error: str | None = None
    recorded: dict[str, KnobChangeRecord] = field(default_factory=dict)
    #: The service declares argument knobs (checked apart): an env file without env knobs is fine.
    arguments: bool = False


async def _read_state(op: Operation, service: str) -> FileState:
    """The env file as it is on disk now (always read: this is what the config layer proves)."""
    path = op.env_path(service)
    if path is None:
        return FileState(path=None)
    host = op.host(service)
    raw = await read_env_bytes(host, path, field=env_field(service))
    if raw is None:
        return FileState(path=path, problem=_C.CONFIG_MISSING)
    try:
        env = parse_env_bytes(raw, path)
    except KnobError as exc:
        return FileState(path=path, problem=_C.CONFIG_UNREADABLE, error=str(exc))
    previous = await previous_version(host, path, raw, op.backup_dir(service))
    if previous is None:
        return FileState(path, env)
    return FileState(path, env, previous[1], previous[0])


async def file_state(ctx: ReadContext) -> FileState:
    """The service's env file state (read once per service, whichever layer asks first)."""

    async def read() -> FileState:
        ctx.op.say(ReadingEnvFile(ctx.name))
        arguments = bool(ctx.arguments())
        try:
            state = await _read_state(ctx.op, ctx.name)
        except UnreadFileError:  # a FIFO, a device, too large: bad input, not a check
            raise
        except ServelabError as exc:
            path = ctx.op.env_path(ctx.name)
            return FileState(path, problem=_C.CONFIG_ERROR, error=error_text(exc))
        return replace(state, recorded=dict(ctx.recorded), arguments=arguments)

    state = await ctx.reads.once("file", read)
    assert isinstance(state, FileState)
    return state


def _env_checks(spec: DeploymentSpec, service: str, state: FileState) -> list[Check]:
    svc = spec.service(service)
    if state.path is None:
        return [Check(service, True, _C.CONFIG_NO_ENV_FILE, NoEnvFile(bool(svc.knobs)))]
    if state.env is None:
        failure = EnvFileFailure(state.path, state.error)
        return [Check(service, False, state.problem or _C.CONFIG_UNREADABLE, failure)]
    names = tracked_names(svc, state.env.as_dict())
    if not names:
        none = Check(service, True, _C.CONFIG_NO_KNOBS, EnvFileNoKnobs(state.path))
        return [] if state.arguments else [none]
    return [_env_check(service, name, svc.knobs.get(name), state) for name in names]


def _env_check(service: str, name: str, pin: str | None, state: FileState) -> Check:
    assert state.env is not None and state.path is not None
    value = state.env.get(name)
    backup = state.backup.get(name) if state.backup is not None else None
    if pin is None:
        ok, code = True, _C.CONFIG_NOT_PINNED
    else:
        ok = value == pin
        code = _C.CONFIG_MATCHES_SPEC if ok else _C.CONFIG_PIN_MISMATCH
    row = state.recorded.get(name)
    data = KnobInFile(
        name, value, pin, backup, state.backup_path, state.path,
        recorded=None if row is None else row.new,
        recorded_change_id=None if row is None else row.id,
    )  # fmt: skip
    return Check(service, ok, code, data)


def _argument_check(op: Operation, service: str, knob: Knob, now: FileValue) -> Check:
    pin = knob.normalize(op.spec.service(service).knobs.get(knob.name))
    if pin is None:
        ok, code = True, _C.CONFIG_ARGUMENT_NOT_PINNED
    else:
        ok = same_value(now.value, pin)
        code = _C.CONFIG_ARGUMENT_MATCHES_SPEC if ok else _C.CONFIG_ARGUMENT_PIN_MISMATCH
    place = None if now.place is None else str(now.place)
    path = None if now.place is None else place_path(op, service, now.place)
    hidden = tuple(Overridden(str(where), value) for where, value in now.shadowed)
    return Check(service, ok, code, ArgumentInFile(knob.name, now.value, place, path, pin, hidden))


def _argument_file(ctx: ReadContext) -> str | None:
    """The file an argument knob's failed read names: the config file, else the env file."""
    return config_path(ctx.op, ctx.name) or ctx.op.env_path(ctx.name)


async def _argument_checks(ctx: ReadContext) -> list[Check]:
    knobs = ctx.arguments()
    if not knobs:
        return []
    try:
        files = await ctx.places(knobs)
    except ServelabError as exc:
        return failed(Layer.CONFIG, ctx.name, exc, _argument_file(ctx))
    checks = [_argument_check(ctx.op, ctx.name, knob, files[knob.name]) for knob in knobs]
    return checks + await _dropped(ctx, knobs)


async def _dropped(ctx: ReadContext, knobs: list[Knob]) -> list[Check]:
    """A declared argument the config file writes ``false``, which the engine drops."""
    try:
        path, dropped = await dropped_arguments_of(ctx.op, ctx.name)
    except ServelabError as exc:
        return failed(Layer.CONFIG, ctx.name, exc, _argument_file(ctx))
    engine = service_engine(ctx.op)
    checks = []
    for knob in knobs:
        arg = canonical_arg(knob.arg or knob.name, engine)
        if path is not None and arg in dropped:
            data = ArgumentDropped(knob.name, path, f"{arg[2:]}: false")
            checks.append(Check(ctx.name, False, _C.CONFIG_ARGUMENT_DROPPED, data))
    return checks


async def read(ctx: ReadContext) -> list[Check]:
    """The file layer's checks of one service: its env knobs, then its argument knobs."""
    state = await file_state(ctx)
    return [*_env_checks(ctx.op.spec, ctx.name, state), *await _argument_checks(ctx)]


FILE = LayerReader("file", Layer.CONFIG, read)
