"""The P/D pair layer: for each prefill/decode pair the router can form, what the two engines
report about the KV hand-off, compared by the engine's rules (:mod:`servelab.core.verify.pair`).

Each worker's report is read once (SGLang ``/server_info``, else its ``/get_server_info`` alias;
vLLM ``/server_info?config_format=json``, answered only with ``VLLM_SERVER_DEV_MODE=1``), and
where the engine got each field from its process's command line (``/proc/PID/cmdline``, its
``--config`` merged under it: the command line, the config file, or the engine's default). The
router pairs any prefill with any decode, so every pair involving a selected service is checked.
A worker that does not report is unknown: the pair's check is ``pair.unknown``, never a pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from servelab.core.knob import parse_knob
from servelab.core.verify.checks import Check, CheckCode, Layer
from servelab.core.verify.pair import (
    FieldVerdict,
    PairReport,
    PairValue,
    fields_of,
    pair_fields,
    pair_values,
    with_sources,
)
from servelab.errors import ServelabError
from servelab.ops.arguments import engine_report, live_argument, service_engine
from servelab.ops.context import Operation
from servelab.ops.verify.layers.reader import LayerReader, ReadContext, error_text

__all__ = ["PAIR", "pair_checks"]

_CODES = {
    FieldVerdict.MATCH: CheckCode.PAIR_MATCH,
    FieldVerdict.MISMATCH: CheckCode.PAIR_MISMATCH,
    FieldVerdict.UNKNOWN: CheckCode.PAIR_UNKNOWN,
}
_NO_REPORT = {
    "sglang": "no /server_info or /get_server_info answer",
    "vllm": "no /server_info answer (vLLM serves it only with VLLM_SERVER_DEV_MODE=1)",
}


#: One worker's fields, and why its report could not be read.
_Side = tuple[dict[str, PairValue], str | None]


async def _sources(op: Operation, service: str) -> dict[str, str]:
    """Where the engine got each field: ``cmdline``, ``config``, ``default`` (none: no process
    could be read)."""
    engine = service_engine(op)
    knobs = {f.name: parse_knob(f.argument, engine) for f in fields_of(op.spec.engine)}
    try:
        proc, live = await live_argument(op, service, list(knobs.values()))
    except ServelabError:
        return {}
    if proc.pid is None:
        return {}
    return {name: str(live[knob.name].source) for name, knob in knobs.items()}


async def _side(op: Operation, service: str) -> _Side:
    """One worker's fields (with their sources), and why its report could not be read."""
    try:
        report = await engine_report(op, service)
    except ServelabError as exc:
        return pair_values(op.spec.engine, None), error_text(exc)
    if report is None:
        return pair_values(op.spec.engine, None), f"{service}: {_NO_REPORT[op.spec.engine]}"
    values = pair_values(op.spec.engine, report)
    return with_sources(values, await _sources(op, service)), None


def _check(engine: str, prefill: str, decode: str, sides: Mapping[str, _Side]) -> Check:
    (p, p_error), (d, d_error) = sides[prefill], sides[decode]
    report = PairReport(prefill, decode, pair_fields(engine, p, d), p_error, d_error)
    verdict = report.verdict
    return Check(decode, verdict is FieldVerdict.MATCH, _CODES[verdict], report)


async def pair_checks(op: Operation, services: list[str] | None = None) -> list[Check]:
    """One check per prefill/decode pair with a service in ``services`` (default: every pair)."""
    spec = op.spec
    chosen = set(services or spec.services)
    pairs = [(p, d) for p in spec.by_role("prefill") for d in spec.by_role("decode")
             if p in chosen or d in chosen]  # fmt: skip
    names = sorted({name for pair in pairs for name in pair})
    found = await asyncio.gather(*(_side(op, name) for name in names))
    sides = dict(zip(names, found, strict=True))
    return [_check(spec.engine, p, d, sides) for p, d in pairs]


async def read(ctx: ReadContext) -> list[Check]:
    """The pair layer's checks (once for the deployment)."""
    return await pair_checks(ctx.op, list(ctx.services))


PAIR = LayerReader("pair", Layer.PAIR, read, per_service=False)
