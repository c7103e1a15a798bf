"""The conclusion of a soak: one diagnosis per localization, ids of the later ones prefixed with
their signature, findings merged by layer and worker, and why there is none."""

from __future__ import annotations

from servelab.core.soak.diagnose import UNDECIDED_NOT_LOCALIZED, Probe
from servelab.core.soak.observe import Localization
from servelab.core.soak.replay import Cell, Matrix, locate
from servelab.core.soak.signatures import Failure
from servelab.ops.soak.verdict import Seen, conclude


def _loc(sig: str, cells: tuple[Cell, ...]) -> Localization:
    probes = (Probe("router", "router", "readiness", True, 200),)
    return Localization(Failure(sig, 0, 1, 900, 0.1, 0), Matrix(cells, locate(cells)), probes)


def test_each_localization_is_diagnosed_and_later_ids_carry_their_signature() -> None:
    pair_fails = (
        Cell("pair", "p+d", "failing", True, 900, "error", 500, side="decode", prefill="p",
             decode="d"),
        Cell("router", "router", "failing", True, 900, "error", 500),
    )  # fmt: skip
    router_fails = (
        Cell("pair", "p+d", "failing", True, 900, "ok", 200, prefill="p", decode="d"),
        Cell("router", "router", "failing", True, 900, "error", 503),
    )
    failures = [Failure("kv_transfer", 0, 1, 900, 0.1, 0), Failure("http_5xx", 1, 1, 900, 0.1, 0)]
    locs = [_loc("kv_transfer", pair_fails), _loc("http_5xx", router_fails)]
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
    failures = [Failure("reset", 0, 1, 900, 0.1, 0)]
    verdict = conclude(Seen(True, None, [], failures, [], []))
    assert verdict.findings == []
    assert verdict.undecided is not None and verdict.undecided.reason == UNDECIDED_NOT_LOCALIZED
    assert verdict.undecided.conflicting == ("failure.reset",)
