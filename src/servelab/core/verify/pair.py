"""The P/D pair layer: what a prefill and a decode must agree on for the KV hand-off (pure).

For each prefill/decode pair the router can form, the fields the hand-off needs, each read from
what both engines report (``tests/contracts/pair.toml`` cites each field and rule in the engines'
source), compared by the engine's and transfer backend's rules (:data:`FIELDS`):

- **model** and **revision**: the same weights (vLLM: both are factors of NIXL's compatibility
  hash, ``nixl/metadata.py`` ``compute_nixl_compatibility_hash``);
- **page size** (SGLang ``page_size``; vLLM ``cache_config.block_size``): SGLang's Mooncake
  transfer copies pages by index with the prefill's page length and never checks the decode's
  (``disaggregation/mooncake/conn.py``: a length mismatch is truncated with a warning): equal.
  vLLM's NIXL handshake accepts a decode block that is a whole multiple of the prefill's (it
  re-blocks on receipt) and fails otherwise (``_validate_remote_agent_handshake``);
- **KV cache dtype** (``kv_cache_dtype``; ``cache_config.cache_dtype``): equal (the bytes per
  token; a factor of NIXL's compatibility hash);
- **transfer backend** (``disaggregation_transfer_backend``; ``kv_transfer_config.kv_connector``):
  equal;
- **TP size** (``tp_size``; ``parallel_config.tensor_parallel_size``): one divides the other (both
  backends map heterogeneous TP by slicing heads);
- **context length** (``context_length``; ``model_config.max_model_len``): equal; SGLang reports
  null when it is the model's own, which two workers of one model share.

A side that does not report a field is unknown, and the pair's check is then ``pair.unknown``:
said, never a pass. A mismatch names both values and where each came from (the command line, the
config file, the engine's default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Annotated, Any

from servelab.core.knobs.serverinfo import EngineReport
from servelab.core.ledger.codec import OMITTED_IF_NONE
from servelab.core.redaction import redact

__all__ = [
    "BOOTSTRAP_REPORT",
    "FIELDS",
    "FieldRule",
    "FieldVerdict",
    "PairField",
    "PairFieldCheck",
    "PairReport",
    "PairValue",
    "compare_field",
    "fields_of",
    "listening_bootstrap",
    "pair_fields",
    "pair_values",
    "quoted",
    "with_sources",
]


class FieldRule(StrEnum):
    """How the two sides of a field are compared."""

    EQUAL = "equal"
    DECODE_MULTIPLE = "decode_multiple"  # the decode's is a whole multiple of the prefill's
    DIVIDES = "divides"  # one divides the other
    EQUAL_OR_MODEL_DEFAULT = "equal_or_model_default"  # null: the model's own (the same model)


class FieldVerdict(StrEnum):
    MATCH = "match"
    MISMATCH = "mismatch"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class PairField:
    """A field of the hand-off: its name, where each engine reports it (a dotted path in the
    report; alternatives in order), the argument that sets it, and the rule."""

    name: str
    report: tuple[str, ...]
    argument: str
    rule: FieldRule


_E = FieldRule.EQUAL
#: The fields, per engine (``tests/contracts/pair.toml``).
FIELDS: Mapping[str, tuple[PairField, ...]] = {
    "sglang": (
        PairField("model", ("model_path", "served_model_name"), "--model-path", _E),
        PairField("revision", ("revision",), "--revision", _E),
        PairField("page_size", ("page_size",), "--page-size", _E),
        PairField("kv_cache_dtype", ("kv_cache_dtype",), "--kv-cache-dtype", _E),
        PairField("transfer_backend", ("disaggregation_transfer_backend",),
                  "--disaggregation-transfer-backend", _E),
        PairField("tp_size", ("tp_size",), "--tp-size", FieldRule.DIVIDES),
        PairField("context_length", ("context_length",), "--context-length",
                  FieldRule.EQUAL_OR_MODEL_DEFAULT),
    ),
    "vllm": (
        PairField("model", ("vllm_config.model_config.model",), "--model", _E),
        PairField("revision", ("vllm_config.model_config.revision",), "--revision", _E),
        PairField("page_size", ("vllm_config.cache_config.block_size",), "--block-size",
                  FieldRule.DECODE_MULTIPLE),
        PairField("kv_cache_dtype", ("vllm_config.cache_config.cache_dtype",),
                  "--kv-cache-dtype", _E),
        PairField("transfer_backend", ("vllm_config.kv_transfer_config.kv_connector",),
                  "--kv-transfer-config", _E),
        PairField("tp_size", ("vllm_config.parallel_config.tensor_parallel_size",),
                  "--tensor-parallel-size", FieldRule.DIVIDES),
        PairField("context_length", ("vllm_config.model_config.max_model_len",),
                  "--max-model-len", _E),
    ),
}  # fmt: skip


@dataclass(frozen=True)
class PairValue:
    """One side of a field: the reported value (``known`` False: not reported), the report's
    field it was read from, and where the engine got it (``source``: ``cmdline``, ``config``,
    ``default``; None: its process could not be read)."""

    known: bool
    value: str | None = None
    field: Annotated[str | None, OMITTED_IF_NONE] = None
    source: Annotated[str | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class PairFieldCheck:
    """A field of one pair: both sides, the rule and the verdict."""

    name: str
    rule: FieldRule
    prefill: PairValue
    decode: PairValue
    verdict: FieldVerdict


@dataclass(frozen=True)
class PairReport:
    """``pair.match``, ``pair.mismatch``, ``pair.unknown``: one prefill/decode pair, its fields,
    and why a side's report could not be read (``prefill_error``, ``decode_error``)."""

    prefill: str
    decode: str
    fields: tuple[PairFieldCheck, ...]
    prefill_error: Annotated[str | None, OMITTED_IF_NONE] = None
    decode_error: Annotated[str | None, OMITTED_IF_NONE] = None

    @property
    def verdict(self) -> FieldVerdict:
        """Mismatch if any field mismatches, else unknown if any is unknown, else match."""
        verdicts = {f.verdict for f in self.fields}
        for worst in (FieldVerdict.MISMATCH, FieldVerdict.UNKNOWN):
            if worst in verdicts or (worst is FieldVerdict.UNKNOWN and not self.fields):
                return worst
        return FieldVerdict.MATCH

    @property
    def mismatched(self) -> tuple[PairFieldCheck, ...]:
        return tuple(f for f in self.fields if f.verdict is FieldVerdict.MISMATCH)


