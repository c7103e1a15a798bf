"""Does the running engine read a knob? The release it reports (SGLang: ``/server_info``'s
``version``; vLLM: ``GET /version``), judged against that release's list of variables
(:func:`servelab.core.knobs.unread.judge_env`), plus the variables the spec says the service's
build reads (``reads_env``) and, for the simulator's build (a version with the ``+sim`` label), the
ones its model reads (:data:`servelab.sim.envreads.SIM_READS`).

Used by verify's reads layer, ``knob set`` (it says so) and ``ab``/``tune`` (they refuse such a
knob unless ``--allow-unread``). Only the engines' own services (prefill, decode) are judged.
"""

from __future__ import annotations

from collections.abc import Iterable

from servelab.core.knob import parse_knob
from servelab.core.knobs.unread import ReadVerdict, UnreadKnob, judge_argument, judge_env
from servelab.core.redaction import redact
from servelab.errors import HostError, KnobError
from servelab.ops.arguments import engine_report, service_flags
from servelab.ops.context import Operation
from servelab.sim.envreads import SIM_READS

__all__ = ["engine_version", "knob_reads", "refuse_unread"]

_ENGINES = {"sglang": "SGLang", "vllm": "vLLM"}


async def engine_version(op: Operation, service: str) -> str | None:
    """The release the service's engine reports (None: it does not say, or does not answer)."""
    if op.spec.engine == "vllm":
        try:
            url = await op.url(service, "/version")
        except HostError:
            return None
        from servelab.io.http.client import HttpClient  # aiohttp: only when an engine is asked

        async with HttpClient(limit=1) as http:
            doc = await http.get_json(url)
        version = doc.get("version") if isinstance(doc, dict) else None
        return redact(version) if isinstance(version, str) else None  # quoted and stored
    report = await engine_report(op, service)
    return None if report is None else report.version


def _build_reads(op: Operation, service: str, version: str | None) -> set[str]:
    extra = set(op.spec.service(service).reads_env)
    if version is not None and version.partition("+")[2] == "sim":
        extra |= SIM_READS
    return extra


async def knob_reads(op: Operation, service: str, names: Iterable[str]) -> list[UnreadKnob]:
    """Each knob of ``names`` judged against what the service's engine reads: an env knob against
    its release's variables, an argument knob against its parser (a simulated worker's; another
    engine's parser list is not kept: not judged). A service that is not an engine: not
    judged."""
    names = list(names)
    if op.spec.service(service).role not in ("prefill", "decode"):
        return [UnreadKnob(n, op.spec.engine, None, ReadVerdict.NOT_JUDGED) for n in names]
    version = await engine_version(op, service)
    extra, flags = _build_reads(op, service, version), service_flags(op, service)
    return [
        judge_env(name, op.spec.engine, version, extra)
        if parse_knob(name).is_env
        else judge_argument(name, op.spec.engine, version, flags)
        for name in names
    ]


def _refusal(found: UnreadKnob) -> str:
    hint = f" (did you mean {found.suggestion}?)" if found.suggestion else ""
    return f"not read by {_ENGINES.get(found.engine, found.engine)} {found.version}{hint}"


async def refuse_unread(op: Operation, service: str, names: Iterable[str]) -> None:
    """Raise :class:`KnobError` naming the knobs of ``names`` the engine does not read (``ab``
    and ``tune`` without ``--allow-unread``)."""
    found = [k for k in await knob_reads(op, service, names) if k.verdict is ReadVerdict.NOT_READ]
    if found:
        reasons = "; ".join(f"{service} {k.knob}: {_refusal(k)}" for k in found)
        raise KnobError(
            f"{reasons}: an A/B of a knob the engine does not read measures noise "
            "(declare it under reads_env if the build reads it, or pass --allow-unread)"
        )
