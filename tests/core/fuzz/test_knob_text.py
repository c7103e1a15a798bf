"""The fuzz tier over a knob value's characters and an env file's encoding (issue 38, the eighth
pass): a value with an invisible character anywhere is refused naming its position, whatever the
knob; an env file with a UTF-8 BOM reads as the same file without it and is written back with
it; the same file in UTF-16 is refused, never read as another file."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from servelab.core.engines import SGLANG, VLLM
from servelab.core.knob import parse_knob
from servelab.core.knobs.invisible import OTHER_DEFAULT_IGNORABLE, escape_invisible
from servelab.core.knobs.rules import parse_env_bytes
from servelab.core.knobs.values import check_value
from servelab.errors import KnobError, ServelabError
from tests.core.fuzz.support import mutated, result_or_error, texts, utf8

ENV = 'SGLANG_SM120_MMA_TARGET_CTAS=512\n# note\nSGLANG_ARGS="--max-running-requests 32"\n'
NAMES = ["--max-running-requests", "--disable-overlap-schedule", "--schedule-policy",
         "SGLANG_SM120_MMA_TARGET_CTAS", "--mem-fraction-static"]  # fmt: skip
INVISIBLE = st.sampled_from(
    ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u202a", "\u202e", "\u2066", "\u2069",
     "\u00ad", "\u061c", "\t", "\x1b", "\x7f", "\x85", "\u2028", "\u2029", "\U000e0001",
     "\u3164", "\u115f", "\u1160", "\uffa0", "\u034f", "\u17b4", "\u17b5", "\ufe0f",
     "\ufe00", "\U000e0100", "\u180b", "\u00a0", "\u2007", "\u202f", "\u3000", "\u2800"]
)  # fmt: skip


@given(
    name=st.sampled_from(NAMES),
    value=st.one_of(texts, st.sampled_from(["512", "on", "lpm", "0.8"])),
    char=INVISIBLE,
    at=st.integers(0, 200),
)
def test_an_invisible_character_anywhere_in_a_value_is_refused(
    name: str, value: str, char: str, at: int
) -> None:
    at = min(at, len(value))
    typed = value[:at] + char + value[at:]
    for engine in (SGLANG, VLLM):
        knob = result_or_error(parse_knob, name, engine)
        if isinstance(knob, ServelabError):
            continue
        got = result_or_error(check_value, knob, typed, engine)
        assert isinstance(got, KnobError), repr(typed)


@given(text=mutated(ENV))
def test_a_bom_is_read_past_and_kept_and_utf16_is_refused(text: str) -> None:
    plain = result_or_error(parse_env_bytes, utf8(text), "fuzz.env")
    with_bom = result_or_error(parse_env_bytes, b"\xef\xbb\xbf" + utf8(text), "fuzz.env")
    if isinstance(plain, ServelabError) or text.startswith("\ufeff"):
        return
    assert not isinstance(with_bom, ServelabError), str(with_bom)
    assert with_bom.as_dict() == plain.as_dict()
    assert with_bom.render().encode("utf-8", "surrogatepass").startswith(b"\xef\xbb\xbf")
    for encoding in ("utf-16", "utf-32"):
        refused = result_or_error(
            parse_env_bytes, text.encode(encoding, "surrogatepass"), "fuzz.env"
        )
        assert isinstance(refused, KnobError) and "fuzz.env: the file is UTF-" in str(refused)


#: The categories a terminal does not show as themselves (issue 38, the thirteenth pass: private
#: use, U+F8FF and the planes 15 and 16, passed as visible).
_HIDDEN_CATEGORIES = frozenset({"Cf", "Cc", "Zl", "Zp", "Co", "Cs", "Cn"})


@given(
    char=st.one_of(
        st.characters(),
        st.characters(min_codepoint=0xE000, max_codepoint=0xF8FF),
        st.characters(min_codepoint=0xF0000, max_codepoint=0x10FFFF),
        st.characters(min_codepoint=0xE0000, max_codepoint=0xE0FFF),
        st.sampled_from(["\U0001d159", "\u0f0c", "\u2011", "\u202f", "\u2065", "\ufff0"]),
    ),
    at=st.integers(0, 3),
)
def test_a_character_is_refused_by_its_properties_not_a_list(char: str, at: int) -> None:
    """Any character of a hidden category, any space but the ASCII one, any default ignorable
    code point and any no-break form is refused in a value, wherever it stands; a letter, a
    digit or a punctuation mark of its own (not a no-break form) is taken."""
    category = unicodedata.category(char)
    code = ord(char)
    hidden = (
        category in _HIDDEN_CATEGORIES
        or (category == "Zs" and char != " ")
        or 0xE0000 <= code <= 0xE0FFF  # tags, variation selectors 17-256, reserved: ignorable
        or any(low <= code <= high for low, high in OTHER_DEFAULT_IGNORABLE)
        or unicodedata.decomposition(char).startswith("<noBreak>")
        or char == "\U0001d159"
    )
    value = "512"[:at] + char + "512"[at:]
    knob = parse_knob("SGLANG_X", SGLANG)
    got = result_or_error(check_value, knob, value, SGLANG)
    if hidden:
        assert isinstance(got, KnobError) and f"at position {at + 1}" in str(got), ascii(value)
        assert escape_invisible(value) != value
    elif category[0] in "LP" and not char.isnumeric():
        assert got == value, ascii(value)
