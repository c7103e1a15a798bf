"""The compact form of a request record: how the ledger stores one (pure, lossless; the
ledger's row encoding, so it lives with the ledger: it takes and gives the stored JSON).

One ``bytes`` value instead of ~1.3 kB of JSON; :func:`pack_record` and :func:`unpack_record`
are each other's inverse over ``encode(record)`` dicts (:func:`~servelab.core.ledger.codec.encode`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import fields
from itertools import accumulate
from typing import Any

from servelab.core.ledger.codec import JsonObject
from servelab.core.load.identity import identity_tag, request_identity
from servelab.core.load.records import RequestRecord

__all__ = ["pack_record", "unpack_record"]

# Layout
# (version 1, little-endian): ``0x01``, a flags byte, then zigzag varints: index, scheduled_ns,
# input_tokens, sent_ns - scheduled_ns, first_byte_ns - sent_ns, end_ns - sent_ns, status,
# output_tokens, the event count and (uniform token counts) the one count; then error and
# error_detail (varint length + UTF-8); then the event times as deltas (the first from sent_ns,
# each next from the one before) packed as int32 (int64 when one does not fit), then the token
# counts packed as uint8/uint16/uint32/int64 unless they are all equal; then, only when any is
# set, request_id and traceparent (varint length + UTF-8 each) and cached_tokens + 1 and
# session + 1 (varints, 0 for None). A blob without this tail reads back with both ids empty and
# both numbers None, one with the ids alone with both numbers None, so every blob written before
# they existed still decodes. Lossless: every nanosecond comes back.
#
# Version 2 (written since) differs in the tail only: a varint says what the ids are (0: both
# empty; 1: the pair :func:`~servelab.core.load.identity.request_identity` makes, stored as its
# 8-byte tag, the index being the record's own; 2: any other pair, varint length + UTF-8 each),
# then cached_tokens + 1 and session + 1. A servelab request's ids cost 9 bytes instead of ~90.
# Version 1 blobs still decode.

_PACK_VERSION = 2
_IDS_NONE, _IDS_TAG, _IDS_TEXT = 0, 1, 2
_F_USAGE, _F_WARMUP, _F_FIRST, _F_END, _F_STATUS, _F_ERROR, _F_WIDE, _F_UNIFORM = (
    1 << i for i in range(8)
)
_FIELD_SET = frozenset(f.name for f in fields(RequestRecord))
_INT_FIELDS = ("index", "scheduled_ns", "input_tokens", "sent_ns", "output_tokens")
_OPTIONAL_INTS = ("first_byte_ns", "end_ns", "status")
_TAIL_NUMBERS = ("cached_tokens", "session")
_I32 = (-(2**31), 2**31 - 1)
_TOKEN_CODES = ((0xFF, "B"), (0xFFFF, "H"), (0xFFFFFFFF, "I"))


def _varint(out: bytearray, value: int) -> None:
    zig = value * 2 if value >= 0 else -value * 2 - 1
    while zig > 0x7F:
        out.append((zig & 0x7F) | 0x80)
        zig >>= 7
    out.append(zig)


def _read_varints(buf: bytes, pos: int, count: int) -> tuple[list[int], int]:
    out: list[int] = []
    zig = shift = 0
    while len(out) < count:
        byte = buf[pos]
        pos += 1
        zig |= (byte & 0x7F) << shift
        if byte < 0x80:
            out.append((zig >> 1) ^ -(zig & 1))
            zig = shift = 0
        else:
            shift += 7
    return out, pos


def _packable(data: Mapping[str, Any]) -> bool:
    if data.keys() != _FIELD_SET:
        return False
    ints = all(type(data[k]) is int for k in _INT_FIELDS)
    optional = all(data[k] is None or type(data[k]) is int for k in _OPTIONAL_INTS)
    flags = type(data["tokens_from_usage"]) is bool and type(data["warmup"]) is bool
    # a record whose usage was not believed (a hostile engine's, rare) is stored as JSON
    flags = flags and data["usage_disagreed"] is False
    error = data["error"]
    texts = type(data["error_detail"]) is str and (error is None or type(error) is str)
    texts = texts and type(data["request_id"]) is str and type(data["traceparent"]) is str
    numbers = all(data[k] is None or type(data[k]) is int for k in _TAIL_NUMBERS)
    numbers = numbers and all(data[k] is None or data[k] >= 0 for k in _TAIL_NUMBERS)
    events, tokens = data["event_ns"], data["event_tokens"]
    lists = type(events) is list and type(tokens) is list and len(events) == len(tokens)
    return (
        ints
        and optional
        and flags
        and texts
        and numbers
        and lists
        and _all_ints(events)
        and _all_ints(tokens)
    )


def _all_ints(values: list[Any]) -> bool:
    return set(map(type, values)) <= {int}  # a bool is not an int here


def _flags(data: Mapping[str, Any], wide: bool, uniform: bool) -> int:
    on = {
        _F_USAGE: data["tokens_from_usage"],
        _F_WARMUP: data["warmup"],
        _F_FIRST: data["first_byte_ns"] is not None,
        _F_END: data["end_ns"] is not None,
        _F_STATUS: data["status"] is not None,
        _F_ERROR: data["error"] is not None,
        _F_WIDE: wide,
        _F_UNIFORM: uniform,
    }
    return sum(bit for bit, set_ in on.items() if set_)


def _token_code(tokens: list[int]) -> str:
    low = min(tokens, default=0)
    high = max(tokens, default=0)
    for limit, code in _TOKEN_CODES:
        if low >= 0 and high <= limit:
            return code
    return "q"


def pack_record(data: Mapping[str, Any]) -> bytes | None:
    """The compact form of a ``encode(record)`` dict; None when ``data`` is not one (any
    other shape, an extra key, a value of another type: the caller stores it as JSON)."""
    if not _packable(data):
        return None
    events: list[int] = data["event_ns"]
    tokens: list[int] = data["event_tokens"]
    sent = data["sent_ns"]
    deltas = [b - a for a, b in zip([sent, *events], events, strict=False)]
    wide = any(d < _I32[0] or d > _I32[1] for d in deltas)
    uniform = len(set(tokens)) <= 1
    out = bytearray((_PACK_VERSION, _flags(data, wide, uniform)))
    first, end = data["first_byte_ns"], data["end_ns"]
    head: list[int] = [data["index"], data["scheduled_ns"], data["input_tokens"]]
    head += [sent - data["scheduled_ns"], 0 if first is None else first - sent]
    head += [0 if end is None else end - sent, data["status"] or 0, data["output_tokens"]]
    for value in (*head, len(events), tokens[0] if tokens and uniform else 0):
        _varint(out, value)
    for text in (data["error"] or "", data["error_detail"]):
        raw = text.encode()
        _varint(out, len(raw))
        out += raw
    out += struct.pack(f"<{len(deltas)}{'q' if wide else 'i'}", *deltas)
    if not uniform:
        code = _token_code(tokens)
        out += code.encode() + struct.pack(f"<{len(tokens)}{code}", *tokens)
    numbers = [data[k] for k in _TAIL_NUMBERS]
    if data["request_id"] or data["traceparent"] or any(n is not None for n in numbers):
        _pack_ids(out, data["request_id"], data["traceparent"], data["index"])
        for number in numbers:
            _varint(out, 0 if number is None else number + 1)
    return bytes(out)


def _pack_ids(out: bytearray, request_id: str, traceparent: str, index: int) -> None:
    if not request_id and not traceparent:
        _varint(out, _IDS_NONE)
    elif (tag := identity_tag(request_id, traceparent, index)) is not None:
        _varint(out, _IDS_TAG)
        out += bytes.fromhex(tag)
    else:
        _varint(out, _IDS_TEXT)
        for text in (request_id, traceparent):
            raw = text.encode()
            _varint(out, len(raw))
            out += raw


def _unpack_ids(blob: bytes, pos: int, index: int, version: int) -> tuple[str, str, int]:
    """The ids at ``pos`` (empty at the blob's end) and where what follows them starts."""
    if pos >= len(blob):
        return "", "", pos
    if version >= 2:
        (mode,), pos = _read_varints(blob, pos, 1)
        if mode == _IDS_NONE:
            return "", "", pos
        if mode == _IDS_TAG:
            return (*request_identity(blob[pos : pos + 8].hex(), index), pos + 8)
    ids: list[str] = []
    while pos < len(blob) and len(ids) < 2:
        (size,), pos = _read_varints(blob, pos, 1)
        ids.append(blob[pos : pos + size].decode())
        pos += size
    request_id, traceparent = (*ids, "", "")[:2]
    return request_id, traceparent, pos


def unpack_record(blob: bytes) -> JsonObject:
    """The ``encode(record)`` dict that :func:`pack_record` packed into ``blob``."""
    if not blob or blob[0] not in (1, _PACK_VERSION):
        raise ValueError(f"not a packed request record (version byte {blob[:1]!r})")
    flags = blob[1]
    head, pos = _read_varints(blob, 2, 10)
    index, scheduled, input_tokens, sent_off, first_off, end_off, status, out_tokens, n, tok = head
    texts = []
    for _ in range(2):
        (size,), pos = _read_varints(blob, pos, 1)
        texts.append(blob[pos : pos + size].decode())
        pos += size
    sent = scheduled + sent_off
    code = "q" if flags & _F_WIDE else "i"
    deltas = struct.unpack_from(f"<{n}{code}", blob, pos)
    pos += struct.calcsize(f"<{n}{code}")
    if flags & _F_UNIFORM:
        tokens = [tok] * n
    else:
        tcode = f"<{n}{chr(blob[pos])}"
        tokens = list(struct.unpack_from(tcode, blob, pos + 1))
        pos += 1 + struct.calcsize(tcode)
    request_id, traceparent, pos = _unpack_ids(blob, pos, index, blob[0])
    numbers: list[int | None] = [None, None]
    if pos < len(blob):
        tail, pos = _read_varints(blob, pos, len(numbers))
        numbers = [None if n == 0 else n - 1 for n in tail]
    return {
        "index": index,
        "scheduled_ns": scheduled,
        "input_tokens": input_tokens,
        "sent_ns": sent,
        "first_byte_ns": sent + first_off if flags & _F_FIRST else None,
        "end_ns": sent + end_off if flags & _F_END else None,
        "status": status if flags & _F_STATUS else None,
        "error": texts[0] if flags & _F_ERROR else None,
        "error_detail": texts[1],
        "output_tokens": out_tokens,
        "tokens_from_usage": bool(flags & _F_USAGE),
        "usage_disagreed": False,
        "warmup": bool(flags & _F_WARMUP),
        "event_ns": list(accumulate(deltas, initial=sent))[1:],
        "event_tokens": tokens,
        "request_id": request_id,
        "traceparent": traceparent,
        "cached_tokens": numbers[0],
        "session": numbers[1],
    }
