"""Knob rules, pure: which variables may be read, how a file value compares with a live one, which
file names are backups, and parsing an env file without ever echoing a line of it.

Only declared knobs and the names on :data:`ENV_ALLOW_LIST` are ever read out of an env file or a
process environment into results (:func:`tracked_names`); a parse error names the file and line,
never the line's content (it may hold a secret).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

from servelab.core.deploy.spec import DeploymentSpec, ServiceSpec
from servelab.core.knob import parse_knob
from servelab.core.knobs.envfile import EnvFile, parse_envfile
from servelab.errors import KnobError

__all__ = [
    "ENV_ALLOW_LIST",
    "LiveVerdict",
    "backup_names",
    "check_knob_name",
    "live_verdict",
    "parse_env_bytes",
    "tracked_names",
]

#: Variables whose values are safe to show besides the declared knobs (settings, not secrets).
#: They are compared file-vs-live only when the env file sets them.
ENV_ALLOW_LIST: tuple[str, ...] = (
    "SERVELAB_SIM_TIME_SCALE",
    "SERVELAB_SIM_WARMUP_S",
    "SERVELAB_SIM_SEED",
    "SERVELAB_SIM_SLOW_START_S",
    "SERVELAB_SIM_TRANSFER_FAIL_PROB",
    "SERVELAB_SIM_ABORT_WEDGE",
    "SERVELAB_SIM_CORRUPT_UNDER_LOAD",
    "SERVELAB_SIM_TRANSFER_FAIL_OVER_TOKENS",
    "SERVELAB_SIM_WEDGE",
    "SERVELAB_SIM_NO_METRICS",
    "SERVELAB_SIM_FAIL_FAST_S",
    "SERVELAB_SIM_BATCH_NONDETERMINISM",
    "SERVELAB_SIM_KV_CORRUPT",
    "SERVELAB_SIM_SCHEDULER_CRASH",
    "SERVELAB_SIM_KV_LEAK",
    "SERVELAB_PROXY_STALL_REUSED_AFTER",
    "SERVELAB_PROXY_BUFFER",
    "SERVELAB_PROXY_CUT_AFTER_BYTES",
    "SERVELAB_PROXY_CHUNK_DELAY_MS",
    "SGLANG_SM120_MLA_KV_TILE",
    "SGLANG_NSA_INDEX_KEYS_BF16",
    "VLLM_NSA_INDEX_KEYS_BF16",
    "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT",
    "SGLANG_DISAGGREGATION_WAITING_TIMEOUT",
    "VLLM_NIXL_ABORT_REQUEST_TIMEOUT",
    "CUDA_VISIBLE_DEVICES",
)


class LiveVerdict(StrEnum):
    """A knob's file value against its live one (worded in :mod:`servelab.report.knob`)."""

    MATCH = "match"  # the same value
    UNSET = "unset"  # set in neither: the engine's default
    RESTART_NEEDED = "restart_needed"  # in the file, not live
    LOST_ON_RESTART = "lost_on_restart"  # live, not in the file
    DIFFERS = "differs"  # both set, to different values

    @property
    def ok(self) -> bool:
        """The process runs with what the file says."""
        return self in (LiveVerdict.MATCH, LiveVerdict.UNSET)


def tracked_names(
    svc: ServiceSpec, file_names: Iterable[str], allow: Iterable[str] = ENV_ALLOW_LIST
) -> list[str]:
    """The env variables whose values may be read: the declared env knobs (not the argument
    knobs: they are read from the command line), then allow-listed names in the file."""
    in_file = set(file_names)
    extra = sorted(n for n in set(allow) if n in in_file and n not in svc.knobs)
    return [*(name for name in svc.knobs if parse_knob(name).is_env), *extra]


def check_knob_name(spec: DeploymentSpec, service: str, name: str) -> ServiceSpec:
    """The service's spec if ``name`` is a declared knob of it (or allow-listed), else KnobError."""
    svc = spec.service(service)
    if name in svc.knobs or name in ENV_ALLOW_LIST:
        return svc
    declared = ", ".join(svc.knobs) or "none"
    raise KnobError(
        f"{name!r} is not a declared knob of {service!r} (declared: {declared}); "
        f"declare it under services.{service}.knobs in the spec"
    )


def live_verdict(file: str | None, live: str | None) -> LiveVerdict:
    """Compare a knob's env-file value with its live value."""
    if file == live:
        return LiveVerdict.UNSET if file is None else LiveVerdict.MATCH
    if live is None:
        return LiveVerdict.RESTART_NEEDED
    if file is None:
        return LiveVerdict.LOST_ON_RESTART
    return LiveVerdict.DIFFERS


def backup_names(listing: Iterable[str], base: str, kind: str = "bak") -> list[str]:
    """The names in ``listing`` that are timestamped copies of ``base``, oldest first.

    ``kind`` ``bak``: the backups taken before each change (``BASE.bak-STAMP``); another kind
    (``pre-restart``) names the copies a restart takes aside (``BASE.pre-restart-STAMP``).
    """
    pattern = re.compile(re.escape(f"{base}.{kind}-") + r"\d{8}T\d{6}(\.\d+)?Z\Z")
    return sorted(name for name in listing if pattern.match(name))


#: Byte order marks of encodings an env file must not be in (systemd reads UTF-8), longest first.
_FOREIGN_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32LE", "FF FE 00 00"),
    (b"\x00\x00\xfe\xff", "UTF-32BE", "00 00 FE FF"),
    (b"\xff\xfe", "UTF-16LE", "FF FE"),
    (b"\xfe\xff", "UTF-16BE", "FE FF"),
)


def parse_env_bytes(raw: bytes, path: str) -> EnvFile:
    """Parse an env file; a parse error names the file and line but never echoes the line.

    A UTF-8 byte order mark is read past (and kept when the file is rewritten); a file in UTF-16
    or UTF-32 is refused, naming the file and the encoding: systemd reads env files as UTF-8, and
    servelab never rewrites one in another encoding. Bytes that are not UTF-8 (``NAME=caf\\xe9``
    in Latin-1) are kept as they are: the values read show each as U+FFFD, and the lines not
    edited are written back byte for byte (:meth:`~servelab.core.knobs.envfile.EnvFile.encode`)."""
    for mark, encoding, shown in _FOREIGN_BOMS:
        if raw.startswith(mark):
            raise KnobError(
                f"{path}: the file is {encoding} (byte order mark {shown}), not UTF-8, which "
                f"systemd reads; convert it (iconv -f {encoding} -t UTF-8) and try again"
            )
    try:
        return parse_envfile(raw.decode("utf-8", "surrogateescape"), source=path)
    except KnobError as exc:
        where = re.match(r"(.*?:\d+): ", str(exc))
        place = where.group(1) if where else path
        raise KnobError(f"{place}: not a NAME=VALUE line (its content is not shown)") from None
