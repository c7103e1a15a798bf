"""A service's log: the file its launch appends its output to (``<state_dir>/logs/<service>.log``
on its host), and the tail of it a failure quotes.

A log is a regular file (or none yet: the launch makes it). One that is a device, a FIFO or a
symbolic link (``logs/decode.log -> /dev/full``, or to a file of someone's elsewhere, or to
nothing) is never written to, and never read: the
pre-flight of ``up`` and ``restart`` refuses it before anything stops
(:mod:`servelab.ops.deploy.writable`, :data:`LOG_REFUSED`), and its tail says so
(:data:`LOG_NOT_READ`) instead of reading ``/dev/full`` until memory runs out. A regular log is
read from its end only (:meth:`~servelab.io.hosts.host.Host.read_tail`): a 2 GB log costs what
its last lines do.
"""

from __future__ import annotations

from collections.abc import Collection

from servelab.core.printable import printable_lines
from servelab.core.redaction import redact
from servelab.errors import HostError
from servelab.io.hosts.host import NOT_A_REGULAR_FILE, Host

__all__ = ["LOG_NOT_READ", "LOG_REFUSED", "tail"]

#: Why the pre-flight refuses a log that is not a regular file.
LOG_REFUSED = (
    f"{NOT_A_REGULAR_FILE} (a device, a FIFO or a symbolic link): a log is appended to and its "
    "tail read, never through a link; remove it, and the start makes a new log there"
)


#: What a log's tail says when the log is not a regular file (a device, a FIFO or a link to one:
#: ``/dev/full`` never ends), never read.
LOG_NOT_READ = "(log not read: not a regular file but a device, a FIFO or a link to one)"


async def tail(
    host: Host, path: str, *, max_bytes: int = 1500, secrets: Collection[str] = ()
) -> str:
    """The whole lines in the last ``max_bytes`` of a (log) file, with every one of ``secrets``
    (the service's env values) redacted (:func:`~servelab.core.redaction.redact`); "" when
    it cannot be read, :data:`LOG_NOT_READ` when it is not a regular file. Only those last
    bytes are read (:meth:`~servelab.io.hosts.host.Host.read_tail`: a 2 GB log is not). A line
    cut by the start of the tail is left out: a value it held would show in part. Its control
    characters but line ends and tabs are escaped
    (:func:`~servelab.core.printable.printable_lines`): an ``ESC`` sequence a hostile log holds
    never drives the terminal it is quoted to."""
    try:
        data = await host.read_tail(path, max_bytes + 1)
    except HostError as exc:
        return LOG_NOT_READ + "\n" if str(exc).endswith(NOT_A_REGULAR_FILE) else ""
    text = data[-max_bytes:].decode("utf-8", "replace")
    if len(data) > max_bytes:
        text = text.partition("\n")[2]
    return printable_lines(redact(text, secrets))
