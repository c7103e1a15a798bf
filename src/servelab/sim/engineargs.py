"""The simulated workers' command line: the real engines' argument names, parsed as they parse them.

A documented subset of SGLang's ``ServerArgs`` (:class:`SglangArgs`) and vLLM's engine and
frontend arguments (:class:`VllmArgs`), each field named as the engine names it, plus servelab's
own options (time scale, warm-up, seed, fault switches, ...: :data:`SERVELAB_OPTIONS`), in one
argparse parser per engine and role (``docs/sim.md``, "Arguments"):

- SGLang (``sglang serve``, ``server_args.py``): ``--field-name`` flags; booleans are
  ``store_true`` (no value, no ``--no-`` form). ``--config FILE.yaml`` (``.yaml``/``.yml``): each
  key becomes ``--key`` exactly as written, ``true`` gives the bare flag, ``false`` is dropped, a
  list gives the flag then its items, a mapping its JSON; the file's arguments go before the
  command line's, so the command line wins (``server_args_config_parser.py``). The file is
  read by servelab's one bounded loader (:func:`~servelab.core.knobs.configyaml.load_config`:
  anchors and aliases refused, 256 KiB and 32 levels at most, errors naming the line, never
  quoting it), so an alias bomb is a usage error, not a process that grows without bound.
- vLLM (``FlexibleArgumentParser``): a flag may be spelt with ``_`` or ``-``; booleans are
  ``--x/--no-x``; ``--config`` as SGLang's, except that a YAML ``false`` is dropped for every
  key (write ``no-enable-prefix-caching: true``).
- both: argparse with ``allow_abbrev`` (a unique prefix of a flag is that flag), ``--x=1`` and
  ``--x 1``, a repeated flag's last value wins; an unknown argument is ``unrecognized arguments:
  ...`` with exit status 2.

Parsing never prints and never exits: argparse's output and status come back in
:class:`ArgsExit`, which the CLI prints.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import UnionType
from typing import Any, Literal, NoReturn

from servelab.core.knobs.configyaml import MAX_CONFIG_BYTES, load_config
from servelab.core.redaction import redact
from servelab.errors import KnobError, SimError
from servelab.sim.argbounds import out_of_bounds

__all__ = [
    "SCHEDULE_POLICIES",
    "SERVELAB_OPTIONS",
    "ArgsExit",
    "Engine",
    "ParsedArgs",
    "SglangArgs",
    "VllmArgs",
    "engine_flags",
    "expand_config",
    "parse_worker_args",
]

Role = Literal["prefill", "decode"]


class Engine(StrEnum):
    """Which engine a simulated worker speaks for."""

    SGLANG = "sglang"
    VLLM = "vllm"


#: SGLang's ``--schedule-policy`` choices (``server_args.py``).
SCHEDULE_POLICIES = ("lpm", "random", "fcfs", "dfs-weight", "lof", "priority", "routing-key")
_TRANSFER_BACKENDS = ("mooncake", "nixl", "ascend", "fake")
#: SGLang's ``--kv-cache-dtype`` choices (``server_args.py``); vLLM's (``CacheDType``).
_SGLANG_KV_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1")
_VLLM_KV_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")


class ArgsExit(SimError):
    """What argparse would have printed and the exit status: a usage error (2, on stderr) or the
    help text (0, on stdout)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text.rstrip("\n") or f"exit {status}")
        self.status = status
        self.text = text


def _arg(default: Any, help: str, **meta: Any) -> Any:
    """A dataclass field that is also an argparse option (``meta``: ``aliases``, ``choices``,
    ``required``)."""
    return field(default=default, metadata={"help": help, **meta})