def _lookup(report: EngineReport, path: str) -> tuple[bool, Any]:
    node: Any = report.doc
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _reported(report: EngineReport | None, field: PairField) -> PairValue:
    if report is None:
        return PairValue(False)
    for path in field.report:
        found, value = _lookup(report, path)
        if found and (value is not None or path == field.report[-1]):
            return PairValue(True, _text(value), path)
    return PairValue(False)


def pair_values(engine: str, report: EngineReport | None) -> dict[str, PairValue]:
    """Each field's value in one engine's report (``/server_info``; None: no report)."""
    return {f.name: _reported(report, f) for f in FIELDS.get(engine, ())}


#: Where an SGLang prefill reports the port its KV bootstrap server listens on (``/server_info``:
#: every ``ServerArgs`` field; ``--disaggregation-bootstrap-port``).
BOOTSTRAP_REPORT = "disaggregation_bootstrap_port"


def listening_bootstrap(report: EngineReport | None) -> int | None:
    """The KV bootstrap port a prefill's report says it listens on (None: not reported, or not
    a port)."""
    if report is None:
        return None
    value = report.doc.get(BOOTSTRAP_REPORT)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        return None
    return value


def _number(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def compare_field(rule: FieldRule, prefill: PairValue, decode: PairValue) -> FieldVerdict:
    """The verdict of one field's two sides by ``rule``."""
    if not prefill.known or not decode.known:
        return FieldVerdict.UNKNOWN
    p, d = prefill.value, decode.value
    match rule:
        case FieldRule.EQUAL:
            ok = p == d
        case FieldRule.EQUAL_OR_MODEL_DEFAULT:
            if (p is None) != (d is None):
                return FieldVerdict.UNKNOWN  # one side the model's own, not said as a number
            ok = p == d
        case FieldRule.DECODE_MULTIPLE | FieldRule.DIVIDES:
            pn, dn = _number(p), _number(d)
            if pn is None or dn is None or pn <= 0 or dn <= 0:
                return FieldVerdict.MATCH if p == d else FieldVerdict.UNKNOWN
            ok = dn % pn == 0
            if rule is FieldRule.DIVIDES:
                ok = ok or pn % dn == 0
    return FieldVerdict.MATCH if ok else FieldVerdict.MISMATCH


def quoted(value: PairValue) -> PairValue:
    """``value`` as a check quotes it: what the engine reported, with what the one redaction
    policy finds in it masked (a token in a served model name: ``m ghp_...`` is ``m ***``)."""
    if value.value is None:
        return value
    return replace(value, value=redact(value.value))


def pair_fields(
    engine: str, prefill: Mapping[str, PairValue], decode: Mapping[str, PairValue]
) -> tuple[PairFieldCheck, ...]:
    """Every field of one pair, compared on the values the engines reported (a side absent from
    the mapping is unknown), each side then kept :func:`quoted` (secrets masked), so the check,
    its ``--json``, its ledger row and its words never carry a token an engine put in a name."""
    unknown = PairValue(False)
    checks: list[PairFieldCheck] = []
    for f in FIELDS.get(engine, ()):
        p, d = prefill.get(f.name, unknown), decode.get(f.name, unknown)
        verdict = compare_field(f.rule, p, d)
        checks.append(PairFieldCheck(f.name, f.rule, quoted(p), quoted(d), verdict))
    return tuple(checks)


def with_sources(
    values: Mapping[str, PairValue], sources: Mapping[str, str]
) -> dict[str, PairValue]:
    """``values`` with where the engine got each (by field name), when known."""
    return {
        name: replace(value, source=sources[name]) if name in sources else value
        for name, value in values.items()
    }


def fields_of(engine: str) -> Sequence[PairField]:
    """The fields of ``engine``'s hand-off."""
    return FIELDS.get(engine, ())
