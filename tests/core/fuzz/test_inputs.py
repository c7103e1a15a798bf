"""The fuzz tier (issue 38): every parser and typed value a user types, with hostile inputs. Any
input gives a result or one typed bad-input error (the CLI: one line, exit 2), never another
exception."""

from __future__ import annotations

import contextlib
import json
import posixpath
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servelab.core import options
from servelab.core.deploy.spec import parse_spec
from servelab.core.engines import SGLANG, VLLM
from servelab.core.knob import parse_knob
from servelab.core.knobs.argv import arg_values, set_words
from servelab.core.knobs.configfile import config_values, edit_config
from servelab.core.knobs.envfile import parse_envfile
from servelab.core.knobs.places import split_args
from servelab.core.knobs.rules import parse_env_bytes
from servelab.core.load.trace import TraceReader
from servelab.core.whole import comma_count, comma_items
from servelab.errors import OptionError, ServelabError
from tests.core.fuzz.support import mutated, result_or_error, texts, utf8

#: Every option parser of core/options.py (each option value a user types).
OPTION_PARSERS: list[Callable[[str], Any]] = [
    getattr(options, name) for name in options.__all__ if name.startswith("parse_")
]
SPEC = """name = "pd"
state_dir = "state"
[services.prefill]
role = "prefill"
url = "http://127.0.0.1:31000"
start = "sim"
bootstrap_port = 31998
[services.decode]
role = "decode"
url = "http://127.0.0.1:31002"
start = "sim"
env_file = "env/decode.env"
args_env = "SGLANG_ARGS"
knobs = ["SGLANG_SM120_MMA_TARGET_CTAS", "--max-running-requests"]
depends_on = ["prefill"]
[services.router]
role = "router"
url = "http://127.0.0.1:31001"
start = "router"
depends_on = ["prefill", "decode"]
"""
ENV = (
    "SGLANG_SM120_MMA_TARGET_CTAS=512\n# note\nSGLANG_ARGS=\"--max-running-requests 32\"\nA='b c'\n"
)
YAML = (
    "# settings\nmax-running-requests: 32\nchunked-prefill-size: 2048 # tuned\nkv: '{\"a\": 1}'\n"
)
TRACE = '{"timestamp": 0, "input_length": 12, "output_length": 4, "hash_ids": [1, 2]}'
KNOBS = ["--max-running-requests", "--disable-radix-cache", "--chunked-prefill-size",
         "SGLANG_SM120_MMA_TARGET_CTAS", "--json-model-override-args.rope.factor"]  # fmt: skip


@pytest.mark.parametrize("parse", OPTION_PARSERS, ids=lambda f: f.__name__)
@given(text=texts)
def test_every_option_value(parse: Callable[[str], Any], text: str) -> None:
    result_or_error(parse, text)


#: The real-number options' parsers: none takes another script's digits (the sixteenth pass).
REAL_PARSERS = [options.parse_seconds, options.parse_positive_seconds, options.parse_rate,
                options.parse_positive_minutes, options.parse_load_rate, options.parse_fraction,
                options.parse_speedup, options.parse_length]  # fmt: skip
#: A number written in ASCII with one of its digits in another script (Nd: Arabic-Indic,
#: Devanagari, full-width, mathematical bold...).
other_digits = st.tuples(
    st.from_regex(r"[0-9]{0,3}(\.[0-9]{0,3})?%?", fullmatch=True),
    st.characters(categories=["Nd"]).filter(lambda c: not c.isascii()),
    st.integers(0, 6),
).map(lambda t: t[0][: t[2]] + t[1] + t[0][t[2] :])


@pytest.mark.parametrize("parse", REAL_PARSERS, ids=lambda f: f.__name__)
@given(text=other_digits)
def test_a_real_number_with_another_scripts_digit_is_refused(
    parse: Callable[[str], Any], text: str
) -> None:
    with pytest.raises(OptionError):
        parse(text)


