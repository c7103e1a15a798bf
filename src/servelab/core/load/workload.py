"""Seeded synthetic workloads: prompts, input/output lengths, arrival schedules (pure).

Prompts are built from a built-in word list, one word ≈ one token, so no tokenizer is downloaded;
token counts of record come from the server's ``usage``. Every generator takes an ``int`` seed:
callers decide what an absent seed means (checked with ``is not None``), never ``if seed``.
Open-loop schedules are offsets in ns from one t0; a closed loop has no precomputed schedule
(a slot's next request is scheduled at the instant its previous one ends: see ``ops.bench.bench``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from servelab.core.load.metrics import e2e_ns
from servelab.core.load.records import RequestRecord

__all__ = [
    "MAX_REQUESTS",
    "WORDS",
    "LengthDist",
    "RequestSpec",
    "closed_loop_ramp_ns",
    "generate_requests",
    "iter_requests",
    "make_prompt",
    "poisson_offsets_ns",
]

WORDS: tuple[str, ...] = tuple(
    [
        "time",
        "year",
        "people",
        "way",
        "day",
        "man",
        "thing",
        "woman",
        "life",
        "child",
        "world",
        "school",
        "state",
        "family",
        "student",
        "group",
        "country",
        "problem",
        "hand",
        "part",
        "place",
        "case",
        "week",
        "company",
        "system",
        "program",
        "question",
        "work",
        "government",
        "number",
        "night",
        "point",
        "home",
        "water",
        "room",
        "mother",
        "area",
        "money",
        "story",
        "fact",
        "month",
        "lot",
        "right",
        "study",
        "book",
        "eye",
        "job",
        "word",
        "business",
        "issue",
        "side",
        "kind",
        "head",
        "house",
        "service",
        "friend",
        "father",
        "power",
        "hour",
        "game",
        "line",
        "end",
        "member",
        "law",
        "car",
        "city",
        "community",
        "name",
        "president",
        "team",
        "minute",
        "idea",
        "kid",
        "body",
        "information",
        "back",
        "parent",
        "face",
        "others",
        "level",
        "office",
        "door",
        "health",
        "person",
        "art",
        "war",
        "history",
        "party",
        "result",
        "change",
        "morning",
        "reason",
        "research",
        "girl",
        "guy",
        "moment",
        "air",
        "teacher",
        "force",
        "education",
        "foot",
        "boy",
        "age",
        "policy",
        "process",
        "music",
        "market",
        "sense",
        "nation",
        "plan",
        "college",
        "interest",
        "death",
        "experience",
        "effect",
        "class",
        "control",
        "care",
        "field",
        "development",
        "role",
        "effort",
        "rate",
        "heart",
        "drug",
        "show",
        "leader",
        "light",
        "voice",
        "wife",
        "police",
        "mind",
        "price",
        "report",
        "decision",
        "son",
        "view",
        "relationship",
        "town",
        "road",
        "arm",
        "difference",
        "value",
        "building",
        "action",
        "model",
        "season",
        "society",
        "tax",
        "director",
        "position",
        "player",
        "record",
        "paper",
        "space",
        "ground",
        "form",
        "event",
        "official",
        "matter",
        "center",
        "couple",
        "site",
        "project",
        "activity",
        "star",
        "table",
        "need",
        "court",
        "oil",
        "situation",
        "cost",
        "industry",
        "figure",
        "street",
        "image",
        "phone",
        "data",
        "picture",
        "practice",
        "piece",
        "land",
        "product",
        "doctor",
        "wall",
        "patient",
        "worker",
        "news",
        "test",
        "movie",
        "north",
        "love",
        "support",
        "technology",
        "step",
        "baby",
        "computer",
        "type",
        "attention",
        "film",
        "tree",
        "source",
        "organization",
        "hair",
        "window",
        "evidence",
        "population",
        "truth",
        "song",
        "network",
        "river",
        "memory",
        "kernel",
        "router",
        "decode",
        "prefill",
        "cache",
        "token",
        "batch",
        "engine",
    ]
)


@dataclass(frozen=True, slots=True)
class LengthDist:
    """A length distribution: ``fixed`` (value), ``uniform`` (low..high), ``normal`` (mean, std).

    Samples are rounded and clipped to at least ``minimum``.
    """

    kind: str = "fixed"
    value: float = 128
    spread: float = 0
    minimum: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ("fixed", "uniform", "normal"):
            raise ValueError(f"unknown length distribution {self.kind!r}")
        if self.value < self.minimum or self.spread < 0:
            raise ValueError(f"length {self.value} (spread {self.spread}) is out of range")

    def sample(self, rng: random.Random) -> int:
        """One length drawn with ``rng``."""
        if self.kind == "uniform":
            raw = rng.uniform(self.value - self.spread, self.value + self.spread)
        elif self.kind == "normal":
            raw = rng.gauss(self.value, self.spread)
        else:
            raw = self.value
        return max(self.minimum, round(raw))


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One synthetic request: prompt text, its length in words (≈ tokens), tokens to generate."""

    index: int
    prompt: str
    input_len: int
    output_len: int


