"""`python -m servelab` and the ``servelab`` console script: the command-line interface.

A stop signal in the first second of a command (while Python imports click, rich, the ledger...)
would print a ``KeyboardInterrupt`` traceback, or end the process with nothing said: a handler
installed before those imports exits 128 + the signal with one line instead, and with ``--json``
prints the stopped command's failure document first (:mod:`servelab.startup`). A signal ignored
when the process started (``nohup``'s SIGHUP) stays ignored. The command's own handling
(:class:`servelab.cli.boundary.ServelabGroup`: its cleanup, record and hint) takes over as the
command begins (:data:`~servelab.startup.STARTUP_HANDLER_MARK`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType

from servelab.startup import STARTUP_HANDLER_MARK, began, json_command, said, stopped_document

__all__ = ["main"]

#: The exit codes of a command a stop signal ended (SIGHUP, SIGINT, SIGTERM: 128 + the signal).
_BY_SIGNAL = frozenset({129, 130, 143})
_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _stopped_at_startup(signum: int, _frame: FrameType | None) -> None:
    """A stop signal before the command began: its document under ``--json``, one line, exit
    128 + the signal's number (nothing to clean up). After the command: the line only."""
    command = None if began() else json_command(sys.argv[1:])
    with contextlib.suppress(OSError, ValueError, RuntimeError):  # a closed or full stream
        if command is not None:
            sys.stdout.write(stopped_document(command, signum))
            sys.stdout.flush()
        sys.stderr.write(said(signum) + "\n")
        sys.stderr.flush()
    os._exit(128 + signum)


setattr(_stopped_at_startup, STARTUP_HANDLER_MARK, True)


def main() -> None:
    """Entry point of the ``servelab`` console script (and of ``python -m servelab``)."""
    with contextlib.suppress(ValueError):  # not the main thread: the signals are not ours
        for sig in _STOPS:
            if signal.getsignal(sig) != signal.SIG_IGN:
                signal.signal(sig, _stopped_at_startup)
    from servelab.cli import main as cli_main  # after the handler, on purpose

    try:
        cli_main()
    except SystemExit as stop:
        if stop.code in _BY_SIGNAL:  # stopped by a signal, said: a late one changes nothing
            for sig in _STOPS:
                with contextlib.suppress(ValueError):
                    signal.signal(sig, signal.SIG_IGN)
        raise


if __name__ == "__main__":
    main()
