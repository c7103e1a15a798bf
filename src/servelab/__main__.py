"""`python -m servelab` and the ``servelab`` console script: the command-line interface.

Ctrl-C in the first second of a command (while Python imports click, rich, the ledger...) would
print a ``KeyboardInterrupt`` traceback: a handler installed before those imports exits 130 with
one line instead. The command's own handling (:class:`servelab.cli.boundary.ServelabGroup`: its
cleanup, record and hint) takes over as the command begins (:data:`STARTUP_HANDLER_MARK`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType

__all__ = ["STARTUP_HANDLER_MARK", "main"]

#: The attribute that marks the start-up SIGINT handler (the CLI puts Python's default back).
#: The exit codes of a command a stop signal ended (SIGHUP, SIGINT, SIGTERM: 128 + the signal).
_BY_SIGNAL = frozenset({129, 130, 143})
STARTUP_HANDLER_MARK = "servelab_startup"


def _interrupted_at_startup(_signum: int, _frame: FrameType | None) -> None:
    """Ctrl-C before the command began: nothing to clean up, one line, exit 130."""
    sys.stderr.write("interrupted\n")
    sys.stderr.flush()
    os._exit(130)


setattr(_interrupted_at_startup, STARTUP_HANDLER_MARK, True)


def main() -> None:
    """Entry point of the ``servelab`` console script (and of ``python -m servelab``)."""
    with contextlib.suppress(ValueError):  # not the main thread: the signal is not ours
        signal.signal(signal.SIGINT, _interrupted_at_startup)
    from servelab.cli import main as cli_main  # after the handler, on purpose

    try:
        cli_main()
    except SystemExit as stop:
        if stop.code in _BY_SIGNAL:  # stopped by a signal, said: a late one changes nothing
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                with contextlib.suppress(ValueError):
                    signal.signal(sig, signal.SIG_IGN)
        raise


if __name__ == "__main__":
    main()