def make_prompt(n_words: int, rng: random.Random) -> str:
    """A prompt of exactly ``n_words`` words drawn from :data:`WORDS`."""
    return " ".join(rng.choices(WORDS, k=n_words))


#: The most requests one run (or one warm-up) sends: its requests are generated before it
#: starts (about 2.5 KB each at the default lengths: ~250 MB and a few seconds at this bound).
MAX_REQUESTS = 100_000


def generate_requests(
    n: int,
    *,
    input_len: LengthDist,
    output_len: LengthDist,
    seed: int,
    shared_prefix_len: int = 0,
    n_prefixes: int = 1,
) -> list[RequestSpec]:
    """``n`` requests; with ``shared_prefix_len`` each prompt starts with one of ``n_prefixes``
    shared prefixes of that many words (counted inside the input length)."""
    return list(
        iter_requests(
            n,
            input_len=input_len,
            output_len=output_len,
            seed=seed,
            shared_prefix_len=shared_prefix_len,
            n_prefixes=n_prefixes,
        )
    )


def iter_requests(
    n: int,
    *,
    input_len: LengthDist,
    output_len: LengthDist,
    seed: int,
    shared_prefix_len: int = 0,
    n_prefixes: int = 1,
) -> Iterator[RequestSpec]:
    """:func:`generate_requests`'s requests one at a time, in order (the same ones)."""
    if n < 0 or shared_prefix_len < 0 or n_prefixes < 1:
        raise ValueError(
            "n, shared_prefix_len and n_prefixes must be non-negative (n_prefixes ≥ 1)"
        )
    rng = random.Random(seed)
    prefixes = [make_prompt(shared_prefix_len, rng) for _ in range(n_prefixes)]
    for i in range(n):
        total = input_len.sample(rng)
        out = output_len.sample(rng)
        own = make_prompt(max(total - shared_prefix_len, 1), rng)
        prompt = f"{prefixes[i % n_prefixes]} {own}" if shared_prefix_len else own
        yield RequestSpec(i, prompt, len(prompt.split()), out)


def poisson_offsets_ns(n: int, rate: float, *, seed: int) -> list[int]:
    """Arrival offsets (ns from t0) of a Poisson process of ``rate`` requests/s; first at 0."""
    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate}")
    rng = random.Random(seed)
    offsets, t = [], 0.0
    for i in range(n):
        if i:
            t += rng.expovariate(rate)
        offsets.append(round(t * 1e9))
    return offsets


def closed_loop_ramp_ns(ramp_s: float | None, warm: Sequence[RequestRecord]) -> int:
    """A closed loop's ramp: slot i of C sends first ``i * ramp / C`` after the start.

    An explicit ``ramp_s``, else the median E2E of the successful warm-up requests ``warm`` (the
    upper median of an even count), 0 without any.
    """
    if ramp_s is not None:
        return round(ramp_s * 1e9)
    e2e = sorted(x for r in warm if r.ok and (x := e2e_ns(r)) is not None)
    return e2e[len(e2e) // 2] if e2e else 0
