"""The one exception tree of servelab.

Every error servelab raises on purpose is a :class:`ServelabError`. Each also inherits the built-in
exception it resembles, so callers that only know the standard library still catch it. Third-party
errors (aiohttp, asyncssh, sqlite3, pydantic) are translated at one boundary with
``raise ... from exc``.

::

    ServelabError(Exception)
    ├── SpecError(ValueError)             bad deployment spec: names the file and the field path
    ├── DeployError(RuntimeError)         bring-up, restart or stop went wrong
    │   ├── ServiceStartError             a service's process could not start or exited early
    │   │   └── PortRefused               up over a port another deployment serves
    │   │                                 (servelab.core.deploy.refusals: it carries the refusal)
    │   ├── HealthTimeout(TimeoutError)   readiness not reached before the deadline
    │   ├── CommandTimeout(TimeoutError)  a start/stop command outlived its timeout
    │   ├── RouterApiError                the router's worker API answered otherwise than expected
    │   │   └── WorkerListError(ValueError) its worker list (200) is not of a worker list's shape,
    │   │                                 or not one init can use (over a bound, no prefill/decode)
    │   ├── DeploymentBusy                another command holds the deployment's lock
    │   │                                 (servelab.io.lock: it carries the holder)
    │   ├── RestartLeftDown               a restart failed once it had stopped services
    │   │                                 (servelab.ops.deploy.results: it carries the
    │   │                                 report: what is down, the command to bring it back)
    │   └── PutBackAfterFailure           a set value the deployment would not take, put back
    │                                     as found (servelab.ops.deploy.refused: it carries
    │                                     what the put-back did, or what is down)
    ├── VerifyRefused(RuntimeError)       verify of a spec whose services another deployment's
    │                                     processes serve (servelab.core.deploy.refusals)
    ├── HostError(OSError)                running commands or touching files on a host failed
    │   └── SSHError(ConnectionError)     the SSH connection itself failed
    ├── KnobError(ValueError)             unknown service/knob, bad env file line
    │   └── UnreadFileError               an env/config file never read (FIFO, device, too large)
    ├── OptionError(ValueError)           a command-line option's text does not parse
    │   └── RunRefused                    ab/tune --resume of another deployment's run
    │                                     (servelab.core.deploy.refusals: it carries the refusal)
    ├── UrlError(ValueError)              a typed server URL is not http(s)://HOST[:PORT][/PATH]
    │                                     (servelab.core.urls; an option or a spec field says
    │                                     which)
    ├── TraceError(ValueError)            a trace file's line is not a trace entry
    ├── StoreError(RuntimeError)          the ledger could not be read or written
    │   ├── SchemaError                   the ledger's schema is newer than this servelab
    │   ├── NotALedger(ValueError)        the file is not a (complete) servelab ledger: another
    │   │                                 program's SQLite database, a FIFO (refused unwritten)
    │   └── RecordError(ValueError)       a stored or printed record does not fit its type
    │       └── DamagedRow                a ledger row (a hand edit) does not read as its record
    ├── BenchError(RuntimeError)          a benchmark or A/B could not run
    ├── CaseError(ValueError)             a case command that does not fit the case's state
    │   ├── CaseRefused                   restore, revert or bisect --resume of another
    │   │                                 deployment's case (servelab.core.deploy.refusals)
    │   └── VerdictRefused                verdicts the case's evidence contradicts
    │                                     (servelab.ops.case.case: it carries the refusals)
    ├── MetricsError(ValueError)          a metrics source answered something unreadable
    ├── ProtocolError(ValueError)         a server's bytes are not valid HTTP/1.1
    ├── ModelNotListed(LookupError)       the entry point lists no model (GET /v1/models): no
    │                                     request can name one, and none is made up
    └── SimError(RuntimeError)            the simulator was misconfigured

    asyncio.CancelledError
    ├── DeployInterrupted                 up/restart cancelled; carries the report already
    │                                     recorded (servelab.ops.deploy.results)
    └── PutBackInterrupted                a knob-changing command stopped by a signal; carries
                                          what putting the deployment back did
                                          (servelab.ops.deploy.putback)

The CLI maps them to exit codes: ``SpecError``/``KnobError``/``CaseError``/``OptionError``/
``UrlError``/``TraceError``/``DamagedRow``/``NotALedger`` (bad input) and ``WorkerListError``
(a router's worker list of another shape, or one ``init`` cannot use) → 2, everything else → 1;
an ``OptionError`` of a shared option's parser becomes click's usage error naming the option.
"""

from __future__ import annotations

