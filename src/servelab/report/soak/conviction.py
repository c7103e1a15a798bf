"""The conviction rule's words: why a layer a rule suspected is not a finding."""

from __future__ import annotations

from servelab.core.soak.conviction import Exoneration, Standing
from servelab.core.soak.replay import Hop
from servelab.report.soak.words import layer_title

__all__ = ["exonerated_text"]


def exonerated_text(e: Exoneration) -> str:
    """Why a layer a rule suspected is not a finding (the conviction rule)."""
    worker = f" ({e.worker})" if e.worker else ""
    what = f"{layer_title(e.layer)}{worker} (a rule gave it confidence {e.confidence:.2f})"
    cells = f": {', '.join(e.because)}" if e.because else ""
    where = _HOP_WORDS.get(e.by, "a hop inside it") if e.by is not None else "the matrix"
    match e.standing:
        case Standing.EXONERATED:
            return (f"{what}: exonerated: the failure persists without it, the same payload "
                    f"fails the same way sent {where}{cells}")  # fmt: skip
        case Standing.NOT_SHOWN_NEEDED:
            return (f"{what}: not shown needed: the matrix located the failure elsewhere and "
                    f"no evidence at this layer shows it failing")  # fmt: skip
        case _:
            return f"{what}: {e.standing}"


#: Where a hop sends the payload, as an exoneration says it.
_HOP_WORDS = {
    Hop.PAIR: "straight to the prefill/decode pair, without the router",
    Hop.ROUTER: "straight to the router, without the proxy in front of it",
    Hop.FRESH: "through the entry point on a fresh connection",
    Hop.REUSED: "through the entry point on a reused connection",
}
