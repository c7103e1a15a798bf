"""The state of the stop signals while servelab starts, before its command takes them over (pure
standard library: :mod:`servelab.__main__` installs the handler before the CLI's imports).

A stop signal in a command's first second (while Python imports click, rich, the ledger, the
command's own module...) would print a ``KeyboardInterrupt`` traceback, or (SIGTERM, SIGHUP) end
the process by the signal with nothing said. The start-up handler exits 128 + the signal's
number with one line on stderr (:func:`said`: ``interrupted``, ``interrupted by SIGTERM``) and,
with ``--json`` among the words before ``--`` (:func:`json_command`), first prints the failure
document a command stopped before it began prints (:func:`stopped_document`: the keys of
:func:`servelab.cli.boundary._failure_json`'s, nothing to clean up, nothing left). Once the
command began (:func:`begin`, one state whichever copy of ``__main__`` runs), its own handling
says what a stop did; the handler put back after it says its one line only.

What no handler can cover: a signal before servelab's first line runs (the interpreter's own
start, ``site``: about 20 ms after ``exec``) ends the process as Python's defaults do.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence

__all__ = [
    "GROUPS",
    "STARTUP_HANDLER_MARK",
    "began",
    "begin",
    "json_command",
    "said",
    "stopped_document",
]

#: The attribute that marks the start-up handler (the CLI puts Python's default SIGINT back).
STARTUP_HANDLER_MARK = "servelab_startup"

#: The commands that are groups (``ledger export``): their path is two words.
GROUPS = frozenset({"case", "knob", "ledger", "sim", "trace"})

_began: list[bool] = []


def _name(word: str) -> bool:
    return word.isascii() and word[:1].isalpha() and word.replace("-", "").isalnum()


def json_command(words: Sequence[str]) -> str | None:
    """The command path (``ab``, ``ledger export``) of the command line ``words`` (the program's
    name left out) when ``--json`` is among them before ``--``; None otherwise, or when no
    command is named."""
    before = list(words[: list(words).index("--")] if "--" in words else words)
    if "--json" not in before:
        return None
    names = [w for w in before if not w.startswith("-")]
    if not names or not _name(names[0]):
        return None
    if names[0] in GROUPS and len(names) > 1 and _name(names[1]):
        return f"{names[0]} {names[1]}"
    return names[0]


def said(signum: int) -> str:
    """``interrupted`` (SIGINT), else ``interrupted by SIGTERM``."""
    if signum == signal.SIGINT:
        return "interrupted"
    return f"interrupted by {signal.Signals(signum).name}"


def stopped_document(command: str, signum: int) -> str:
    """The ``--json`` failure document of ``command`` stopped by ``signum`` before it began (its
    words plain names: no escaping needed, no ``json`` import in a signal handler); its
    ``error_type`` is ``Interrupted`` whichever the signal, as a command stopped later says."""
    return (f'{{\n  "command": "{command}",\n  "ok": false,\n  "error": "{said(signum)}",\n'
            f'  "error_type": "Interrupted",\n  "exit_code": {128 + signum}\n}}\n')  # fmt: skip


def begin() -> None:
    """The command began: from now on its own handling says what a stop did (its document)."""
    _began.append(True)


def began() -> bool:
    """Whether the command began (:func:`begin`)."""
    return bool(_began)