@dataclass(frozen=True)
class SglangArgs:
    """The modelled subset of SGLang's server arguments, by SGLang's field names (``None``: not
    given, resolved at start-up as SGLang resolves it: ``servelab.sim.limits``)."""

    host: str = _arg("127.0.0.1", "The host of the HTTP server.")
    port: int = _arg(30000, "The port of the HTTP server.", required=True)
    served_model_name: str | None = _arg(None, "The model name in the API (servelab-sim).")
    disaggregation_mode: str = _arg(
        "null", "PD disaggregation mode (the subcommand's role).",
        choices=("null", "prefill", "decode"),
    )  # fmt: skip
    disaggregation_bootstrap_port: int | None = _arg(
        None, "The prefill's KV bootstrap server port (servelab also: --bootstrap-port).",
        aliases=("--bootstrap-port",),
    )  # fmt: skip
    disaggregation_transfer_backend: str = _arg(
        "mooncake", "The KV transfer backend (accepted; one modelled link).",
        choices=_TRANSFER_BACKENDS,
    )  # fmt: skip
    max_running_requests: int | None = _arg(None, "The maximum number of running requests.")
    max_total_tokens: int | None = _arg(None, "The maximum number of tokens in the KV pool.")
    chunked_prefill_size: int | None = _arg(
        None, "The maximum tokens of a prefill chunk (-1 disables chunked prefill)."
    )
    max_prefill_tokens: int = _arg(16384, "The maximum tokens of a prefill batch.")
    schedule_policy: str = _arg(
        "fcfs", "The scheduling policy of the waiting requests.", choices=SCHEDULE_POLICIES
    )
    disable_overlap_schedule: bool = _arg(
        False, "Disable the overlap scheduler (adds the CPU scheduling gap to every step)."
    )
    mem_fraction_static: float | None = _arg(
        None, "The fraction of GPU memory for weights and the KV pool."
    )
    context_length: int | None = _arg(None, "The model's maximum context length.")
    page_size: int | None = _arg(None, "The number of tokens in a KV page.")
    kv_cache_dtype: str = _arg(
        "auto", "The KV cache's data type (auto: the model's).", choices=_SGLANG_KV_DTYPES
    )
    revision: str | None = _arg(None, "The model's revision (a branch, tag or commit).")
    disable_radix_cache: bool = _arg(False, "Disable RadixAttention (the prefix cache).")
    enable_cache_report: bool = _arg(
        False, "Return usage.prompt_tokens_details.cached_tokens in responses."
    )
    enable_metrics: bool = _arg(False, "Serve /metrics (404 without, as SGLang).")
    enable_trace: bool = _arg(False, "Export the request spans to --otlp-traces-endpoint.")
    otlp_traces_endpoint: str = _arg("localhost:4317", "OTLP/gRPC HOST:PORT for the spans.")
    json_model_override_args: str = _arg(
        "{}", "A JSON object overriding the model's config (modelled: index_topk)."
    )


@dataclass(frozen=True)
class VllmArgs:
    """The modelled subset of vLLM's arguments, by vLLM's field names (``None``: resolved as
    vLLM resolves it, ``servelab.sim.limits``)."""

    host: str = _arg("127.0.0.1", "The host of the HTTP server.")
    port: int = _arg(8000, "The port of the HTTP server.", required=True)
    served_model_name: str | None = _arg(None, "The model name in the API (servelab-sim).")
    max_num_seqs: int | None = _arg(None, "The maximum number of sequences per iteration.")
    max_num_batched_tokens: int | None = _arg(
        None, "The maximum number of tokens per iteration (the prefill chunk)."
    )
    max_model_len: int | None = _arg(None, "The model's context length.")
    gpu_memory_utilization: float = _arg(0.9, "The fraction of GPU memory the engine may use.")
    block_size: int | None = _arg(None, "The number of tokens in a KV block.")
    model: str | None = _arg(None, "The model (servelab-sim unless given).")
    revision: str | None = _arg(None, "The model's revision (a branch, tag or commit).")
    kv_cache_dtype: str = _arg(
        "auto", "The KV cache's data type (auto: the model's).", choices=_VLLM_KV_DTYPES
    )
    enable_prefix_caching: bool | None = _arg(None, "Prefix caching (on unless --no-...).")
    enable_prompt_tokens_details: bool = _arg(
        False, "Return usage.prompt_tokens_details.cached_tokens in responses."
    )
    disable_log_stats: bool = _arg(False, "No vllm: series in /metrics (as vLLM).")
    kv_transfer_config: str | None = _arg(None, "The KV connector's JSON (accepted).")
    otlp_traces_endpoint: str | None = _arg(None, "OTLP/gRPC HOST:PORT for the request spans.")
    hf_overrides: str | None = _arg(
        None, "A JSON object overriding the model's config (modelled: index_topk)."
    )


