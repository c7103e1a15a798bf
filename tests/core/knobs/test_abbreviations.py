"""A flag given by an abbreviation (argparse's ``allow_abbrev``, on in both engines): read and
edited as the engine takes it where the parser's flags are known, named as uncertain where they
are not (issue 38; ``../shared/notes/engine-contracts.md`` §2)."""

from __future__ import annotations

from servelab.core.engines import SGLANG, VLLM
from servelab.core.knob import parse_knob
from servelab.core.knobs.argv import abbreviations, arg_values, expand_arg, knob_value, set_words
from servelab.core.knobs.configfile import config_values, edit_config
from servelab.core.knobs.places import Place, abbreviated_in, file_value

MRR = "--max-running-requests"
FLAGS = frozenset({MRR, "--max-total-tokens", "--mem-fraction-static", "--port", "--port-range"})
KNOB = parse_knob(MRR, SGLANG)


def test_a_unique_prefix_is_the_flag_an_exact_or_ambiguous_one_is_not() -> None:
    assert expand_arg("--max-running", FLAGS) == MRR
    assert expand_arg("--max-r", FLAGS) == MRR
    assert expand_arg("--max", FLAGS) == "--max"  # ambiguous: argparse refuses it
    assert expand_arg("--port", FLAGS) == "--port"  # an exact flag wins over a longer one
    assert expand_arg("--max-running", None) == "--max-running"  # flags not known
    # both engines merge a --config file only when the word is written in full
    assert expand_arg("--conf", FLAGS | {"--config"}) == "--conf"


def test_the_command_line_reads_an_abbreviation_as_its_flag() -> None:
    words = ["sglang", "serve", "--max-running", "48", "--mem-frac=0.8"]
    values = arg_values(words, SGLANG, FLAGS)
    assert values == {MRR: "48", "--mem-fraction-static": "0.8"}
    assert knob_value(values, KNOB, SGLANG) == "48"
    assert knob_value(arg_values(words, SGLANG), KNOB, SGLANG) is None  # without the flags


def test_the_last_one_wins_whichever_form_it_has() -> None:
    words = ["--max-running-requests", "64", "--max-running", "48"]
    assert arg_values(words, SGLANG, FLAGS)[MRR] == "48"
    assert arg_values(list(reversed(["64", MRR, "48", "--max-run"])), SGLANG, FLAGS)[MRR] == "64"


def test_set_replaces_the_abbreviation_and_keeps_every_other_word() -> None:
    words = ["--port", "1", "--max-running", "48", "--mem-frac", "0.8"]
    edited = set_words(words, KNOB, "64", SGLANG, FLAGS)
    assert edited == ["--port", "1", MRR, "64", "--mem-frac", "0.8"]
    assert set_words(["--max-running=48", "--port=1"], KNOB, "64", SGLANG, FLAGS) == [
        f"{MRR}=64",
        "--port=1",
    ]
    assert set_words(["--max-running", "48"], KNOB, None, SGLANG, FLAGS) == []
    # without the flags the word is another argument to this reader: it stays
    assert set_words(["--max-running", "48"], KNOB, "64", SGLANG) == ["--max-running", "48",
                                                                       MRR, "64"]  # fmt: skip


def test_vllm_reads_an_underscored_abbreviation_too() -> None:
    flags = frozenset({"--max-num-seqs", "--max-num-batched-tokens"})
    assert arg_values(["--max_num_s", "8"], VLLM, flags) == {"--max-num-seqs": "8"}


def test_a_config_key_abbreviation_is_the_flag_and_an_edit_replaces_it() -> None:
    text = "# settings\nmax-running: 48  # tuned\nport: 1\n"
    assert config_values(text, SGLANG, flags=FLAGS) == {MRR: "48", "--port": "1"}
    assert MRR not in config_values(text, SGLANG)
    edited = edit_config(text, KNOB, "64", SGLANG, flags=FLAGS)
    assert edited == "# settings\nmax-running-requests: 64  # tuned\nport: 1\n"
    assert edit_config(text, KNOB, None, SGLANG, flags=FLAGS) == "# settings\nport: 1\n"


def test_where_the_flags_are_not_known_the_read_names_the_uncertain_word() -> None:
    sources = {
        Place.ARGS_ENV: arg_values(["--max-run", "48"], SGLANG),
        Place.CONFIG_FILE: config_values("max-running: 32\nport: 1\n", SGLANG),
    }
    assert file_value(sources, KNOB, SGLANG).value is None  # read as written
    assert abbreviated_in(sources, KNOB, SGLANG) == (
        (Place.ARGS_ENV, "--max-run"),
        (Place.CONFIG_FILE, "--max-running"),
    )
    assert abbreviations({MRR: "1", "--max-running-requests-x": "2", "--": ""}, KNOB, SGLANG) == []
