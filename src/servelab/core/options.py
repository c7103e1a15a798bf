"""The texts of command-line options, parsed (pure): one parser per option, shared by every command
that takes the option (``cli/options.py`` declares each option once and names its parser here).

Each parser takes the text as typed and returns the typed value, or raises
:class:`~servelab.errors.OptionError` saying what it expected; the CLI turns that into a usage
error naming the option (exit 2). Numbers must be finite: ``nan`` and ``inf`` are refused, and
bounded: a time at most :data:`MAX_SECONDS` (a day, as a spec's timeouts), a rate within
:data:`MIN_RATE`..:data:`MAX_RATE`, a length's parameters at most
:data:`~servelab.core.load.lengths.MAX_TOKENS` (``--deadline 1e308`` or ``--rate 1e-308`` once
ended in an OverflowError). A number out of range is said with ``%g``, never 300 digits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servelab.core.deploy.spec import MAX_TIMEOUT_S
from servelab.core.knob import same_value
from servelab.core.load.lengths import MAX_TOKENS, longest
from servelab.core.load.slo import SLO, parse_duration_ms
from servelab.core.load.slo import parse_slo as _slo
from servelab.core.load.trace import MAX_REPLAY_S, TraceWindow
from servelab.core.load.workload import MAX_REQUESTS, LengthDist
from servelab.core.whole import ascii_float as _float
from servelab.core.whole import ascii_int, comma_count, comma_items, echoed, parse_whole
from servelab.errors import OptionError

__all__ = [
    "CHANGE_FORM",
    "ENDPOINTS",
    "KNOB_ARMS_FORM",
    "KNOB_VALUES_FORM",
    "MAX_BLOCK_SIZE",
    "MAX_LEVELS",
    "MAX_MINUTES",
    "MAX_RATE",
    "MAX_RUN_SECONDS",
    "MAX_SECONDS",
    "MAX_SESSIONS",
    "MIN_RATE",
    "RESERVED_HEADERS",
    "KnobArms",
    "KnobValues",
    "parse_block_size",
    "parse_change",
    "parse_concurrency",
    "parse_count",
    "parse_directory",
    "parse_endpoint",
    "parse_fraction",
    "parse_header",
    "parse_knob_arms",
    "parse_knob_values",
    "parse_length",
    "parse_load_rate",
    "parse_name",
    "parse_positive",
    "parse_positive_minutes",
    "parse_positive_seconds",
    "parse_rate",
    "parse_requests",
    "parse_seconds",
    "parse_seed",
    "parse_sessions",
    "parse_slo",
    "parse_speedup",
    "parse_trace_window",
    "parse_warmup",
]

#: The form ``ab --knob`` takes.
KNOB_ARMS_FORM = "SERVICE:NAME=BASELINE,CANDIDATE"
#: The form ``tune --knob`` takes.
KNOB_VALUES_FORM = "SERVICE:NAME=VALUE,VALUE[,...]"
#: The form ``case bisect --change`` takes (an empty value: unset).
CHANGE_FORM = "SERVICE:NAME=FROM,TO"
#: The OpenAI endpoints a load can stream from.
ENDPOINTS = ("/v1/chat/completions", "/v1/completions")
#: The most levels ``--concurrency`` names: each is a row of the results, and every visit of an
#: ``ab`` or ``tune`` runs them all (the docs and the demo use at most 5).
MAX_LEVELS = 64
#: The most concurrent agent sessions a soak runs.
MAX_SESSIONS = 4096
#: The most tokens a trace's hash id may stand for (``--trace-block-size``, ``trace generate
#: --block-size``): real caches page by 16 to 512; each id's words are built and cached whole.
MAX_BLOCK_SIZE = 65_536
#: The longest timeout, deadline or ramp an option may give: a day, as a spec's timeouts.
MAX_SECONDS = MAX_TIMEOUT_S
#: The longest a run may be given (``soak --duration``): a week, as a trace replay's cap.
MAX_RUN_SECONDS = MAX_REPLAY_S
#: The longest time budget (``--max-minutes``): the same week.
MAX_MINUTES = MAX_RUN_SECONDS / 60
#: The fastest arrival rate: a million requests a second, past any client's reach.
MAX_RATE = 1e6
#: The slowest arrival rate: one request a day (its Poisson gaps stay finite nanoseconds).
MIN_RATE = 1 / MAX_SECONDS


def _finite(text: str, expected: str) -> float:
    try:
        value = _float(text)  # another script's digits (``٣``, ``１.５``) are refused
    except ValueError:
        raise OptionError(f"expected {expected}, got {echoed(text)}") from None
    if not math.isfinite(value):
        raise OptionError(f"expected {expected}, got {echoed(text)}")
    return value


def parse_seed(text: str) -> int:
    """Any whole number (``0``, ``42``, ``-1``)."""
    return parse_whole(text, "a whole number")


def parse_positive(text: str) -> int:
    """A whole number ≥ 1 (requests, runs, client processes, a case id)."""
    return parse_whole(text, "a whole number ≥ 1", low=1)


def parse_requests(text: str) -> int:
    """A run's requests: 1 to :data:`~servelab.core.load.workload.MAX_REQUESTS`."""
    return parse_whole(text, f"a whole number from 1 to {MAX_REQUESTS:,}", low=1, high=MAX_REQUESTS)