ServerArgs = SglangArgs | VllmArgs


@dataclass(frozen=True)
class _Option:
    """A servelab-only option: its flag, argparse ``type`` (None: a bare flag), help, roles."""

    flag: str
    type: type | None
    help: str
    roles: tuple[Role, ...] = ("prefill", "decode")
    metavar: str | None = None
    engines: tuple[Engine, ...] = (Engine.SGLANG, Engine.VLLM)


#: servelab's own options (not the engines'), their names unchanged; ``dest`` is the flag's name.
SERVELAB_OPTIONS = (
    _Option("--engine", str, "Which engine to simulate: sglang (bootstrap rooms) or vllm (NIXL)."),
    _Option("--time-scale", float, "Scale of every modelled duration (SERVELAB_SIM_TIME_SCALE)."),
    _Option("--seed", int, "Default seed of the output text (SERVELAB_SIM_SEED)."),
    _Option("--warmup-s", float, "Modelled one-time warm-up of the first request (17 s)."),
    _Option("--admin", None, "Expose /_servelab/faults (loopback only)."),
    _Option("--waiting-timeout", float, "Seconds a request may wait for its KV.", ("decode",)),
    _Option(
        "--bootstrap-port", int, "The prefill's NIXL side channel port.", engines=(Engine.VLLM,)
    ),
    _Option("--transfer-fail-prob", float, "Fault: a KV transfer fails with this probability."),
    _Option("--abort-wedge", str, "Fault: N aborts within T s wedge the decode.", metavar="N/T"),
    _Option("--corrupt-under-load", int, "Fault: broken tool calls above X.", metavar="X"),
    _Option("--slow-start-s", float, "Fault: /health 503 that much longer."),
    _Option("--transfer-fail-over-tokens", int, "Fault: prompts over N fail.", metavar="N"),
    _Option("--wedge", None, "Fault: start wedged (requests hang, /health 200)."),
    _Option("--no-metrics", None, "Fault: answer /metrics with 404."),
    _Option("--fail-fast-s", float, "Fault: answer 500 at once for S seconds.", metavar="S"),
    _Option(
        "--batch-nondeterminism",
        float,
        "Fault: greedy tokens flip at RATE x batch/64.",
        metavar="RATE",
    ),
    _Option("--kv-corrupt", None, "Fault: decode from wrong KV after a PD hand-off."),
    _Option("--scheduler-crash", None, "Fault: the scheduler dies (503, exit 1)."),
    _Option("--kv-leak", float, "Fault: a hand-off leaks its KV pages at RATE.", metavar="RATE"),
)


@dataclass(frozen=True)
class ParsedArgs:
    """A worker's command line, parsed: the engine's arguments (as given) and servelab's options
    that were given (by option name: ``time_scale``, ``admin``, ``transfer_fail_prob``...)."""

    engine: Engine
    role: Role
    server: ServerArgs
    servelab: Mapping[str, Any]


# ------------------------------------------------------------------------------------ parser
class _Parser(argparse.ArgumentParser):
    """argparse that returns what it would print, and raises instead of exiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._printed: list[str] = []

    def _print_message(self, message: str, file: Any = None) -> None:
        self._printed.append(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise ArgsExit(status, "".join(self._printed) + (message or ""))

    def error(self, message: str) -> NoReturn:
        """argparse's usage error, its message masked by the one redaction policy: it may quote
        a secret typed on the command line (``unrecognized arguments: --api-key sk-...``)."""
        self._printed.append(self.format_usage())
        self.exit(2, f"{self.prog}: error: {redact(message)}\n")


def _dashes(arg: str) -> str:
    """vLLM's ``FlexibleArgumentParser`` spelling: ``--x_y`` (and ``--x_y=v``) is ``--x-y``."""
    if not arg.startswith("--"):
        return arg
    key, eq, value = arg.partition("=")
    return key.replace("_", "-") + eq + value


