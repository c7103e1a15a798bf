"""The reads layer: is each declared knob read by the engine the service runs? An env knob against
the variables of the release it reports; an argument knob against its parser (a simulated
worker's: the simulator's parser is its engine's; another engine's parser list is not kept).

A variable with the engine's prefix that the release does not read (misspelled, renamed, removed)
passes the file and process layers and changes nothing (:mod:`servelab.ops.reads`). A knob the
engine reads adds no check; one it does not read fails (``live.knob_unread``, with the closest
name it does read); a release without a kept list fails as unknown (``live.reads_unknown``). An
engine that does not answer is the process and health layers' to report.
"""

from __future__ import annotations

from servelab.core.knobs.unread import ReadVerdict
from servelab.core.verify.checks import Check, CheckCode, Layer
from servelab.ops.reads import knob_reads
from servelab.ops.verify.layers.reader import LayerReader, ReadContext

__all__ = ["READS"]

_CODES = {ReadVerdict.NOT_READ: CheckCode.LIVE_KNOB_UNREAD,
          ReadVerdict.UNKNOWN: CheckCode.LIVE_READS_UNKNOWN}  # fmt: skip


async def read(ctx: ReadContext) -> list[Check]:
    """A check for each declared env knob the engine does not (or may not) read."""
    names = list(ctx.op.spec.service(ctx.name).knobs)
    if not names:
        return []
    found = await knob_reads(ctx.op, ctx.name, names)
    if all(k.version is None for k in found):
        return []  # the engine did not answer: the process and health layers say so
    return [Check(ctx.name, False, _CODES[k.verdict], k) for k in found if k.verdict in _CODES]


READS = LayerReader("reads", Layer.LIVE, read)
