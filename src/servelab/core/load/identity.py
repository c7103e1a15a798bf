"""A request's identity: the ``x-request-id`` and W3C ``traceparent`` every request servelab
sends carries (pure), so the servers' spans find its record (:mod:`servelab.core.telemetry.traces`)
and the ledger can store the pair as the 8 bytes it is made from
(:func:`servelab.io.ledger.packed.pack_record`)."""

from __future__ import annotations

import re

__all__ = ["identity_tag", "request_identity", "trace_of"]

_U64 = (1 << 64) - 1
#: A request id :func:`request_identity` made: its tag and its index.
_IDENTITY = re.compile(r"^servelab-([0-9a-f]{16})-(-?[0-9]+)$")


def request_identity(tag: str, index: int) -> tuple[str, str]:
    """The ``x-request-id`` and W3C ``traceparent`` of request ``index`` of one run part.

    ``tag`` is 16 lowercase hex digits, fresh per run part (the caller draws it): the request id
    is ``servelab-<tag>-<index>``, the trace id ``<tag><index as 16 hex digits>`` (unique per
    request, never all zeros), the parent span id ``index + 1`` (never zero), sampled. No
    randomness per request: two string formats, so the identity costs nothing per token.
    """
    i = index & _U64  # a negative index still gives 16 hex digits
    return f"servelab-{tag}-{index}", f"00-{tag}{i:016x}-{(i + 1) & _U64 or 1:016x}-01"


def trace_of(request_id: str) -> str | None:
    """The trace id :func:`request_identity` gave ``request_id`` (None: not one of servelab's)."""
    match = _IDENTITY.match(request_id)
    if match is None:
        return None
    return f"{match.group(1)}{int(match.group(2)) & _U64:016x}"


def identity_tag(request_id: str, traceparent: str, index: int) -> str | None:
    """The tag :func:`request_identity` made this pair from for request ``index`` (None: the
    pair is not exactly one it made, e.g. a header the user set)."""
    match = _IDENTITY.match(request_id)
    if match is None or int(match.group(2)) != index:
        return None
    tag = match.group(1)
    return tag if request_identity(tag, index) == (request_id, traceparent) else None
