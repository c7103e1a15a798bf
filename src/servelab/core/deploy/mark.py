"""A process's mark (issue 38): the one parser and formatter of the value servelab puts in the
environment of every process it launches (``SERVELAB_SERVICE``,
:data:`~servelab.io.hosts.processes.SERVICE_MARK`) and keeps in its pid records and ledger rows
(pure).

The grammar, read from the left of the LAST ``/``::

    mark    = name "/" tail
    tail    = service [ "@" address ] [ "#" place ]
    name    = one or more of any character (``/``, ``@`` and ``#`` included)
    service = any characters but ``/``, ``@`` and ``#`` (may be empty)
    address = any characters but ``/`` and ``#`` (``host:port``; may be empty, may hold ``@``)
    place   = any characters but ``/`` (the state folder's id, 16 hex digits when servelab wrote it)

- The name is everything before the last ``/``: a name holding ``/``, ``@`` or ``#`` parses back
  whole; a service, address or place holding ``/`` cannot be written (the last ``/`` would move).
- The service ends at the first ``@`` or ``#``; the address at the first ``#`` after it: an IPv6
  address (``[::1]:8000``) and an address holding ``@`` parse whole.
- No ``/``, or nothing before the last one (``/decode@local:9``), is no mark: :meth:`Mark.parse`
  says None (a value naming no deployment). Nothing else fails: any other text is a mark.
- An older servelab wrote no ``#place`` (``name/service@address``), or no address either
  (``name/service``): ``place``/``address`` None. An empty part after its separator is ``""``,
  not None (``name/service@`` is not ``name/service``), so :meth:`Mark.parse` is lossless: for
  every text it returns a mark of, ``str(Mark.parse(text)) == text``.
- A ``#`` before any ``@`` (``name/service#x@host:1``) starts the place: such a mark names no
  address (servelab never wrote it; the place is the malformed part, never read as an address).
- ``name/`` (an empty service) is a mark: a deployment's mark where its spec lacks the service.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Mark"]


@dataclass(frozen=True)
class Mark:
    """One mark: the deployment's ``name``, the ``service``, the service's ``address``
    (``host:port``; None in an older mark) and its state folder's ``place`` (None: none yet, or
    an older mark). :class:`ValueError` for parts the grammar cannot write back as they are."""

    name: str
    service: str
    address: str | None = None
    place: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a mark names a deployment: its name is never empty")
        if any(c in self.service for c in "/@#"):
            raise ValueError(f"a mark's service holds no '/', '@' or '#': {self.service!r}")
        if self.address is not None and any(c in self.address for c in "/#"):
            raise ValueError(f"a mark's address holds no '/' or '#': {self.address!r}")
        if self.place is not None and "/" in self.place:
            raise ValueError(f"a mark's place holds no '/': {self.place!r}")

    @classmethod
    def parse(cls, text: str) -> Mark | None:
        """The mark ``text`` is, or None when it names no deployment (the module docstring)."""
        name, slash, tail = text.rpartition("/")
        if not slash or not name:
            return None
        at, hash_ = tail.find("@"), tail.find("#")
        if hash_ < 0:
            hash_ = len(tail)
        place = tail[hash_ + 1 :] if hash_ < len(tail) else None
        if 0 <= at < hash_:
            return cls(name, tail[:at], tail[at + 1 : hash_], place)
        return cls(name, tail[:hash_], None, place)

    @property
    def served(self) -> str:
        """``service@address`` (``service`` alone in a mark without an address)."""
        return self.service if self.address is None else f"{self.service}@{self.address}"

    def __str__(self) -> str:
        place = "" if self.place is None else f"#{self.place}"
        return f"{self.name}/{self.served}{place}"
