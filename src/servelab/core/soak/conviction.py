"""The conviction rule, stated once (pure): which layer a soak may name.

A layer is a finding only when it is

- **needed**: the replay matrix's differential located the failure there (the same payload
  works one hop inside and fails at it: the failure goes away without it), or
- **shown failing**: evidence at that layer itself shows it failing (its own health, metrics or
  probes, the engines' progress and transfer counters, a correctness violation, a fired
  telemetry rule pointing at it).

A layer the matrix shows is not needed, because the failure persists when it is bypassed (the
same payload fails at a hop inside it: sent straight to the prefill/decode pair without the
router, or straight to the router without the proxy), is **exonerated**
(:attr:`Standing.EXONERATED`), never listed as a suspect, whatever confidence a rule gave it.
When the matrix located a layer, any other layer that is neither needed nor shown failing is
**not shown needed** (:attr:`Standing.NOT_SHOWN_NEEDED`) and is not listed either. Without a
located layer there is no differential: the per-layer rules' findings stand as they are.
:func:`standing` applies the rule to one finding; :mod:`servelab.core.soak.diagnose` applies it to
every finding it makes, and keeps the layers it clears as :class:`Exoneration` s.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from servelab.core.soak.evidence import ProbeKind, ReplayPath
from servelab.core.soak.observation import (
    CorrectnessViolations,
    EngineProgress,
    FrontAnswers,
    Observation,
    OpenCircuit,
    PairMismatch,
    ProbeResult,
    ReplayResult,
    Resends,
    ReusedConnectionStalls,
    RouterHealth,
    SignatureFailures,
    TransferFailures,
    UnhealthyWorker,
)
from servelab.core.soak.replay import Hop, Located
from servelab.core.soak.signatures import Signature
from servelab.core.telemetry.layers import Layer

__all__ = [
    "LAYER_DEPTH",
    "Exoneration",
    "Standing",
    "at_layer",
    "bypassed",
    "corroborates",
    "exoneration",
    "standing",
]


class Standing(StrEnum):
    """Where a layer stands by the conviction rule (values stored in the ledger)."""

    NEEDED = "needed"  # the matrix's differential located the failure there
    SHOWN_FAILING = "shown_failing"  # evidence at the layer shows it failing
    EXONERATED = "exonerated"  # bypassed, the failure persists: not needed
    NOT_SHOWN_NEEDED = "not_shown_needed"  # neither needed nor shown failing


#: How far out each layer sits, by the hop that bypasses it (engine layers are innermost).
LAYER_DEPTH = {
    Layer.PREFILL: 0, Layer.DECODE_TRANSFER: 0, Layer.ENGINE_WEDGE: 0,
    Layer.ENGINE_SATURATION: 0, Layer.ROUTER: 1, Layer.CLIENT_PROXY: 2,
}  # fmt: skip
_HOP_DEPTH = {Hop.PAIR: 0, Hop.ROUTER: 1, Hop.FRESH: 2, Hop.REUSED: 2}


@dataclass(frozen=True, slots=True)
class Exoneration:
    """A layer a rule suspected that the conviction rule clears: its layer and worker, why
    (:attr:`Standing.EXONERATED` or :attr:`Standing.NOT_SHOWN_NEEDED`), the confidence the rule
    had given it, the matrix's hop whose cells show it (``by``, None: no hop), and those cells
    (observation ids)."""

    layer: Layer
    standing: Standing
    confidence: float
    by: Hop | None = None
    because: tuple[str, ...] = ()
    worker: str | None = None


def bypassed(layer: Layer, located: Located | None) -> bool:
    """The matrix located the failure at a hop that bypasses ``layer`` (inside it): the failure
    persists without ``layer``."""
    if located is None or located.layer is None or located.hop is None or not located.failing:
        return False
    depth = LAYER_DEPTH.get(layer)
    return depth is not None and depth > _HOP_DEPTH[located.hop]


def standing(
    layer: Layer, supporting: Collection[str], located: Located | None, direct: Collection[str]
) -> Standing:
    """Where a finding of ``layer`` (its supporting observation ids) stands, given the matrix's
    ``located`` (None: no matrix) and the ids of the observations that are evidence at ``layer``
    itself (``direct``); see the module docstring. A layer the matrix bypassed is exonerated
    before anything else; without a located layer, every finding stands as shown failing."""
    if bypassed(layer, located):
        return Standing.EXONERATED
    if located is not None and located.layer == layer:
        return Standing.NEEDED
    if located is None or located.layer is None or set(supporting) & set(direct):
        return Standing.SHOWN_FAILING
    return Standing.NOT_SHOWN_NEEDED


class _Finding(Protocol):
    """What the rule reads of a finding (:class:`servelab.core.soak.finding.Finding`)."""

    @property
    def layer(self) -> Layer: ...
    @property
    def confidence(self) -> float: ...
    @property
    def supporting(self) -> tuple[str, ...]: ...
    @property
    def worker(self) -> str | None: ...


def exoneration(
    f: _Finding, located: Located | None, direct: Collection[str], cells: Mapping[str, str]
) -> Exoneration | None:
    """``f`` cleared by the rule (None: it stands, needed or shown failing); ``cells`` maps the
    matrix's cell ids to their observation ids."""
    where = standing(f.layer, f.supporting, located, direct)
    if where in (Standing.NEEDED, Standing.SHOWN_FAILING):
        return None
    hop = None if located is None else located.hop
    because = () if located is None else tuple(cells.get(i, i) for i in located.failing)
    return Exoneration(f.layer, where, f.confidence, hop, because, f.worker)


