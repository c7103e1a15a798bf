"""What a deployment owns on its machines: the identity its lock is taken on.

Two specs that name the same processes (the same host and port, whatever their names or state
directories) are one deployment to the lock: :func:`owned_endpoints` is that identity. A host is
the machine itself: this machine for a local service (every loopback name is one), the SSH
destination's host name otherwise (``user@`` and the SSH port do not change the machine; two
aliases of one machine under different names are not recognised, as servelab cannot know them).
"""

from __future__ import annotations

from servelab.core.deploy.spec import DeploymentSpec

__all__ = ["LOCAL_MACHINE", "owned_endpoints"]

#: The name of this machine in an endpoint (every local service runs here).
LOCAL_MACHINE = "local"


def owned_endpoints(spec: DeploymentSpec) -> tuple[tuple[str, int], ...]:
    """Each (machine, port) a service of ``spec`` serves on, sorted (the order locks are taken in,
    so two commands never wait on each other in a circle)."""
    owned = set()
    for svc in spec.services.values():
        host = spec.hosts[svc.host]
        machine = LOCAL_MACHINE if host.ssh is None else host.ssh.rpartition("@")[2].lower()
        owned.add((machine, svc.port))
    return tuple(sorted(owned))