def parse_warmup(text: str) -> int:
    """A level's warm-up requests: 0 to :data:`~servelab.core.load.workload.MAX_REQUESTS`."""
    return parse_whole(text, f"a whole number from 0 to {MAX_REQUESTS:,}", low=0, high=MAX_REQUESTS)


def parse_block_size(text: str) -> int:
    """Tokens per trace hash id: 1 to :data:`MAX_BLOCK_SIZE`."""
    return parse_whole(
        text, f"a whole number from 1 to {MAX_BLOCK_SIZE:,}", low=1, high=MAX_BLOCK_SIZE
    )


def parse_count(text: str) -> int:
    """A whole number ≥ 0 (warm-up requests)."""
    return parse_whole(text, "a whole number ≥ 0", low=0)


def parse_sessions(text: str) -> int:
    """A soak's concurrent agent sessions: 1 to :data:`MAX_SESSIONS`."""
    return parse_whole(text, f"a whole number from 1 to {MAX_SESSIONS}", low=1, high=MAX_SESSIONS)


def _shown(value: float) -> str:
    """A number in an error: whole ones up to 10^15 in full (16,777,216), others with ``%g``."""
    return f"{value:,.0f}" if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


def _cut(text: str) -> str:
    """The text as typed, cut to its first 24 characters (not 400 digits)."""
    return text if len(text) <= 24 else f"{text[:24]}… ({len(text):,} characters)"


def _over(value: float, most: float, unit: str) -> float:
    """``value`` unless it passes ``most`` (said with ``%g``: 1e+308, never its 309 digits)."""
    if value > most:
        raise OptionError(f"{_shown(value)} {unit} is over the most allowed, {_shown(most)} {unit}")
    return value


def parse_seconds(text: str) -> float:
    """Seconds ≥ 0, at most :data:`MAX_SECONDS` (a ramp: 0 starts everyone at once)."""
    value = _finite(text, "seconds ≥ 0")
    if value < 0:
        raise OptionError(f"expected seconds ≥ 0, got {echoed(text)}")
    return _over(value, MAX_SECONDS, "s")


def parse_positive_seconds(text: str) -> float:
    """Seconds > 0, at most :data:`MAX_SECONDS` (an idle timeout, a deadline)."""
    value = _finite(text, "seconds > 0")
    if value <= 0:
        raise OptionError(f"expected seconds > 0, got {echoed(text)}")
    return _over(value, MAX_SECONDS, "s")


