"""What checking answers is: its config, the references of a state, an arm's answer summary, the
progress it reports (pure; the rule is :mod:`servelab.core.answers.rule`).

- :class:`AnswersConfig`: the mode (``off``, ``check``: measured and shown, ``gate``: also a
  candidate that changes answers is never a win), the probe set (seed, size, the context length
  it is sized against), the share of a run's requests the probes may take (at most 5%), the
  reference concurrency, the rule's α and its fewest pairs.
- :class:`AnswerReferences`: the answers of the baseline state at low concurrency, kept in the
  ledger with the state they came from (:func:`state_key`: the spec's hash, the knob values, the
  probe set) and reused while that state is the same.
- :class:`ArmAnswers`: one arm's answers over its visits (:func:`summarize_arm`).
- :func:`probes_per_run` and :func:`probe_positions`: how many probes a run carries and where in
  its queue (away from the ramp and the tail, so they run at the arm's concurrency).
- Progress: :mod:`servelab.core.answers.events`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.answers.answer import Answer, AnswerCheck, Failure
from servelab.core.answers.probes import Probe, ProbeKind
from servelab.core.answers.rule import ALPHA, MIN_PAIRS, PairKey
from servelab.core.redacted import StoredText

__all__ = [
    "MAX_SHARE",
    "AnswerReferences",
    "AnswersConfig",
    "AnswersMode",
    "AnswersUnchecked",
    "ArmAnswers",
    "Example",
    "State",
    "probe_positions",
    "probes_for_round",
    "probes_per_run",
    "state_key",
    "summarize_arm",
    "wrong_by_pair",
]

#: The largest share of a run's requests probes may take.
MAX_SHARE = 0.05


class AnswersUnchecked(StrEnum):
    """Why an experiment asked to check answers could not (said, never silent)."""

    #: a run's requests cannot carry one probe within the probes' share
    TOO_FEW_REQUESTS = "too_few_requests"
    #: a replayed trace carries no probes
    TRACE = "trace"
    #: a capacity search carries no probes
    CAPACITY = "capacity"


class AnswersMode(StrEnum):
    """``--answers``: ``off`` (no probes), ``check`` (measured, shown), ``gate`` (and judged)."""

    OFF = "off"
    CHECK = "check"
    GATE = "gate"


@dataclass(frozen=True)
class AnswersConfig:
    """How answers are checked (see the module's docstring)."""

    mode: AnswersMode = AnswersMode.GATE
    share: float = MAX_SHARE
    seed: int = 0
    probes: int = 24
    context_len: int = 32768
    reference_concurrency: int = 1
    alpha: float = ALPHA
    min_pairs: int = MIN_PAIRS
    logprobs: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", AnswersMode(self.mode))
        if not 0 < self.share <= MAX_SHARE:
            raise ValueError(f"the probes' share must be above 0 and at most {MAX_SHARE:.0%}")
        if self.probes < 3 or self.reference_concurrency < 1:
            raise ValueError("a probe set needs at least 3 probes and a concurrency of 1 or more")
        if not 0 < self.alpha < 0.5:
            raise ValueError("alpha must be between 0 and 0.5")

    @property
    def on(self) -> bool:
        return self.mode is not AnswersMode.OFF


def probes_per_run(requests: int, share: float, set_size: int) -> int:
    """How many probes a run of ``requests`` load requests carries: the most that keeps them at
    most ``share`` of all its requests, at most the set's size."""
    return min(set_size, int(requests * share / (1 - share) + 1e-9))


def probes_for_round(probes: Sequence[Probe], count: int, round_: int) -> list[Probe]:
    """The ``count`` probes of round ``round_``: the set in turn, each round starting where the
    one before ended (both arms of a round send the same ones: they are paired)."""
    start = round_ * count
    return [probes[(start + j) % len(probes)] for j in range(min(count, len(probes)))]


def probe_positions(requests: int, count: int, concurrency: int) -> list[int]:
    """Where ``count`` probes go in a queue of ``requests`` jobs: evenly spaced between the
    ramp and the tail (a closed loop's first and last ``concurrency`` jobs, at most a quarter
    of the queue each), so each runs with every slot busy."""
    if count <= 0:
        return []
    edge = min(concurrency, requests // 4)
    span = max(requests - 2 * edge, 1)
    return [edge + (span * (2 * j + 1)) // (2 * count) for j in range(count)]


@dataclass(frozen=True)
class State:
    """The state references come from: the spec's hash and the knob values (service, knob,
    value) of the baseline arm."""

    spec_hash: str
    knobs: tuple[tuple[str, str, str | None], ...]


def state_key(state: State, config: AnswersConfig, model: str) -> str:
    """The references' key: the state and the probe set (its seed, size, context, model)."""
    data = [state.spec_hash, sorted(state.knobs, key=str), config.seed, config.probes,
            config.context_len, config.logprobs, model]  # fmt: skip
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class AnswerReferences:
    """The reference answers of a state (:func:`state_key`), taken at ``concurrency``."""

    key: str
    state: State
    model: StoredText  # encoded with a token in it masked (the key holds the real name's hash)
    concurrency: int
    answers: tuple[Answer, ...]
    id: int | None = None

    def by_probe(self) -> dict[int, Answer]:
        return {a.probe: a for a in self.answers}


@dataclass(frozen=True)
class Example:
    """A differing answer beside its reference (texts cut to a few hundred characters)."""

    probe: int
    level: int
    answer: str
    reference: str
    failures: tuple[Failure, ...] = ()


@dataclass(frozen=True)
class ArmAnswers:
    """One arm's probe answers: how many, how many differ from the reference, how many are
    wrong (:attr:`AnswerCheck.wrong`), structural failures by kind, retrieval recall, the mean
    top-1 agreement (None: no log-probabilities), and a few differing answers; ``cut``: the
    probes cut by the run's end, not judged and counted in none of the others (``answers`` 0:
    the arm's answers were not checked, its probes cut or none sent before the run's end)."""

    arm: str
    answers: int
    differ: int
    wrong: int
    failures: tuple[tuple[Failure, int], ...]
    retrieval: int
    recalled: int
    top1_agree: float | None
    examples: tuple[Example, ...] = ()
    cut: int = 0

    @property
    def unchecked(self) -> bool:
        """True when no answer of the arm was judged (every probe cut by the run's end, or none
        sent before it): its answers were not checked."""
        return self.answers == 0


def summarize_arm(
    arm: str,
    checks: Sequence[AnswerCheck],
    references: dict[int, Answer] | None = None,
    examples: int = 3,
) -> ArmAnswers:
    """``checks`` (every visit of ``arm``) summed up; up to ``examples`` differing answers kept
    beside their references. A cut check is counted apart (``cut``), in nothing else."""
    cut = sum(c.cut for c in checks)
    checks = [c for c in checks if not c.cut]
    failures = Counter(f for c in checks for f in c.failures)
    retrieval = [c for c in checks if c.kind is ProbeKind.RETRIEVAL]
    agree = [c.top1_agree for c in checks if c.top1_agree is not None]
    refs = references or {}
    shown = [
        Example(c.probe, c.level, c.text, refs[c.probe].text if c.probe in refs else "",
                c.failures)
        for c in checks if c.wrong
    ][:examples]  # fmt: skip
    return ArmAnswers(
        arm=arm,
        answers=len(checks),
        differ=sum(c.differs for c in checks),
        wrong=sum(c.wrong for c in checks),
        failures=tuple(sorted(failures.items())),
        retrieval=len(retrieval),
        recalled=sum(bool(c.recalled) for c in retrieval),
        top1_agree=sum(agree) / len(agree) if agree else None,
        examples=tuple(shown),
        cut=cut,
    )


def wrong_by_pair(visits: Sequence[tuple[int, Sequence[AnswerCheck]]]) -> dict[PairKey, bool]:
    """Each answer's wrongness keyed by (round, concurrency, probe), from (round, checks) per
    visit of one arm (a later visit of the same key replaces an earlier one); a cut answer is
    left out (not judged, so never paired)."""
    return {(rnd, c.level, c.probe): c.wrong for rnd, checks in visits for c in checks
            if not c.cut}  # fmt: skip