@given(
    text=st.one_of(
        texts,
        st.lists(st.sampled_from(["1", " 2", "", " ", ",", "\u00a0", "x"]), max_size=80).map(
            ",".join
        ),
    )
)
def test_concurrency_lists_counted_as_split(text: str) -> None:
    """The count bounding ``--concurrency`` before it is split is the split's (issue 38)."""
    with contextlib.suppress(ValueError):  # an empty item before the last: refused, any count
        assert comma_count(text) == len(comma_items(text))
    got = result_or_error(options.parse_concurrency, text)
    assert isinstance(got, ServelabError) or 1 <= len(got) <= options.MAX_LEVELS


@given(text=st.one_of(texts, mutated("decode:SGLANG_X=256,512"), mutated("ttft_p99=2s")))
def test_knob_values_slos_and_durations(text: str) -> None:
    for parse in (options.parse_knob_values, options.parse_knob_arms, options.parse_change,
                  options.parse_slo, options.parse_trace_window, options.parse_header):  # fmt: skip
        result_or_error(parse, text)


@given(text=st.one_of(texts, mutated(SPEC)))
def test_spec_toml(text: str) -> None:
    result_or_error(lambda t: parse_spec(t, source="fuzz.toml"), text)


@given(data=st.one_of(st.binary(max_size=300), mutated(ENV).map(utf8)))
def test_env_file(data: bytes) -> None:
    got = result_or_error(parse_env_bytes, data, "fuzz.env")
    if not isinstance(got, ServelabError):
        again = parse_envfile(got.render(), source="again.env")  # what servelab writes reads back
        assert again.as_dict() == got.as_dict()
        assert got.encode() == data  # every byte kept, UTF-8 or not (issue 38, the tenth pass)


@given(
    words=st.lists(st.one_of(texts, st.sampled_from(KNOBS), st.just("--")), max_size=8),
    value=st.one_of(st.none(), texts),
    name=st.one_of(st.sampled_from(KNOBS), texts),
)
def test_argv_and_knob_names(words: list[str], value: str | None, name: str) -> None:
    for engine in (SGLANG, VLLM):
        result_or_error(arg_values, words, engine)
        knob = result_or_error(parse_knob, name, engine)
        if isinstance(knob, ServelabError):
            continue
        result_or_error(knob.normalize, value)  # a value as `knob set NAME=VALUE` types it
        if not knob.is_env:
            result_or_error(set_words, words, knob, value, engine)
    result_or_error(split_args, " ".join(words))


@given(data=st.one_of(st.binary(max_size=300), mutated(YAML).map(utf8)),
       value=st.one_of(st.none(), texts), name=st.sampled_from(KNOBS[:3]))  # fmt: skip
def test_config_yaml(data: bytes, value: str | None, name: str) -> None:
    for engine in (SGLANG, VLLM):
        result_or_error(config_values, data, engine, "fuzz.yaml")
        text = data.decode("utf-8", "replace")
        result_or_error(edit_config, text, parse_knob(name, engine), value, engine, "fuzz.yaml")


@given(lines=st.lists(st.one_of(texts, mutated(TRACE), st.binary(max_size=80)), max_size=6))
def test_trace_lines(lines: list[str | bytes]) -> None:
    reader = TraceReader()
    for line in lines:
        result_or_error(reader.feed, line)
    result_or_error(reader.flush)


@given(name=st.one_of(texts, st.sampled_from(["../../etc", "a/b", "", " ", ".", "..", "-x", "é"])))
def test_deployment_name_is_one_safe_path_segment(name: str) -> None:
    """A spec's ``name`` becomes a folder (over SSH ``~/.servelab/<name>``) and a mark (issue 38
    M5): whatever a user types, it is refused, or accepted only as one plain path segment."""
    body = SPEC.split("\n", 1)[1]
    spec = result_or_error(
        lambda t: parse_spec(t, source="fuzz.toml"), f"name = {_toml(name)}\n{body}"
    )
    if not isinstance(spec, ServelabError):
        assert spec.name == posixpath.basename(spec.name) and spec.name not in ("", ".", "..")
        assert spec.name.strip() == spec.name and "/" not in spec.name and "\\" not in spec.name
        assert spec.name.isascii() and spec.name.isprintable()


def _toml(text: str) -> str:
    """``text`` as a TOML basic string."""
    return json.dumps(text)