def parse_positive_minutes(text: str) -> float:
    """Minutes > 0, at most :data:`MAX_MINUTES` (a time budget: ``nan`` or ``inf`` would never be
    reached)."""
    value = _finite(text, "minutes > 0")
    if value <= 0:
        raise OptionError(f"expected minutes > 0, got {echoed(text)}")
    return _over(value, MAX_MINUTES, "minutes")


def parse_rate(text: str) -> float:
    """Requests per second > 0, at most :data:`MAX_RATE` (``trace generate`` says itself what a
    rate too slow for a trace would span)."""
    value = _finite(text, "requests per second > 0")
    if value <= 0:
        raise OptionError(f"expected requests per second > 0, got {echoed(text)}")
    return _over(value, MAX_RATE, "requests per second")


def parse_load_rate(text: str) -> float:
    """A load's arrivals per second: :func:`parse_rate`, and at least :data:`MIN_RATE` (one a
    day: ``--rate 1e-308`` made a gap past every float)."""
    value = parse_rate(text)
    if value < MIN_RATE:
        raise OptionError(f"{value:g} requests per second is under the least allowed, "
                          "one a day (1/86400)")  # fmt: skip
    return value


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``"64,80,96"`` → ``(64, 80, 96)`` (``"4, 8,"`` too; ``"1,,2"``, ``"１"``: refused). A
    level twice (``4,4``, ``4,04``) is refused naming it: each level is one row of the results,
    its runs one sample, and an A/B compares the arms level by level (two runs of one level would
    read as two levels, or the second overwrite the first). At most :data:`MAX_LEVELS` levels,
    counted before any is parsed."""
    if (count := comma_count(text)) > MAX_LEVELS:
        raise OptionError(f"concurrency {echoed(text)} names {count:,} levels, over the most "
                          f"allowed, {MAX_LEVELS}")  # fmt: skip
    expected = f"concurrency must be positive integers, got {echoed(text)}"
    try:
        values = tuple(ascii_int(part) for part in comma_items(text))
    except ValueError:
        raise OptionError(expected) from None
    if not values or min(values) < 1:
        raise OptionError(expected)
    if max(values) > MAX_REQUESTS:  # more slots than a run's most requests could ever fill
        raise OptionError(f"concurrency {echoed(text)} is over the most allowed, "
                          f"{MAX_REQUESTS:,} (a run's most requests)")  # fmt: skip
    repeated = sorted({v for v in values if values.count(v) > 1})  # ≤ MAX_LEVELS²: 4,096
    if repeated:
        raise OptionError(
            f"concurrency {echoed(text)} gives {', '.join(map(str, repeated))} more than once: "
            "name each level once (--repeat runs a level again)"
        )
    return values


def parse_length(text: str) -> LengthDist:
    """``"128"`` (fixed), ``"uniform:128:32"`` (128 ± 32), ``"normal:128:16"`` (mean:std)."""
    parts = text.split(":")
    try:
        if len(parts) == 1:
            kind, value, spread = "fixed", float(ascii_int(parts[0])), 0.0
        elif len(parts) == 3:
            kind, value, spread = parts[0], _float(parts[1]), _float(parts[2])
        else:
            raise ValueError(text)
        if not (math.isfinite(value) and math.isfinite(spread)):
            raise ValueError(text)
    except (ValueError, OverflowError):  # OverflowError: a whole number past any float
        raise OptionError(
            f"length must be N, uniform:N:SPREAD or normal:MEAN:STD, got {echoed(text)}"
        ) from None
    if max(value, spread) > MAX_TOKENS:  # before longest(): 6 σ of 1e308 is no number
        raise OptionError(f"{_cut(text)} reaches {_shown(max(value, spread))} tokens, over "
                          f"{MAX_TOKENS:,}: longer than any model's context")  # fmt: skip
    try:  # a fixed length stays whole, LengthDist("fixed", 64), as configs recorded it before
        dist = LengthDist(kind, value, spread) if len(parts) == 3 else LengthDist(kind, int(value))
    except ValueError as exc:  # its own rule: a known kind, a length ≥ 1, a spread ≥ 0
        raise OptionError(str(exc)) from None
    if longest(dist) > MAX_TOKENS:  # refused before any prompt is built (core/load/lengths.py)
        raise OptionError(f"{_cut(text)} reaches {longest(dist):,} tokens, over {MAX_TOKENS:,}: "
                          "longer than any model's context")  # fmt: skip
    return dist


def parse_endpoint(text: str) -> str:
    """One of :data:`ENDPOINTS`."""
    if text not in ENDPOINTS:
        raise OptionError(f"expected one of {', '.join(ENDPOINTS)}, got {text!r}")
    return text


def parse_name(text: str) -> str:
    """A name that is not blank (a model)."""
    if not text.strip():
        raise OptionError(f"expected a name, got {text!r}")
    return text


def parse_directory(text: str) -> str:
    """A directory's path (not empty); whether it exists is the writer's business."""
    if not text:
        raise OptionError("expected a directory, got ''")
    return text


def parse_fraction(text: str) -> float:
    """``1%`` or ``0.01`` → 0.01; from 0 (included) to 1 (excluded)."""
    raw = text.strip()
    try:
        value = _float(raw[:-1]) / 100.0 if raw.endswith("%") else _float(raw)
    except ValueError:
        raise OptionError(f"{text!r} is not a fraction (1% or 0.01)") from None
    if not 0.0 <= value < 1.0:
        raise OptionError(f"{text!r} is out of range (0% .. 100%)")
    return value


@dataclass(frozen=True)
class KnobArms:
    """An A/B's knob and its two values: ``decode:NAME=256,512``."""

    service: str
    name: str
    baseline: str
    candidate: str


