"""Which URL a load command (bench, soak) sends its traffic to: the pure rule.

``--url`` wins; otherwise the deployment's entry point (its proxy, else its router). Reading the
spec from disk (and deciding whether to read it at all) is the CLI's part.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.deploy.spec import DeploymentSpec
from servelab.errors import SpecError

__all__ = ["LoadTarget", "load_target"]


@dataclass(frozen=True, slots=True)
class LoadTarget:
    """The URL to load, and whether it is the spec's entry point (not an unrelated ``--url``)."""

    url: str
    entry_point: bool


def load_target(spec: DeploymentSpec | None, url: str | None) -> LoadTarget:
    """``url`` when given, else ``spec``'s entry point; SpecError when neither is known."""
    if spec is None:
        if url is None:
            raise SpecError("no --url and no spec: nothing to load", source="<command line>")
        return LoadTarget(url, entry_point=False)
    entry = spec.service(spec.entry_point).url
    if url is None:
        return LoadTarget(entry, entry_point=True)
    return LoadTarget(url, entry_point=url.rstrip("/") == entry.rstrip("/"))
