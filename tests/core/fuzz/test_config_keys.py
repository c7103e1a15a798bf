"""The fuzz tier over a config YAML's keys (issue 38, the thirteenth pass: "a key matched by
prefix"): a key that is the knob's name with anything after it (``max-running-requests-x``,
``max-running-requests2``) or a key the knob's name starts with is another key. It is never read
as the knob's value, never rewritten by an edit of the knob, and an ordinary key that starts
with a secret key's name is not masked as that secret's value unless its own words say secret.
However the knob's key is written (a complex key ``? key``, a flow mapping, quoted, spaced), an
edit either refuses it (a :class:`~servelab.errors.KnobError`) or leaves exactly one key that
reads back as asked (the sixteenth pass: a complex key got a second one)."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from servelab.core.engines import SGLANG, VLLM
from servelab.core.knob import parse_knob
from servelab.core.knobs.argv import knob_value
from servelab.core.knobs.configfile import config_values, edit_config
from servelab.core.redaction import redact
from servelab.errors import KnobError

KNOBS = ["--max-running-requests", "--chunked-prefill-size", "--schedule-policy"]
#: What a longer key adds after the knob's name.
suffixes = st.text(alphabet="abcxyz0123456789-_.", min_size=1, max_size=12).filter(
    lambda s: s.strip("-_") != ""
)


@given(name=st.sampled_from(KNOBS), suffix=suffixes, cut=st.integers(1, 8),
       number=st.integers(1, 10_000))  # fmt: skip
def test_a_longer_or_shorter_key_is_never_the_knob(
    name: str, suffix: str, cut: int, number: int
) -> None:
    key = name[2:]
    others = f"{key}{suffix}: {number}\n{key[:-cut]}: {number + 1}\n"
    for engine in (SGLANG, VLLM):
        knob = parse_knob(name, engine)
        if engine is VLLM and (key + suffix).replace("_", "-") == key:
            continue  # vLLM reads ``_`` as ``-``: the same key
        assert knob_value(config_values(others, engine), knob, engine) is None, others
        edited = edit_config(others, knob, "7", engine)
        assert edited.startswith(others), edited  # the other keys' lines kept as written
        assert knob_value(config_values(edited, engine), knob, engine) == "7"
        both = others + f"{key}: 3\n"
        assert knob_value(config_values(both, engine), knob, engine) == "3"


@given(suffix=st.sampled_from(["-path", "-file", "_dir", "-len", "-count"]),
       value=st.text(alphabet="abcdefgh/._", min_size=6, max_size=20))  # fmt: skip
def test_a_key_that_starts_with_a_secret_s_name_is_judged_by_its_own_words(
    suffix: str, value: str
) -> None:
    """``api-key-path: /etc/k`` is masked by its own word ``key``; ``passes-count: 3`` starts
    with ``pass`` and is not a secret: a key is never judged by a prefix of its name."""
    assert value not in redact(f"api-key{suffix}: {value}")
    assert redact(f"passes{suffix}: {value}") == f"passes{suffix}: {value}"


forms = st.sampled_from(["{k}: {v}\n", "? {k}\n: {v}\n", "?  {k}\n:   {v}\n", "{{{k}: {v}}}\n",
                         "'{k}': {v}\n", '"{k}" : {v}\n', "{k}:\t{v}\n", "? '{k}'\n: {v}\n",
                         "{{a: 1, {k}: {v}}}\n", "{k}: {v}  # kept\n"])  # fmt: skip


@given(name=st.sampled_from(KNOBS), form=forms, before=st.sampled_from(["", "model: m\n", "# c\n"]),
       number=st.integers(1, 10_000))  # fmt: skip
def test_an_edit_of_a_key_in_any_yaml_form_leaves_one_key_or_is_refused(
    name: str, form: str, before: str, number: int
) -> None:
    key = name[2:]
    text = before + form.format(k=key, v=number)
    try:
        config_values(text, SGLANG)
    except KnobError:
        assume(False)  # a flow mapping after a block one: no YAML document to edit
    for engine in (SGLANG, VLLM):
        knob = parse_knob(name, engine)
        try:
            edited = edit_config(text, knob, "7", engine, "decode.yaml")
        except KnobError as refused:
            assert "decode.yaml:" in str(refused) and key in str(refused), str(refused)
            continue
        assert knob_value(config_values(edited, engine), knob, engine) == "7"
        assert edited.count(key) == 1, edited