def parse_knob_arms(text: str) -> KnobArms:
    """``decode:NAME=256,512`` → ``KnobArms("decode", "NAME", "256", "512")``.

    Raises OptionError ("expected SERVICE:NAME=BASELINE,CANDIDATE") on any other form.
    """
    expected = OptionError(f"expected {KNOB_ARMS_FORM}")
    try:
        target, values = text.split("=", 1)
        service, name = target.split(":", 1)
        baseline, candidate = (v.strip() for v in values.split(","))
    except ValueError:
        raise expected from None
    if not (service and name and baseline and candidate):
        raise expected
    return KnobArms(service, name, baseline, candidate)


#: Headers servelab writes itself on every request (the framing, and each request's identity):
#: ``--header`` may not set them.
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "x-request-id", "traceparent"}
)
#: The characters of a header name (RFC 9110's ``tchar``).
_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


#: A header value's characters: visible US-ASCII, space, tab (RFC 9110 5.5's SHOULD). Not its
#: obs-text (0x80-0xFF): aiohttp writes UTF-8, the raw stream client Latin-1 (two headers).
_FIELD_CHARS = frozenset(chr(c) for c in range(0x20, 0x7F)) | {"\t"}


def parse_header(text: str) -> tuple[str, str]:
    """``NAME:VALUE`` → ``(NAME, VALUE)`` (the value stripped): a request header every request
    carries. The name must be a token and not one servelab writes itself
    (:data:`RESERVED_HEADERS`); the value only :data:`_FIELD_CHARS` (no line break, control
    character or DEL; nothing non-ASCII). A refusal names the header, never its value."""
    name, sep, value = text.partition(":")
    if not sep or not name or not set(name) <= _TCHAR:  # the text may be all value: never quoted
        raise OptionError("expected NAME:VALUE with NAME a header name (a token before the colon)")
    if name.lower() in RESERVED_HEADERS:
        raise OptionError(f"servelab sets {name} itself; it cannot be given")
    outside = set(value) - _FIELD_CHARS
    if any(ord(c) < 0x20 or c == "\x7f" for c in outside):
        raise OptionError(f"the value of header {name} cannot hold a line break or a control "
                          "character, DEL included (a token file's CRLF ending?)")  # fmt: skip
    if outside:
        raise OptionError(f"the value of header {name} holds a character that is not US-ASCII "
                          "(a pasted symbol or non-breaking space?): a header's value is sent "
                          "as visible ASCII, space and tab only")  # fmt: skip
    return name, value.strip()


