"""The layers a soak's finding can blame (pure codes; their words live in ``report.soak``).

The replay matrix locates one (:mod:`servelab.core.soak.replay`), the run telemetry's rules point
at one (:mod:`servelab.core.telemetry.rules`), and the diagnosis gives each finding one
(:mod:`servelab.core.soak.diagnose`). The order of :class:`Layer` breaks ties between findings of
equal confidence. Values are stored in the ledger: never change one. It lives with telemetry, below
the soak, since both the telemetry's rules and the soak's diagnosis name one.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Layer"]


class Layer(StrEnum):
    """Where a failure is: from the client's side inwards to the engines, then the two layers
    the run telemetry alone finds."""

    CLIENT_PROXY = "client_proxy"
    ROUTER = "router"
    PREFILL = "prefill"
    DECODE_TRANSFER = "decode_transfer"
    ENGINE_WEDGE = "engine_wedge"
    CORRECTNESS = "correctness"
    ENGINE_SATURATION = "engine_saturation"
    CLIENT = "client"
    PD_PAIR = "pd_pair"  # the prefill and decode disagree on what the KV hand-off carries
