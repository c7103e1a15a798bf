"""The engine's layer: what the engine reports it runs with, against the process and the file.

An argument knob is read from the process's own command line (``/proc/PID/cmdline`` as the
engine's parser reads it, its ``--config`` merged under it) and from the engine's report (SGLang's
``/server_info``; vLLM's under ``VLLM_SERVER_DEV_MODE=1``; a router's policy from its metrics),
read once per service: the process against the file, then the engine against the process
(:func:`servelab.core.verify.arguments.argument_verdict`). A router's check waits until the e2e
probe was routed (a router reports its policy only once it has routed one).
"""

from __future__ import annotations

from servelab.core.knob import Knob
from servelab.core.knobs.places import FileValue, LiveSource, LiveValue
from servelab.core.verify.arguments import ArgumentLive, argument_verdict
from servelab.core.verify.checks import Check, CheckCode, Layer
from servelab.errors import ServelabError
from servelab.ops.arguments import engine_arguments, live_argument
from servelab.ops.verify.layers.reader import LayerReader, ReadContext, failed

__all__ = ["ENGINE"]

_C = CheckCode


async def _checks(ctx: ReadContext, knobs: list[Knob], files: dict[str, FileValue]) -> list[Check]:
    op, service = ctx.op, ctx.name
    proc, live = await live_argument(op, service, knobs)
    if proc.pid is None:
        return []  # the process layer already says that no process serves the service
    router = op.spec.service(service).role == "router"
    if router and ctx.routed is not None:
        await ctx.routed.wait()
    engine = await engine_arguments(op, service, knobs)
    checks = []
    for knob in knobs:
        file, got, said = files[knob.name].value, live[knob.name], engine[knob.name]
        if router and got.source is LiveSource.DEFAULT and said.known:
            got = LiveValue(said.value, LiveSource.REPORTED)  # its argv is written over
        verdict = argument_verdict(file, got.value, said.value, said.known)
        data = ArgumentLive(
            proc.pid, proc.source, knob.name, file, got.value, str(got.source), verdict.verdict,
            engine_known=said.known, engine=said.value, engine_field=said.where or None,
        )  # fmt: skip
        checks.append(Check(service, verdict.ok, _C.of_argument(verdict), data))
    return checks


async def read(ctx: ReadContext) -> list[Check]:
    """The live checks of one service's argument knobs (argv and the engine's report)."""
    knobs = ctx.arguments()
    if not knobs:
        return []
    try:
        return await _checks(ctx, knobs, await ctx.places(knobs))
    except ServelabError as exc:
        return failed(Layer.LIVE, ctx.name, exc)


ENGINE = LayerReader("engine", Layer.LIVE, read)
