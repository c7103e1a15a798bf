"""Is a knob read by the engine it is set for? An env knob against the list of the variables the
engine's release reads (:mod:`servelab.core.knobs.engineenv`) and the extra variables the spec says
its build reads (``reads_env``); pure.

A variable with the engine's prefix that the release does not read (misspelled, renamed, removed)
is live in the process and in every file, passes every other layer, and changes nothing: an A/B of
it measures noise. It is a finding, with the closest name the release does read
(:func:`difflib.get_close_matches`). A release without a list is unknown, never "read".
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from servelab.core.knob import parse_knob
from servelab.core.knobs.engineenv import env_list
from servelab.core.ledger.codec import OMITTED_IF_NONE

__all__ = ["ReadVerdict", "UnreadKnob", "judge_argument", "judge_env"]


class ReadVerdict(StrEnum):
    """Whether the engine reads a knob."""

    READ = "read"  # on the release's list
    DECLARED = "declared"  # not on it, but the spec says this build reads it (reads_env)
    NOT_READ = "not_read"  # the engine's prefix, on neither: the engine ignores it
    NOT_JUDGED = "not_judged"  # not the engine's prefix (another program's), or not an env knob
    UNKNOWN = "unknown"  # no list for the release the engine reports (or no release reported)

    @property
    def ok(self) -> bool:
        return self is not ReadVerdict.NOT_READ and self is not ReadVerdict.UNKNOWN


@dataclass(frozen=True)
class UnreadKnob:
    """A knob judged against what the engine reads: the engine and the release it reports, the
    verdict, the closest name it does read (a misspelling's likely intent) and the list's
    source."""

    knob: str
    engine: str
    version: str | None
    verdict: ReadVerdict
    suggestion: Annotated[str | None, OMITTED_IF_NONE] = None
    source: Annotated[str | None, OMITTED_IF_NONE] = None


def judge_env(
    name: str, engine: str, version: str | None, declared: Iterable[str] = ()
) -> UnreadKnob:
    """Whether ``engine`` at ``version`` reads the env knob ``name`` (``declared``: the extra
    variables the spec says its build reads)."""
    extra = set(declared)
    if not parse_knob(name).is_env:
        return UnreadKnob(name, engine, version, ReadVerdict.NOT_JUDGED)
    known = env_list(engine, version)
    if known is None:
        prefixed = name.startswith(("SGLANG_", "SGL_", "VLLM_"))
        verdict = ReadVerdict.DECLARED if name in extra else ReadVerdict.UNKNOWN
        return UnreadKnob(name, engine, version, verdict if prefixed else ReadVerdict.NOT_JUDGED)
    if not known.judges(name):
        return UnreadKnob(name, engine, version, ReadVerdict.NOT_JUDGED, source=known.source)
    if known.reads(name):
        return UnreadKnob(name, engine, version, ReadVerdict.READ, source=known.source)
    if name in extra:
        return UnreadKnob(name, engine, version, ReadVerdict.DECLARED, source=known.source)
    close = difflib.get_close_matches(name, sorted(known.names | extra), n=1, cutoff=0.8)
    return UnreadKnob(
        name, engine, version, ReadVerdict.NOT_READ, close[0] if close else None, known.source
    )


def judge_argument(
    name: str, engine: str, version: str | None, flags: Iterable[str] | None
) -> UnreadKnob:
    """Whether the parser with ``flags`` (None: not known) reads the argument knob ``name`` (a
    flag, or a JSON key of one): its flag, or a unique prefix of one (argparse's
    ``allow_abbrev``, which both engines keep on)."""
    knob = parse_knob(name)
    if knob.is_env or knob.arg is None or flags is None:
        return UnreadKnob(name, engine, version, ReadVerdict.NOT_JUDGED)
    known = set(flags)
    flag = knob.arg if engine != "vllm" else knob.arg.replace("_", "-")
    if flag in known or len([f for f in known if f.startswith(flag)]) == 1:
        return UnreadKnob(name, engine, version, ReadVerdict.READ)
    close = difflib.get_close_matches(flag, sorted(known), n=1, cutoff=0.8)
    return UnreadKnob(name, engine, version, ReadVerdict.NOT_READ, close[0] if close else None)
