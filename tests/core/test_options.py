"""Command-line option texts parsed by pure rules (the CLI turns their OptionError into exit 2)."""

from __future__ import annotations

import pytest

from servelab.core.load.workload import LengthDist
from servelab.core.options import (
    ENDPOINTS,
    MAX_LEVELS,
    MAX_SESSIONS,
    KnobArms,
    KnobValues,
    parse_change,
    parse_concurrency,
    parse_count,
    parse_directory,
    parse_endpoint,
    parse_fraction,
    parse_header,
    parse_knob_arms,
    parse_knob_values,
    parse_length,
    parse_name,
    parse_positive,
    parse_positive_seconds,
    parse_rate,
    parse_seconds,
    parse_seed,
    parse_sessions,
)
from servelab.core.urls import parse_url
from servelab.errors import OptionError


def test_concurrency_lists() -> None:
    assert parse_concurrency("64,80,96") == (64, 80, 96)
    assert parse_concurrency("4, 8,") == (4, 8)
    for bad in ("0,4", "", ","):
        with pytest.raises(ValueError, match="concurrency must be positive"):
            parse_concurrency(bad)
    with pytest.raises(ValueError):
        parse_concurrency("0,x")


def test_concurrency_lists_are_at_most_max_levels_counted_before_parsing() -> None:
    """Issue 38: 5,000 levels were accepted (361 run in 60 s), 20,000 took 9 s to parse."""
    assert len(parse_concurrency(",".join(map(str, range(1, MAX_LEVELS + 1))) + ",")) == 64
    for count in (MAX_LEVELS + 1, 20_000):
        with pytest.raises(OptionError, match=f"names {count:,} levels, over the most allowed, 64"):
            parse_concurrency(",".join(map(str, range(1, count + 1))))
    with pytest.raises(OptionError, match="names 100,001 levels"):  # refused unparsed: no level
        parse_concurrency("x," * 100_000 + "x")


def test_length_distributions() -> None:
    assert parse_length("64") == LengthDist("fixed", 64)
    assert parse_length("uniform:128:32") == LengthDist("uniform", 128.0, 32.0)
    assert parse_length("normal:128:16").kind == "normal"
    with pytest.raises(ValueError, match="length must be N"):
        parse_length("uniform:128")
    with pytest.raises(ValueError, match="unknown length distribution"):
        parse_length("zipf:1:2")


def test_knob_arms() -> None:
    assert parse_knob_arms("decode:K=256, 512") == KnobArms("decode", "K", "256", "512")
    assert parse_knob_arms("decode:K=a=b,c").baseline == "a=b"
    for bad in ("decode-256,512", "decode:K=256", ":K=1,2", "decode:K=1,", "decode:K=1,2,3"):
        with pytest.raises(ValueError, match="expected SERVICE:NAME=BASELINE,CANDIDATE"):
            parse_knob_arms(bad)


def test_knob_values_and_changes() -> None:
    ctas = KnobValues("decode", "K", ("128", "256", "512"))
    assert parse_knob_values("decode:K=128, 256,512") == ctas
    assert parse_knob_values("decode:--max-running-requests=32,64").name == "--max-running-requests"
    for bad in ("decode:K=256", "decode:K=1,1", "decode:K=1,,2", ":K=1,2", "decode-1,2"):
        with pytest.raises(ValueError, match="expected SERVICE:NAME=VALUE,VALUE"):
            parse_knob_values(bad)
    assert parse_change("decode:K=512,256") == ("decode", "K", "512", "256")
    assert parse_change("decode:T=,16") == ("decode", "T", None, "16")
    assert parse_change("decode:--x=on, ") == ("decode", "--x", "on", None)
    for bad in ("decode:K=1,1", "decode:K=,", "decode:K=1", "decode:K=1,2,3", "K=1,2",
                "decode:K=64,64.0", "decode:K=NaN,nan"):  # fmt: skip
        with pytest.raises(ValueError, match="expected SERVICE:NAME=FROM,TO"):
            parse_change(bad)


