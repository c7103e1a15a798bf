"""The conclusion of a soak: one diagnosis per localization, ids of the later ones prefixed with
their signature, findings merged by layer and worker, and why there is none."""

from __future__ import annotations

from servelab.core.load.records import REASON_IDLE
from servelab.core.soak.evidence import Localization, Probe, ProbeKind, Stall
from servelab.core.soak.observation import Stalls
from servelab.core.soak.replay import Cell, Hop, Matrix, Payload, locate
from servelab.core.soak.signatures import Failure, Outcome, Phase, Signature
from servelab.core.soak.undecided import UndecidedReason
from servelab.ops.soak.verdict import Seen, conclude


def _loc(sig: Signature, cells: tuple[Cell, ...]) -> Localization:
    probes = (Probe("router", "router", ProbeKind.READINESS, True, 200),)
    return Localization(Failure(sig, 0, 1, 900, 0.1, 0), Matrix(cells, locate(cells)), probes)


F, OK, ERROR = Payload.FAILING, Outcome.OK, Outcome.ERROR
KV, HTTP = Signature.KV_TRANSFER, Signature.HTTP_5XX


def test_each_localization_is_diagnosed_and_later_ids_carry_their_signature() -> None:
    pair_fails = (
        Cell(Hop.PAIR, "p+d", F, True, 900, ERROR, 500, side="decode", prefill="p", decode="d"),
        Cell(Hop.ROUTER, "router", F, True, 900, ERROR, 500),
    )
    router_fails = (
        Cell(Hop.PAIR, "p+d", F, True, 900, OK, 200, prefill="p", decode="d"),
        Cell(Hop.ROUTER, "router", F, True, 900, ERROR, 503),
    )
    failures = [Failure(KV, 0, 1, 900, 0.1, 0), Failure(HTTP, 1, 1, 900, 0.1, 0)]
    locs = [_loc(KV, pair_fails), _loc(HTTP, router_fails)]
    verdict = conclude(Seen(True, None, [], failures, [], locs))
    layers = {(f.layer, f.worker) for f in verdict.findings}
    assert layers == {("decode_transfer", "d"), ("router", None)}
    router = next(f for f in verdict.findings if f.layer == "router")
    assert all(i.startswith("http_5xx:") for i in router.supporting)
    ids = {o.id for o in verdict.observations}
    assert "matrix.pair.p+d.failing.stream" in ids
    assert "http_5xx:matrix.pair.p+d.failing.stream" in ids
    assert verdict.undecided is None


def test_failures_without_a_localization_say_so() -> None:
    failures = [Failure(Signature.RESET, 0, 1, 900, 0.1, 0)]
    verdict = conclude(Seen(True, None, [], failures, [], []))
    assert verdict.findings == []
    assert verdict.undecided is not None
    assert verdict.undecided.reason == UndecidedReason.NOT_LOCALIZED
    assert verdict.undecided.conflicting == ("failure.reset",)


def test_a_stall_goes_with_the_localization_of_its_signature() -> None:
    stalls = [
        Stall(0, 1, 900, 0.1, 0, 0, 0, Phase.HEAD, REASON_IDLE),
        Stall(1, 1, 900, 0.1, 2, 40, 1, Phase.BODY, REASON_IDLE),
    ]
    failures = [Failure(Signature.STALL_BODY, 1, 1, 900, 0.1, 2)]
    cells = (Cell(Hop.ROUTER, "router", F, True, 900, Outcome.STALLED),)
    verdict = conclude(Seen(True, None, stalls, failures, [], [_loc(Signature.STALL_BODY, cells)]))
    (counted,) = [o for o in verdict.observations if isinstance(o, Stalls)]
    assert (counted.count, counted.head) == (1, 0)  # the body stall only