def _base_type(hint: Any) -> type:
    """``int`` for ``int | None``, and so on."""
    if isinstance(hint, UnionType):
        return next(t for t in typing.get_args(hint) if t is not type(None))  # type: ignore[no-any-return]
    return hint  # type: ignore[no-any-return]


def _add_server_args(
    parser: argparse.ArgumentParser, cls: type[ServerArgs], engine: Engine
) -> None:
    hints = typing.get_type_hints(cls)
    group = parser.add_argument_group(f"{engine.value} arguments (modelled subset)")
    for f in dataclasses.fields(cls):
        meta = f.metadata
        flags = [f"--{f.name.replace('_', '-')}", *meta.get("aliases", ())]
        kind = _base_type(hints[f.name])
        kwargs: dict[str, Any] = {"dest": f.name, "help": meta["help"], "default": f.default}
        if meta.get("required"):
            kwargs["required"] = True
        if kind is bool:
            vllm_bool = engine is Engine.VLLM
            kwargs["action"] = argparse.BooleanOptionalAction if vllm_bool else "store_true"
        else:
            kwargs.update(type=kind, choices=meta.get("choices"))
        group.add_argument(*flags, **kwargs)


def _add_servelab_options(parser: argparse.ArgumentParser, role: Role, engine: Engine) -> None:
    group = parser.add_argument_group("servelab options (not the engine's)")
    for opt in SERVELAB_OPTIONS:
        if role not in opt.roles or engine not in opt.engines:
            continue
        dest = opt.flag[2:].replace("-", "_")
        if opt.type is None:
            group.add_argument(opt.flag, dest=dest, action="store_true", default=None,
                               help=opt.help)  # fmt: skip
        elif opt.flag == "--engine":
            group.add_argument(opt.flag, dest=dest, choices=[e.value for e in Engine],
                               default=Engine.SGLANG.value, help=opt.help)  # fmt: skip
        else:
            group.add_argument(opt.flag, dest=dest, type=opt.type, metavar=opt.metavar,
                               default=None, help=opt.help)  # fmt: skip


def _parser(engine: Engine, role: Role) -> _Parser:
    parser = _Parser(prog=f"servelab sim {role}", allow_abbrev=True)
    parser.add_argument("--config", help="A YAML file of arguments (the command line wins).")
    _add_server_args(parser, VllmArgs if engine is Engine.VLLM else SglangArgs, engine)
    _add_servelab_options(parser, role, engine)
    return parser


def engine_flags(engine: Engine, role: Role) -> frozenset[str]:
    """Every flag the simulated ``engine``'s parser for ``role`` reads (its own and servelab's;
    a vLLM boolean's ``--no-`` form too)."""
    parser = _parser(engine, role)
    return frozenset(flag for action in parser._actions for flag in action.option_strings)


def _engine_of(argv: Sequence[str]) -> Engine:
    """``--engine`` as argparse would read it (abbreviations and ``=`` included), before the
    engine's own parser is built; a bad value is left for that parser to reject."""
    pre = _Parser(add_help=False, allow_abbrev=True)
    pre.add_argument("--engine", default=Engine.SGLANG.value)
    try:
        known, _ = pre.parse_known_args(list(argv))
    except ArgsExit:
        return Engine.SGLANG
    return Engine.VLLM if known.engine == Engine.VLLM.value else Engine.SGLANG