__all__ = [
    "BenchError",
    "CaseError",
    "CommandTimeout",
    "DamagedRow",
    "DeployError",
    "DeploymentBusy",
    "HealthTimeout",
    "HostError",
    "KnobError",
    "MetricsError",
    "ModelNotListed",
    "NotALedger",
    "OptionError",
    "ProtocolError",
    "RecordError",
    "RouterApiError",
    "SSHError",
    "SchemaError",
    "ServelabError",
    "ServiceStartError",
    "SimError",
    "SpecError",
    "StoreError",
    "TraceError",
    "UnreadFileError",
    "UrlError",
    "WorkerListError",
]


class ServelabError(Exception):
    """Base of every error servelab raises on purpose."""


class SpecError(ServelabError, ValueError):
    """A deployment spec is invalid. ``source`` is the file, ``path`` the field path."""

    def __init__(self, message: str, *, source: str = "<spec>", path: str = "") -> None:
        self.source = source
        self.path = path
        self.reason = message
        where = f"{source}: {path}: " if path else f"{source}: "
        super().__init__(where + message)


class DeployError(ServelabError, RuntimeError):
    """Bringing a deployment up, restarting it or stopping it failed."""


class ServiceStartError(DeployError):
    """A service's process could not be started, or exited before it became ready."""


class HealthTimeout(DeployError, TimeoutError):
    """A service did not become ready before its deadline."""


class CommandTimeout(DeployError, TimeoutError):
    """A start/stop command outlived its timeout (the service may still be fine: re-probe it)."""


class RouterApiError(DeployError):
    """The router's worker API did not answer as expected (status, body in the message)."""


class WorkerListError(RouterApiError, ValueError):
    """The router answered its worker list (``GET /workers`` 200) with a body of another shape
    (not JSON, not an object, ``workers`` not a list, an entry not an object), or, for ``init``,
    with one it cannot use (over its size bound, more workers than it reads, no usable prefill or
    decode worker, answers over their bound together): the message names the URL and what was
    wrong."""


class DeploymentBusy(DeployError):
    """Another command holds the deployment's lock (one operator at a time)."""


class HostError(ServelabError, OSError):
    """Running a command or touching a file on a host failed."""


class SSHError(HostError, ConnectionError):
    """The SSH connection to a host failed."""


class KnobError(ServelabError, ValueError):
    """An unknown service or knob, or an env file line that does not parse."""


class UnreadFileError(KnobError):
    """A service's env or config file refused unread (a FIFO, a device, one too large): bad
    input for every command, ``verify`` too (never a failed check)."""


class OptionError(ServelabError, ValueError):
    """A command-line option's text does not parse (the message says what was expected)."""


class UrlError(ServelabError, ValueError):
    """A server URL a user typed (an option's, a spec field's) is not one servelab takes: the
    message says why, its password masked (:mod:`servelab.core.urls`); ``why`` is the reason alone,
    without the URL (a spec's error names its field instead)."""

    def __init__(self, message: str, why: str = "") -> None:
        super().__init__(message)
        self.why = why or message


class TraceError(ServelabError, ValueError):
    """A trace file's line is not a trace entry (the message names the line)."""


class StoreError(ServelabError, RuntimeError):
    """The ledger could not be read or written."""


class SchemaError(StoreError):
    """The ledger was written by a newer servelab (its schema version is higher than ours)."""


class NotALedger(StoreError, ValueError):
    """The ledger's path holds something else: not a regular file, another program's SQLite
    database, or a servelab schema version whose tables are missing (nothing is written to it)."""


class RecordError(StoreError, ValueError):
    """A stored or printed record does not fit its type (the message names the field)."""


class DamagedRow(RecordError):
    """A ledger row that does not read as its record (a hand edit): names the table and the row."""


class BenchError(ServelabError, RuntimeError):
    """A benchmark or an A/B experiment could not run."""


class CaseError(ServelabError, ValueError):
    """A case command that does not fit the case (unknown id, target, or state)."""


class MetricsError(ServelabError, ValueError):
    """A metrics source (``/metrics``, a Prometheus server) answered something unreadable."""


class ModelNotListed(ServelabError, LookupError):
    """The entry point's ``GET /v1/models`` lists no model (the message names the URL): traffic
    needs the model the router knows, never a placeholder (smg refuses one)."""


class ProtocolError(ServelabError, ValueError):
    """A server's bytes are not a valid HTTP/1.1 response; ``phase`` is "head" or "body"."""

    def __init__(self, phase: str, message: str) -> None:
        super().__init__(message)
        self.phase = phase


class SimError(ServelabError, RuntimeError):
    """The simulator was misconfigured."""