def _knob_target(text: str) -> tuple[str, str, str]:
    """``SERVICE:NAME=REST`` → ``(SERVICE, NAME, REST)`` (ValueError on another form)."""
    target, values = text.split("=", 1)
    service, name = target.split(":", 1)
    if not (service.strip() and name.strip()):
        raise ValueError(text)
    return service.strip(), name.strip(), values


@dataclass(frozen=True)
class KnobValues:
    """A tune's knob and the values it tries: ``decode:NAME=128,256,512``."""

    service: str
    name: str
    values: tuple[str, ...]


def parse_knob_values(text: str) -> KnobValues:
    """``decode:NAME=128,256,512`` → ``KnobValues("decode", "NAME", ("128", "256", "512"))``:
    two or more distinct values, none empty."""
    expected = OptionError(f"expected {KNOB_VALUES_FORM} (two or more distinct values)")
    try:
        service, name, rest = _knob_target(text)
    except ValueError:
        raise expected from None
    values = tuple(v.strip() for v in rest.split(","))
    if len(values) < 2 or not all(values) or len(set(values)) != len(values):
        raise expected  # (one setting in two spellings, 256,0256: check_tune, as the knob reads it)
    return KnobValues(service, name, values)


def parse_change(text: str) -> tuple[str, str, str | None, str | None]:
    """``decode:NAME=256,512`` → ``("decode", "NAME", "256", "512")``; an empty value is unset
    (``decode:NAME=,16``: from unset to 16). The two values differ."""
    expected = OptionError(f"expected {CHANGE_FORM} (two different values; an empty one: unset)")
    try:
        service, name, rest = _knob_target(text)
        before, after = (v.strip() or None for v in rest.split(","))
    except ValueError:
        raise expected from None
    if same_value(before, after):
        raise expected
    return service, name, before, after


def parse_slo(text: str) -> SLO:
    """``ttft_p99=2s,itl_p99=60ms`` → an :class:`~servelab.core.load.slo.SLO` (any percentile
    of ttft, itl, tpot, e2e; a limit with its unit)."""
    try:
        return _slo(text)
    except ValueError as exc:
        raise OptionError(str(exc)) from None


def parse_speedup(text: str) -> float:
    """A factor > 0 (``2``: twice as fast as recorded; ``0.5``: half as fast)."""
    value = _finite(text, "a factor > 0")
    if value <= 0:
        raise OptionError(f"expected a factor > 0, got {echoed(text)}")
    return value


def _seconds_of(text: str) -> float:
    """Seconds, bare (``90``) or with a unit (``90s``, ``1.5min``, ``500ms``)."""
    try:
        return parse_duration_ms(text) / 1e3 if text.strip()[-1:].isalpha() else _float(text)
    except ValueError:
        raise OptionError(f"expected seconds (90, 90s, 1.5min), got {echoed(text)}") from None


def parse_trace_window(text: str) -> TraceWindow:
    """``START:END`` in seconds of trace time (``60:120``, ``0:5min``); either side may be left
    out (``:300`` from the start, ``600:`` to the end)."""
    start, sep, end = text.partition(":")
    if not sep:
        raise OptionError(
            f"expected START:END (seconds, either may be left out), got {echoed(text)}"
        )
    low = _seconds_of(start) if start.strip() else 0.0
    high = _seconds_of(end) if end.strip() else None
    if not math.isfinite(low) or (high is not None and not math.isfinite(high)):
        raise OptionError(f"expected finite seconds, got {echoed(text)}")
    try:
        return TraceWindow(low, high)
    except ValueError:
        raise OptionError(f"expected 0 ≤ START < END, got {echoed(text)}") from None
