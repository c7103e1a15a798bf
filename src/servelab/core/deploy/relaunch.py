"""Does a running router run as its spec says (issue 38, the nineteenth pass's M4)? The one rule:
rebuild the command line the spec would launch now (:func:`~servelab.core.deploy.topology.
router_argv`) and compare it, setting by setting, with the command line the router was launched
with (its pid record's ``argv``, kept as servelab launched it, secret-flag values masked).

A router reads its settings at start only (``--policy``, ``--health-check-interval-secs``, its
workers, ...): an edited router table changes nothing until the router is restarted, and the
router writes its title over its own argv (``sglang::router``), so ``/proc/PID/cmdline`` cannot
tell. Every flag is compared, not a list of known ones: a setting added to the spec's router table
later, an ``extra_args`` or ``args`` word, the router's kind (its module), its address and its
workers are covered alike. The python that ran it is not a setting (a reinstalled servelab).

A command line is read as settings: a word starting ``--`` (or ``-x``) opens one, the words after
it up to the next flag are its value (``--prefill URL 41198``), ``--flag=value`` too; a flag
given twice keeps both values in order. Both sides are compared masked (the record holds them so,
:func:`~servelab.core.redaction.redact_words`): a change of a secret-flag's value is not seen.

Pure: data and functions of data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from servelab.core.deploy.routers import ROUTERS
from servelab.core.deploy.spec import DeploymentSpec
from servelab.core.deploy.topology import router_argv
from servelab.core.redacted import StoredText
from servelab.core.redaction import redact_words

__all__ = [
    "KIND",
    "SETTING_OF_FLAG",
    "SettingChange",
    "argv_changes",
    "argv_settings",
    "launched_argv",
    "router_changes",
]

#: The setting a router's program (``-m MODULE``) is: the router table's ``kind``.
KIND = "kind"
#: The router table's key (or the spec's field) each flag servelab builds comes from; a flag not
#: here (an ``extra_args``/``args`` word) is named as itself.
SETTING_OF_FLAG: Mapping[str, str] = {
    "--host": "url (host)",
    "--port": "url (port)",
    "--prefill": "prefill workers",
    "--decode": "decode workers",
    "--policy": "policy",
    "--prefill-policy": "prefill_policy",
    "--decode-policy": "decode_policy",
    "--prometheus-host": "prometheus_host",
    "--prometheus-port": "prometheus_port",
    "--worker-startup-timeout-secs": "worker_startup_timeout_s",
    "--worker-startup-check-interval": "worker_startup_check_interval",
    "--health-check-interval-secs": "health_check_interval_s",
    "--request-timeout-secs": "request_timeout_s",
    "--health-failure-threshold": "health_failure_threshold",
    "--health-success-threshold": "health_success_threshold",
}
_MODULE_KINDS: Mapping[str, str] = {r.module: r.kind.value for r in ROUTERS.values()}


@dataclass(frozen=True)
class SettingChange:
    """One setting the spec and the running router disagree on: its name (the router table's
    key, else the flag), the flag, and its value in the command line the spec would launch
    (``spec``) and in the one the router was launched with (``live``); None: not given there;
    ``""``: given without a value. A flag given twice: its values joined with ``", "``. Encoded
    (``--json``, the ledger) with what :func:`~servelab.core.redaction.redact` finds masked."""

    setting: str
    flag: str
    spec: StoredText | None
    live: StoredText | None


def _is_flag(word: str) -> bool:
    if word.startswith("--"):
        return len(word) > 2
    return len(word) > 1 and word[0] == "-" and word[1].isalpha()


def argv_settings(argv: Sequence[str]) -> dict[str, list[str]]:
    """A launched command line (``python -m MODULE --flag value ...``) as settings: the flag ->
    its values, one per time it is given (a value's words joined by a space); the program
    (``-m MODULE``) under :data:`KIND`, as the router's kind when it is one's module. The first
    word (the python) is not a setting."""
    words = list(argv[1:])
    settings: dict[str, list[str]] = {}
    if len(words) >= 2 and words[0] == "-m":
        settings[KIND] = [_MODULE_KINDS.get(words[1], words[1])]
        words = words[2:]
    flag: str | None = None
    values: list[str] = []

    def close() -> None:
        if flag is not None:
            settings.setdefault(flag, []).append(" ".join(values))

    for word in words:
        if _is_flag(word):
            close()
            flag, _, value = word.partition("=")
            values = [value] if "=" in word else []
        elif flag is None:  # a word before any flag: part of the program
            settings.setdefault(KIND, []).append(word)
        else:
            values.append(word)
    close()
    return settings


def _shown(values: list[str] | None) -> str | None:
    return None if values is None else ", ".join(values)


def argv_changes(wanted: Sequence[str], launched: Sequence[str]) -> list[SettingChange]:
    """The settings of ``wanted`` (the command line the spec would launch) that ``launched``
    (the one the process was started with) does not have as ``wanted`` has them, in ``wanted``'s
    order, then those only ``launched`` gives; empty when they agree (the python aside)."""
    spec, live = argv_settings(wanted), argv_settings(launched)
    changes = []
    for flag in [*spec, *(flag for flag in live if flag not in spec)]:
        if spec.get(flag) != live.get(flag):
            name = SETTING_OF_FLAG.get(flag, flag)
            changes.append(
                SettingChange(name, flag, _shown(spec.get(flag)), _shown(live.get(flag)))
            )
    return changes


def launched_argv(stored: object) -> list[str] | None:
    """A pid record's ``argv`` as a command line: a non-empty list of strings; None for
    anything else (none kept, a record written by hand or damaged: a string, numbers, null)."""
    if not isinstance(stored, list) or not stored:
        return None
    return list(stored) if all(isinstance(word, str) for word in stored) else None


def router_changes(spec: DeploymentSpec, name: str, launched: Sequence[str]) -> list[SettingChange]:
    """How router service ``name`` of ``spec`` would be launched now against how it was
    (``launched``: its pid record's argv, secret-flag values masked): each setting that differs;
    empty when it runs as the spec says. Compared masked on both sides, with the launched
    python."""
    python = launched[0] if launched else ""
    wanted = redact_words(router_argv(spec, name, python))
    return argv_changes(wanted, redact_words(launched))