def test_every_refusal_is_an_option_error() -> None:
    """The one typed error the CLI turns into a usage error naming the option."""
    refusals = [
        (parse_concurrency, "0,x"), (parse_length, "x"), (parse_length, "0"),
        (parse_length, "uniform:nan:1"), (parse_knob_arms, "k"), (parse_fraction, "x"),
        (parse_positive, "0"), (parse_count, "-1"), (parse_seed, "1.5"), (parse_sessions, "4097"),
        (parse_seconds, "-1"), (parse_positive_seconds, "0"), (parse_rate, "inf"),
        (parse_endpoint, "/v1/embeddings"), (parse_url, "localhost:8000"), (parse_name, " "),
        (parse_directory, ""), (parse_knob_values, "k"), (parse_change, "k"),
    ]  # fmt: skip
    for parse, text in refusals:
        with pytest.raises(OptionError):
            parse(text)


def test_whole_numbers() -> None:
    assert (parse_positive("3"), parse_count("0"), parse_seed("-1")) == (3, 0, -1)
    assert (parse_sessions("1"), parse_sessions(str(MAX_SESSIONS))) == (1, MAX_SESSIONS)
    with pytest.raises(OptionError, match=r"expected a whole number ≥ 1, got '0'"):
        parse_positive("0")
    with pytest.raises(OptionError, match="from 1 to 4096"):
        parse_sessions("0")


def test_seconds_and_rates_are_finite() -> None:
    assert (parse_seconds("0"), parse_positive_seconds("0.5"), parse_rate("2")) == (0.0, 0.5, 2.0)
    for bad in ("nan", "inf", "-inf", "x"):
        for parse in (parse_seconds, parse_positive_seconds, parse_rate):
            with pytest.raises(OptionError):
                parse(bad)
    with pytest.raises(OptionError, match="expected seconds > 0, got '0'"):
        parse_positive_seconds("0")


def test_a_fixed_length_stays_whole() -> None:
    """As configs were recorded before: ``{"kind": "fixed", "value": 64, "spread": 0}``."""
    fixed = parse_length("64")
    assert (fixed.value, fixed.spread) == (64, 0) and isinstance(fixed.value, int)
    with pytest.raises(OptionError, match="out of range"):
        parse_length("uniform:128:-1")


def test_urls_endpoints_names_and_directories() -> None:
    assert parse_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert parse_url("https://[::1]:443") == "https://[::1]:443"
    for bad in ("127.0.0.1:8000", "ftp://h", "http://", "http://h:0", "http://h:99999"):
        with pytest.raises(OptionError, match="http:// or https:// URL"):
            parse_url(bad)
    assert parse_endpoint(ENDPOINTS[1]) == "/v1/completions"
    assert parse_name("org/model") == "org/model"
    assert parse_directory("out") == "out"


def test_fractions() -> None:
    assert parse_fraction("1%") == pytest.approx(0.01)
    assert parse_fraction(" 0.05 ") == 0.05
    with pytest.raises(OptionError, match="is not a fraction"):
        parse_fraction("five")
    with pytest.raises(OptionError, match=r"out of range \(0% .. 100%\)"):
        parse_fraction("100%")


def test_a_header_is_name_colon_value_and_never_one_servelab_writes() -> None:
    assert parse_header("Authorization: Bearer x") == ("Authorization", "Bearer x")
    assert parse_header("X-Tenant:a:b") == ("X-Tenant", "a:b")  # the first colon splits
    assert parse_header("X-Empty:") == ("X-Empty", "")
    for bad in ("nocolon", ":v", "Bad Name:v", "X-A:v\r\nInjected: 1"):
        with pytest.raises(OptionError):
            parse_header(bad)
    for mine in ("Host", "content-length", "Connection", "X-Request-Id", "traceparent"):
        with pytest.raises(OptionError, match="itself"):
            parse_header(f"{mine}:x")


def test_a_refused_header_never_quotes_its_value() -> None:
    """A header refused echoed the whole text, token included (a token file's CRLF ending made
    `Authorization: Bearer sk-...\\r\\n` a refusal that printed the token); a control character
    passed and failed later as a network error, exit 1."""
    for bad in ("Authorization: Bearer sk-PLANTED1\r\n", "Authorization Bearer sk-PLANTED1",
                "X-Api-Key: sk-PLANTED1\x01", "Host: sk-PLANTED1"):  # fmt: skip
        with pytest.raises(OptionError) as refused:
            parse_header(bad)
        assert "sk-PLANTED1" not in str(refused.value)


