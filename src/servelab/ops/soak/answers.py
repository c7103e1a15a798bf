"""A soak's answer probes, sent: verify's few greedy probes at concurrency 1 before the sessions,
and again once the sessions have requests in flight (:mod:`servelab.core.soak.answers` judges
them). Each phase sends ``SoakConfig.answer_probes`` requests beside the sessions' ``sessions x
rounds``: with the defaults (3 probes, 4 sessions of 6 rounds) 6 of 30 requests, each short
(at most 32 tokens out), the retrieval one a long prompt.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from servelab.core.answers.answer import Answer
from servelab.core.answers.probes import probe_body
from servelab.core.soak.answers import answer_issues
from servelab.core.soak.evidence import CorrectnessIssue
from servelab.core.soak.result import SoakConfig, Targets
from servelab.io.ledger.ledger import Ledger
from servelab.ops.answers.asking import ask_probes
from servelab.ops.verify.answers import deployment_references, verify_probes

__all__ = ["SoakProbes"]


@dataclass
class SoakProbes:
    """One soak's probes: their answers at C1 and under load, and the references found."""

    config: SoakConfig
    targets: Targets
    model: str
    ledger: Ledger | None = None
    at_c1: list[Answer] = field(default_factory=list)
    loaded: list[Answer] = field(default_factory=list)

    @property
    def on(self) -> bool:
        return self.config.answer_probes > 0

    @property
    def tokens(self) -> int:
        """The tokens the probes received (the client's side of the client-vs-server rule)."""
        return sum(a.tokens for a in [*self.at_c1, *self.loaded] if a.error is None)

    async def _ask(self) -> list[Answer]:
        cfg = self.config
        probes = verify_probes(cfg.answer_probes)
        return await ask_probes(self.targets.entry_url, self.model, probes,
                                timeout_s=cfg.idle_timeout_s, headers=cfg.headers)  # fmt: skip

    async def before(self) -> None:
        """The probes at C1, before any session starts."""
        if self.on:
            self.at_c1 = await self._ask()

    async def under_load(self, inflight: Callable[[], int], active: Callable[[], bool]) -> None:
        """The probes again once half the sessions (at least two) have requests in flight, as
        the determinism probe waits; not sent when the sessions end first."""
        cfg = self.config
        want, give_up = min(cfg.sessions, max(2, cfg.sessions // 2)), time.monotonic() + 30.0
        while self.on and inflight() < want and active() and time.monotonic() < give_up:
            await asyncio.sleep(0.02)
        if self.on and active():
            self.loaded = await self._ask()

    def issues(self) -> list[tuple[CorrectnessIssue, bytes]]:
        """Each wrong answer (and the hand-off's signature) with a probe body to replay."""
        if not self.on or not self.at_c1:
            return []
        refs = None
        if self.ledger is not None and self.config.answers_from:
            found = deployment_references(self.ledger, self.config.answers_from, self.model)
            refs = found.by_probe() if found is not None else None
        probes = verify_probes(self.config.answer_probes)
        # the tool-call probe's body is what a localization replays (any probe's path is the same)
        body = probe_body(probes[min(1, len(probes) - 1)], self.model)
        return [(i, body) for i in answer_issues(probes, self.at_c1, self.loaded, refs)]