# ------------------------------------------------------------------------------------ --config
def _config_file(argv: Sequence[str]) -> tuple[int, Path] | None:
    """Where ``--config FILE`` is (both engines look for the exact token ``--config``)."""
    at = [i for i, arg in enumerate(argv) if arg == "--config"]
    if not at:
        return None
    if len(at) > 1:
        raise SimError("Multiple config files specified! Only one allowed.")
    if at[0] == len(argv) - 1:
        raise SimError("No config file specified after --config flag!")
    path = Path(argv[at[0] + 1])
    if path.suffix.lower() not in (".yaml", ".yml"):
        suffix = path.suffix or "no suffix"
        raise SimError(f"Config file must be YAML format (.yaml/.yml), got: {suffix} ({path})")
    return at[0], path


def _config_args(data: Mapping[str, Any], engine: Engine, bools: set[str]) -> list[str]:
    """The file's keys as arguments. A ``true`` gives the bare flag (SGLang: for a store_true
    flag; any other key gets ``--key true``), ``false`` is dropped (vLLM: always; SGLang: for a
    store_true flag)."""
    out: list[str] = []
    for key, value in data.items():
        flag = f"--{key}"
        norm = str(key).replace("-", "_")
        if isinstance(value, bool):
            if engine is Engine.VLLM or norm in bools:
                out += [flag] if value else []
            else:
                out += [flag, str(value).lower()]
        elif isinstance(value, list):
            out += [flag, *(str(v) for v in value)] if value else []
        elif isinstance(value, dict):
            out += [flag, json.dumps(value)]
        else:
            out += [flag, str(value)]
    return out


def expand_config(argv: Sequence[str], engine: Engine, bools: set[str]) -> list[str]:
    """``argv`` with ``--config FILE`` replaced by the file's arguments, put first (so the
    command line wins). ``bools``: the store_true destinations (SGLang's rule for ``false``)."""
    found = _config_file(argv)
    if found is None:
        return list(argv)
    at, path = found
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise SimError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    try:
        data = load_config(raw, str(path)) or {}
    except KnobError as exc:  # bounded, and never quoting the file's line (it may hold a key)
        raise SimError(f"cannot read config file {exc}") from None
    if not isinstance(data, dict):
        raise SimError(f"Config file must contain a dictionary at root level ({path})")
    return [*_config_args(data, engine, bools), *argv[:at], *argv[at + 2 :]]


# ------------------------------------------------------------------------------------ parse
def parse_worker_args(role: Role, argv: Sequence[str]) -> ParsedArgs:
    """Parse a worker's command line (``--config`` expanded) as its engine would.

    A number outside its bounds (:mod:`servelab.sim.argbounds`) and a config file that cannot be
    read are usage errors too, naming the option (or the file) and the value.
    Raises :class:`ArgsExit` (usage error: status 2; ``--help``: 0) and :class:`SimError` for a
    config file that cannot be used, or a ``--disaggregation-mode`` that is not the role.
    """
    engine = _engine_of(argv)
    parser = _parser(engine, role)
    bools = {a.dest for a in parser._actions if isinstance(a, argparse._StoreTrueAction)}
    try:
        args = expand_config(argv, engine, bools)
    except SimError as exc:
        parser.error(f"argument --config: {exc}")
    ns = vars(parser.parse_args([_dashes(a) for a in args] if engine is Engine.VLLM else args))
    cls: type[ServerArgs] = VllmArgs if engine is Engine.VLLM else SglangArgs
    server = cls(**{f.name: ns.pop(f.name) for f in dataclasses.fields(cls)})
    ns.pop("config", None)
    ns.pop("engine", None)
    mode = getattr(server, "disaggregation_mode", "null")
    if mode not in ("null", role):
        parser.error(f"--disaggregation-mode {mode} does not match `servelab sim {role}`")
    given = {k: v for k, v in ns.items() if v is not None}
    outside = out_of_bounds({**dataclasses.asdict(server), **given})
    if outside is not None:
        flag, value, bound = outside
        parser.error(f"argument {flag}: {value!r} is not {bound.describe()}")
    return ParsedArgs(engine, role, server, given)