def test_a_header_value_holds_visible_ascii_space_and_tab_only() -> None:
    """Issue 38, fifteenth pass (M1/M2): DEL passed and failed at aiohttp ("Forbidden control
    character"), a non-Latin-1 character as an "unexpected UnicodeEncodeError", both exit 1;
    a Latin-1 one went out as UTF-8 through aiohttp, as Latin-1 through the raw client."""
    for bad, why in (("\x7f", "control character, DEL"), ("\x1b[0m", "control character"),
                     ("\u2713", "not US-ASCII"), ("\u00e9", "not US-ASCII"),
                     ("\u00a0", "not US-ASCII"), ("\x85", "not US-ASCII"),
                     ("\ufeff", "not US-ASCII"), ("\uff11", "not US-ASCII"),
                     ("\udcff", "not US-ASCII")):  # fmt: skip
        with pytest.raises(OptionError, match=why) as refused:
            parse_header(f"Authorization: Bearer sk-PLANTED1{bad}x")
        assert "sk-PLANTED1" not in str(refused.value) and "Authorization" in str(refused.value)
    visible = "".join(chr(c) for c in range(0x21, 0x7F))
    assert parse_header(f"X-A: a\tb c{visible}") == ("X-A", f"a\tb c{visible}")


def test_repeat_and_workers_are_bounded() -> None:
    """Issue 38, eighth hostile pass: ``--repeat`` and ``--workers`` took any whole number."""
    from servelab.core.bounds import (
        MAX_REPEAT,
        MAX_WORKERS,
        parse_effect,
        parse_repeat,
        parse_workers,
    )

    assert parse_repeat(str(MAX_REPEAT)) == MAX_REPEAT and parse_workers("64") == MAX_WORKERS
    for parse, bad in ((parse_repeat, "1001"), (parse_repeat, "0"), (parse_workers, "65"),
                       (parse_repeat, "99999999999999999999"), (parse_workers, "0")):  # fmt: skip
        with pytest.raises(OptionError, match="a whole number from 1 to"):
            parse(bad)
    assert parse_effect("5%") == pytest.approx(0.05)
    for bad in ("0", "0%", "0.0"):
        with pytest.raises(OptionError, match="is no change: nothing to detect"):
            parse_effect(bad)


# The sixteenth pass (issue 38): ``float`` reads any script's digits, so ``--rate ٣`` (an
# Arabic-Indic 3) ran at 3 requests a second and ``１.５`` (full-width) was 1.5; ``--concurrency``
# already refused them. Every real-number option refuses them now, as an OptionError (exit 2,
# the option named by the CLI).
_OTHER_SCRIPTS = ["٣", "１.５", "1.５", "١٢%", "२", "𝟐", "3٫5", "٣s", "1e٣"]


@pytest.mark.parametrize("text", _OTHER_SCRIPTS)
@pytest.mark.parametrize(
    "parse",
    ["parse_seconds", "parse_positive_seconds", "parse_positive_minutes", "parse_rate",
     "parse_load_rate", "parse_fraction", "parse_speedup", "parse_length", "parse_trace_window"],
)  # fmt: skip
def test_a_real_number_in_another_scripts_digits_is_refused(parse: str, text: str) -> None:
    import servelab.core.options as options

    with pytest.raises(OptionError):
        getattr(options, parse)(text if parse != "parse_trace_window" else f"{text}:")


def test_the_ascii_forms_of_those_numbers_still_read() -> None:
    from servelab.core.options import parse_fraction, parse_length, parse_rate, parse_speedup

    assert parse_rate("3") == 3.0 and parse_rate(" 1.5 ") == 1.5 and parse_rate("1e3") == 1000.0
    assert parse_fraction("12%") == 0.12 and parse_speedup("1.5") == 1.5
    assert parse_length("uniform:128:32") == LengthDist("uniform", 128.0, 32.0)
