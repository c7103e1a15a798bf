"""deploy's contract: one service as it is now (:class:`ServiceStatus`), printed (``status
--json``) as its encoding; report words it. What ``up``, ``down`` and ``restart`` did (their
steps, then the pair layer's or verify's checks) is :mod:`servelab.core.restart.contract`, above
both deploy and verify."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import computed_field

from servelab.core.deploy.probe import ProbeResult
from servelab.core.deploy.whose import Others
from servelab.core.ledger.codec import Omitted
from servelab.core.redacted import StoredUrl

__all__ = ["OTHERS_RECORD", "UNREADABLE_RECORD", "ServiceStatus"]

#: How ``pid_source`` begins when the service's pid record in the state folder is another
#: deployment's (two specs share the folder): not this service's process, so ``pid`` is None.
OTHERS_RECORD = "another deployment's record"
#: ``pid_source`` when no process is found and the service's pid record is there but does not
#: read as one (broken, oversized, a FIFO or a device): ``pid`` None, and why.
UNREADABLE_RECORD = "pid record unreadable"


@dataclass
class ServiceStatus:
    """One service as it is now."""

    service: str
    role: str
    host: str
    #: Encoded (``status --json``) with a password in it masked (the one redaction policy).
    url: StoredUrl
    pid: int | None
    pid_source: str | None
    alive: bool
    readiness: ProbeResult | None
    #: A prefill or decode: whether the router lists it, and healthy (None: not known).
    in_router: bool | None = None
    router_healthy: bool | None = None
    #: Its process was launched by servelab (it carries the mark) but has no pid record.
    unrecorded: bool = False
    #: Its host did not answer (the rest is unknown).
    error: str | None = None
    #: The mark (``<deployment>/<service>@<address>``) its port's owner carries when that is
    #: ANOTHER deployment's: this spec's port is that deployment's, its process not this one's.
    other_deployment: str | None = None
    #: Whose that is against this deployment's own mark (another name, another address, or a
    #: copy of this spec with another state folder): how it is worded.
    others: Omitted[Others] = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ready(self) -> bool:
        return self.readiness is not None and self.readiness.ok
