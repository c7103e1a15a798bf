"""Argument knobs, on the service's host: their places (the file layer), an edit of one place, the
live process's value, and what the engine reports it runs with.

- **Places** (:mod:`servelab.core.knobs.places`): the words of the env-file variable ``args_env``,
  the command line servelab builds for a ``sim``/``router`` service, the ``--config`` YAML file.
- **Edit** (:func:`write_argument`): the place :func:`~servelab.core.knobs.places.write_place`
  picks, atomically, after a timestamped backup in the state directory (the env file's, or the
  config file's), through the service's host, so it works the same over SSH.
- **Live** (:func:`live_argument`): ``/proc/PID/cmdline`` parsed as the engine parses it, its
  ``--config`` merged under it (:func:`~servelab.io.hosts.discovery.read_live_args`): the copy of
  the config file servelab kept when it launched the process (what the process read), else the
  file as it is now.
- **Engine** (:func:`engine_arguments`): ``GET /server_info`` (vLLM: with
  ``?config_format=json``, answered only under ``VLLM_SERVER_DEV_MODE=1``); a router's server
  info describes a worker, not the router, so only its policy is known, from its metrics (the
  policy label of ``smg_worker_selection_total``); an engine that does not answer is unknown,
  never a pass.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace

from servelab.core.deploy.topology import service_argv
from servelab.core.engines import Engine, engine
from servelab.core.knob import Knob, parse_knob
from servelab.core.knobs.argv import arg_values, set_words
from servelab.core.knobs.configfile import config_values, dropped_arguments, edit_config
from servelab.core.knobs.configyaml import config_text
from servelab.core.knobs.envfile import EnvFile, parse_envfile
from servelab.core.knobs.places import (
    FileValue,
    LiveValue,
    Place,
    abbreviated_in,
    file_value,
    split_args,
    write_place,
)
from servelab.core.knobs.rules import parse_env_bytes
from servelab.core.knobs.serverinfo import EngineReport, Reported, reported_value
from servelab.core.telemetry.router import WORKER_SELECTION, routing_policy
from servelab.errors import HostError, KnobError
from servelab.io.hosts.discovery import ProcessRef, find_process, read_live_args
from servelab.io.hosts.envfiles import config_field, env_field, read_config_bytes, read_env_bytes
from servelab.io.hosts.processes import read_pid_record, spec_address
from servelab.ops.context import Operation
from servelab.sim.engineargs import Engine as SimEngine
from servelab.sim.engineargs import engine_flags

__all__ = [
    "CONFIG_AT_LAUNCH",
    "ENV_AT_LAUNCH",
    "ROUTER_POLICIES",
    "ArgumentEdit",
    "argument_knob",
    "config_path",
    "dropped_arguments_of",
    "engine_arguments",
    "engine_report",
    "launch_copy",
    "live_argument",
    "place_path",
    "read_places",
    "service_engine",
    "service_flags",
    "write_argument",
]


def service_engine(op: Operation) -> Engine:
    """The parser rules of the deployment's engine (a router's arguments read the same way)."""
    return engine(op.spec.engine)


def service_flags(op: Operation, service: str) -> frozenset[str] | None:
    """The flags the service's engine parser reads: known for a simulated worker (the simulator's
    parser is its engine's), not for another engine (None). With them, an abbreviated flag
    (argparse's ``allow_abbrev``) is read and edited as the flag the engine takes it for."""
    svc = op.spec.service(service)
    if svc.start != "sim" or svc.role not in ("prefill", "decode"):
        return None
    return engine_flags(SimEngine(op.spec.engine), "prefill" if svc.role == "prefill" else "decode")


def argument_knob(op: Operation, name: str) -> Knob:
    """The argument knob ``name`` as the deployment's engine reads it."""
    return parse_knob(name, service_engine(op))


def place_path(op: Operation, service: str, place: Place | None) -> str:
    """The file of ``place`` (the env file of ``args_env``; the spec for its own command line)."""
    svc = op.spec.service(service)
    if place is Place.CONFIG_FILE and svc.config_file is not None:
        return str(op.loaded.path(svc.config_file))
    if place is Place.SPEC:
        return f"{op.loaded.source} (services.{service})"
    return op.env_path(service) or ""


def config_path(op: Operation, service: str) -> str | None:
    """The service's ``config_file``, resolved against the spec's directory."""
    relative = op.spec.service(service).config_file
    return None if relative is None else str(op.loaded.path(relative))


@dataclass(frozen=True)
class _Places:
    """What each place holds now: its parsed arguments, and the raw file it was read from."""

    values: dict[Place, dict[str, str]]
    env: EnvFile | None
    config_text: str | None


async def _read(op: Operation, service: str) -> _Places:
    svc = op.spec.service(service)
    host = op.host(service)
    eng = service_engine(op)
    flags = service_flags(op, service)
    values: dict[Place, dict[str, str]] = {}
    env = None
    if svc.args_env is not None:
        path = op.env_path(service)
        raw = None if path is None else await read_env_bytes(host, path, field=env_field(service))
        env = None if raw is None or path is None else parse_env_bytes(raw, path)
        words = split_args(None if env is None else env.get(svc.args_env))
        values[Place.ARGS_ENV] = arg_values(words, eng, flags)
    argv = service_argv(op.spec, service, sys.executable)
    if argv is not None:
        values[Place.SPEC] = arg_values(argv, eng, flags)
    text = None
    path = config_path(op, service)
    if path is not None:
        data = await read_config_bytes(host, path, field=config_field(service))
        text = None if data is None else config_text(data, path)
        if text is not None:
            values[Place.CONFIG_FILE] = config_values(text, eng, path, flags)
    return _Places(values, env, text)


async def dropped_arguments_of(op: Operation, service: str) -> tuple[str | None, list[str]]:
    """(the config file, the arguments it writes ``false`` that the engine drops)."""
    path = config_path(op, service)
    if path is None:
        return None, []
    data = await read_config_bytes(op.host(service), path, field=config_field(service))
    if data is None:
        return path, []
    return path, dropped_arguments(config_text(data, path), service_engine(op), path)


async def read_places(op: Operation, service: str, knob: Knob) -> FileValue:
    """The knob's file value: the winning place's, and what it shadows; where the engine's flags
    are not known, the words that may abbreviate the knob's flag (its value is then uncertain)."""
    places = await _read(op, service)
    eng = service_engine(op)
    got = file_value(places.values, knob, eng)
    if service_flags(op, service) is not None:
        return got  # abbreviations were read as the engine reads them
    return replace(got, abbreviated=abbreviated_in(places.values, knob, eng))


@dataclass(frozen=True)
class ArgumentEdit:
    """What :func:`write_argument` did: the value before (its place), where it wrote, the file,
    its backup (None: no file before, or nothing written)."""

    before: FileValue
    place: Place
    path: str
    backup_path: str | None
    changed: bool


def _args_env_value(words: list[str], knob: Knob) -> str:
    joined = " ".join(words)
    if any(any(c.isspace() for c in word) for word in words):
        raise KnobError(
            f"{knob.name}: a value with white space cannot go in an args_env variable (it is "
            "split at white space when the start command expands it)"
        )
    return joined


async def write_argument(
    op: Operation, service: str, knob: Knob, value: str | None
) -> ArgumentEdit:
    """Give the knob ``value`` (None: the engine's default) in the place a set writes to."""
    svc = op.spec.service(service)
    eng = service_engine(op)
    flags = service_flags(op, service)
    places = await _read(op, service)
    before = file_value(places.values, knob, eng)
    place = write_place(svc, service, before)
    if place is Place.ARGS_ENV:
        assert svc.args_env is not None
        path = op.env_path(service)
        assert path is not None  # the spec requires env_file with args_env
        env = places.env if places.env is not None else parse_envfile("", source=path)
        words = set_words(split_args(env.exact(svc.args_env)), knob, value, eng, flags)
        data = env.set(svc.args_env, _args_env_value(words, knob)).encode()
        exists = places.env is not None
        old = None if places.env is None else places.env.encode()
    else:
        path = config_path(op, service) or ""
        text = places.config_text or ""
        data = edit_config(text, knob, value, eng, path, flags).encode()
        exists = places.config_text is not None
        old = None if places.config_text is None else text.encode()
    if data == old:
        return ArgumentEdit(before, place, path, None, changed=False)
    backup = await op.write_env(service, path, data, backup=exists)
    return ArgumentEdit(before, place, path, backup, changed=True)


async def live_argument(
    op: Operation, service: str, knobs: list[Knob]
) -> tuple[ProcessRef, Mapping[str, LiveValue]]:
    """(the process and how it was found, the knobs' live values); no values when it is not
    running."""
    host = op.host(service)
    proc = await find_process(op.loaded, service, host)
    if proc.pid is None:
        return proc, {}
    read = _config_read(op, service, proc.pid)
    eng, flags = service_engine(op), service_flags(op, service)
    return proc, await read_live_args(host, proc.pid, knobs, eng, config=read, flags=flags)


#: The pid record's key for the copy of the config file a launch read.
CONFIG_AT_LAUNCH = "config_at_launch"

#: The pid record's key for the copy of the env file a launch read.
ENV_AT_LAUNCH = "env_at_launch"


def launch_copy(op: Operation, service: str, pid: int, key: str) -> str | None:
    """The copy (``key``: :data:`CONFIG_AT_LAUNCH`, :data:`ENV_AT_LAUNCH`) of the file servelab
    kept when it launched ``pid`` (None: not launched by servelab, or before it kept one): what
    that process read, whatever the file holds now."""
    for at in (None, spec_address(op.spec, service)):  # its own, or kept aside (a shared folder)
        record = read_pid_record(op.loaded.state_dir, service, at)
        if record is None:
            continue
        served = record.extra.get("served_by")
        pids = {record.pid, served.get("pid") if isinstance(served, dict) else None}
        copy = record.extra.get(key)
        if pid in pids and isinstance(copy, str):
            return copy
    return None


def _config_read(op: Operation, service: str, pid: int) -> str | None:
    """The copy of the config file ``pid`` was launched with (:func:`launch_copy`)."""
    return launch_copy(op, service, pid, CONFIG_AT_LAUNCH)


#: A router's policy arguments, and the workers each one picks (sglang-router 0.3.2, smg 1.13).
ROUTER_POLICIES = {"--policy": None, "--prefill-policy": "prefill", "--decode-policy": "decode"}


async def _router_policy(op: Operation, service: str, knob: Knob) -> Reported:
    """The policy a router started by servelab picks its workers with, as its Prometheus port's
    selection counter says (its argv and environment are unreadable in ``/proc``: sglang-router
    0.3.2 writes ``sglang::router`` over them, smg 1.13 ``smg::router``); unknown before it has
    routed a request."""
    svc = op.spec.service(service)
    if knob.name not in ROUTER_POLICIES or svc.start != "router" or svc.router is None:
        return Reported(False)
    from servelab.io.http.client import HttpClient  # aiohttp: only when an engine is asked

    base = await op.host(service).http_url(f"http://127.0.0.1:{svc.router.prometheus_port}")
    async with HttpClient(limit=1) as http:
        got = await http.probe(base + "/metrics", timeout=5.0, body_limit=None)
    policy = routing_policy(got.body, ROUTER_POLICIES[knob.name]) if got.ok else None
    return Reported(policy is not None, policy, f"{WORKER_SELECTION}{{policy}}")


async def engine_arguments(op: Operation, service: str, knobs: list[Knob]) -> dict[str, Reported]:
    """Each knob's value in the engine's ``/server_info`` (read once); for a router's policy,
    the policy its metrics say it routes with; unknown for any other router argument, or when
    the engine does not answer it (vLLM without ``VLLM_SERVER_DEV_MODE=1``)."""
    unknown = {knob.name: Reported(False) for knob in knobs}
    role = op.spec.service(service).role
    if role == "router":
        return {knob.name: await _router_policy(op, service, knob) for knob in knobs}
    if role not in ("prefill", "decode"):
        return unknown
    info = await engine_report(op, service)
    if info is None:
        return unknown
    return {knob.name: reported_value(info, knob) for knob in knobs}


async def engine_report(op: Operation, service: str) -> EngineReport | None:
    """A worker's own report of what it runs with (its engine's ``report_paths``: vLLM's only
    under ``VLLM_SERVER_DEV_MODE=1``), None when it gives none."""
    try:
        urls = [await op.url(service, path) for path in service_engine(op).report_paths]
    except HostError:
        return None
    from servelab.io.http.client import HttpClient  # aiohttp: only when an engine is asked

    async with HttpClient(limit=1) as http:
        for url in urls:
            info = await http.get_json(url)
            if isinstance(info, dict):
                return EngineReport(info)
    return None