def at_layer(o: Observation, layer: Layer) -> bool:
    """``o`` (unhealthy) is evidence at ``layer`` itself (what "shown failing" reads)."""
    probe = o.probe.kind if isinstance(o, ProbeResult) else None
    match layer:
        case Layer.PREFILL | Layer.DECODE_TRANSFER | Layer.ENGINE_WEDGE | Layer.ENGINE_SATURATION:
            transfer = isinstance(o, SignatureFailures) and o.signature == Signature.KV_TRANSFER
            engine = isinstance(o, TransferFailures | EngineProgress)
            return transfer or engine or probe == ProbeKind.HEALTH
        case Layer.ROUTER:
            metrics = isinstance(o, RouterHealth | OpenCircuit | UnhealthyWorker)
            return metrics or probe in (ProbeKind.READINESS, ProbeKind.WORKERS)
        case Layer.CLIENT_PROXY:
            return isinstance(o, ReusedConnectionStalls | FrontAnswers | Resends)
        case Layer.CORRECTNESS:
            return isinstance(o, CorrectnessViolations)
        case Layer.PD_PAIR:
            return isinstance(o, PairMismatch)
        case _:
            return False


def corroborates(o: Observation, layer: Layer) -> bool:
    """``o`` (unhealthy) agrees with the matrix's ``layer``."""
    probe = o.probe.kind if isinstance(o, ProbeResult) else None
    match layer:
        case Layer.DECODE_TRANSFER:
            transfer = isinstance(o, SignatureFailures) and o.signature == Signature.KV_TRANSFER
            engine = isinstance(o, TransferFailures | EngineProgress)
            return transfer or engine or probe == ProbeKind.HEALTH
        case Layer.PREFILL:
            return isinstance(o, EngineProgress) or probe == ProbeKind.HEALTH
        case Layer.ROUTER:
            metrics = isinstance(o, RouterHealth | OpenCircuit | UnhealthyWorker)
            return metrics or probe in (ProbeKind.READINESS, ProbeKind.WORKERS, ProbeKind.E2E)
        case _:
            direct = isinstance(o, ReplayResult) and o.replay.path == ReplayPath.DIRECT_ROUTER
            return isinstance(o, ReusedConnectionStalls | FrontAnswers | Resends) or direct
