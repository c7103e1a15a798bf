"""The P/D pair layer's sentences: one prefill/decode pair's hand-off fields, agreed, mismatched
or unknown (no I/O, returns str)."""

from __future__ import annotations

from servelab.core.verify.pair import FieldRule, FieldVerdict, PairFieldCheck, PairReport, PairValue

__all__ = ["describe_pair"]

_NAMES = {
    "model": "model",
    "revision": "revision",
    "page_size": "page size",
    "kv_cache_dtype": "KV cache dtype",
    "transfer_backend": "transfer backend",
    "tp_size": "TP size",
    "context_length": "context length",
}
_SOURCES = {
    "cmdline": "its command line",
    "config": "its config file",
    "default": "the engine's default",
    "reported": "its report",
}
_RULES = {
    FieldRule.EQUAL: "must be equal",
    FieldRule.EQUAL_OR_MODEL_DEFAULT: "must be equal",
    FieldRule.DECODE_MULTIPLE: "the decode's must be a whole multiple of the prefill's",
    FieldRule.DIVIDES: "one must divide the other",
}


def _value(side: PairValue) -> str:
    if not side.known:
        return "not reported"
    value = "null (the model's own)" if side.value is None else side.value
    where = f"{side.field}" if side.field else ""
    source = _SOURCES.get(side.source or "", side.source) if side.source else None
    origin = ", ".join(part for part in (where, f"from {source}" if source else "") if part)
    return f"{value} ({origin})" if origin else value


def _field(f: PairFieldCheck, pair: PairReport) -> str:
    name = _NAMES.get(f.name, f.name)
    return (
        f"{name} {_value(f.prefill)} on {pair.prefill} vs {_value(f.decode)} on {pair.decode} "
        f"({_RULES[f.rule]})"
    )


def _agreed(pair: PairReport) -> str:
    parts = []
    for f in pair.fields:
        p, d = f.prefill.value or "unset", f.decode.value or "unset"
        parts.append(f"{_NAMES.get(f.name, f.name)} {p if p == d else f'{p}/{d}'}")
    return f"{pair.prefill} -> {pair.decode} agree: " + ", ".join(parts)


def describe_pair(pair: PairReport) -> str:
    """The pair's check in one line: every mismatch (both values and their sources), else every
    unknown field, else what they agree on."""
    match pair.verdict:
        case FieldVerdict.MISMATCH:
            fields = "; ".join(_field(f, pair) for f in pair.mismatched)
            return f"{pair.prefill} -> {pair.decode} cannot hand off KV: {fields}"
        case FieldVerdict.UNKNOWN:
            errors = [e for e in (pair.prefill_error, pair.decode_error) if e]
            unknown = [_NAMES.get(f.name, f.name) for f in pair.fields
                       if f.verdict is FieldVerdict.UNKNOWN]  # fmt: skip
            why = f" ({'; '.join(errors)})" if errors else ""
            return (
                f"{pair.prefill} -> {pair.decode}: unknown, not a pass: "
                f"{', '.join(unknown) or 'no field'} not reported by both{why}"
            )
        case FieldVerdict.MATCH:
            return _agreed(pair)
