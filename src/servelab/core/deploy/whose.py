"""Whose a process is, when it carries another deployment's mark (issue 38, nineteenth pass):
told from its mark against this deployment's own (pure).

A mark is ``<deployment>/<service>@<address>#<place>`` (:class:`~servelab.core.deploy.mark.Mark`:
its grammar and edge cases). Two copies of one spec (one name) are told
apart by the address they serve at, or, serving one address, by their state folder's place:
naming such a process by its deployment's name alone would read as this deployment's own
(``(test-pd's)`` in the copy's ``status``), so :class:`Others` says which it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from servelab.core.deploy.mark import Mark

__all__ = ["Others", "Whose", "others_of"]


class Whose(StrEnum):
    """How another deployment's process differs from this deployment's (stored: values kept)."""

    #: Another deployment name.
    NAMED = "named"
    #: This deployment's name, serving at another address (another copy of the spec).
    ADDRESS = "address"
    #: This deployment's name and address: a copy of the spec with another state folder.
    STATE_FOLDER = "state folder"


@dataclass(frozen=True)
class Others:
    """The deployment a process's ``mark`` names (``name``; ``address``: where its service
    serves, None in an older mark) and how it is not this one (``whose``)."""

    name: str
    address: str | None
    whose: Whose


def _parts(mark: str) -> tuple[str, str | None]:
    """The deployment's name and address ``mark`` names (a text that is no mark: neither)."""
    parsed = Mark.parse(mark)
    return ("", None) if parsed is None else (parsed.name, parsed.address or None)


def others_of(found: str, ours: str) -> Others:
    """The deployment of mark ``found``, another's than that of ``ours`` (this deployment's mark
    of the same service)."""
    name, address = _parts(found)
    own_name, own_address = _parts(ours)
    if name != own_name:
        return Others(name, address, Whose.NAMED)
    if address is not None and address == own_address:
        return Others(name, address, Whose.STATE_FOLDER)
    return Others(name, address, Whose.ADDRESS)
