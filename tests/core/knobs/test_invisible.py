"""A knob value holding a character a terminal does not show is refused, naming it and its
position, and a stored one is shown escaped (issue 38, the eighth pass); an env file's UTF-8 BOM
is read past and kept, a UTF-16 or UTF-32 file refused naming the file and the encoding."""

from __future__ import annotations

import pytest

from servelab.core.engines import SGLANG
from servelab.core.knob import parse_knob
from servelab.core.knobs.envfile import parse_envfile
from servelab.core.knobs.invisible import escape_invisible, invisible_at
from servelab.core.knobs.rules import parse_env_bytes
from servelab.core.knobs.values import check_value
from servelab.errors import KnobError
from servelab.report.text import show_value

CTAS = "SGLANG_SM120_MMA_TARGET_CTAS"


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [
        ("--max-running-requests", "5\u200b12", "U+200B ZERO WIDTH SPACE, at position 2"),
        ("--max-running-requests", "\u200b384", "U+200B ZERO WIDTH SPACE, at position 1"),
        (
            "SGLANG_SM120_MMA_TARGET_CTAS",
            "\ufeff512",
            "U+FEFF ZERO WIDTH NO-BREAK SPACE, at position 1",
        ),
        (
            "SGLANG_SM120_MMA_TARGET_CTAS",
            "51\u202e2",
            "U+202E RIGHT-TO-LEFT OVERRIDE, at position 3",
        ),
        (CTAS, "a\u2066b", "U+2066 LEFT-TO-RIGHT ISOLATE, at position 2"),
        (CTAS, "a\tb", "U+0009, at position 2"),
        (CTAS, "ab\x1b[31m", "U+001B, at position 3"),
        ("--disable-overlap-schedule", "on\u200d", "U+200D ZERO WIDTH JOINER, at position 3"),
        (CTAS, "x\u00ady", "U+00AD SOFT HYPHEN, at position 2"),
    ],
)
def test_a_value_with_an_invisible_character_is_refused_naming_its_position(
    name: str, value: str, named: str
) -> None:
    with pytest.raises(KnobError) as caught:
        check_value(parse_knob(name, SGLANG), value, SGLANG)
    assert named in str(caught.value)
    assert escape_invisible(value) in str(caught.value)  # the value shown, escaped


@pytest.mark.parametrize(
    ("char", "named"),
    [
        ("\u3164", "U+3164 HANGUL FILLER"),
        ("\u115f", "U+115F HANGUL CHOSEONG FILLER"),
        ("\u1160", "U+1160 HANGUL JUNGSEONG FILLER"),
        ("\uffa0", "U+FFA0 HALFWIDTH HANGUL FILLER"),
        ("\u034f", "U+034F COMBINING GRAPHEME JOINER"),
        ("\u17b4", "U+17B4 KHMER VOWEL INHERENT AQ"),
        ("\ufe0f", "U+FE0F VARIATION SELECTOR-16"),
        ("\U000e0100", "U+E0100 VARIATION SELECTOR-17"),
        ("\u180b", "U+180B MONGOLIAN FREE VARIATION SELECTOR ONE"),
        ("\u00a0", "U+00A0 NO-BREAK SPACE"),
        ("\u3000", "U+3000 IDEOGRAPHIC SPACE"),
        ("\u2007", "U+2007 FIGURE SPACE"),
        ("\u2800", "U+2800 BRAILLE PATTERN BLANK"),
    ],
)
def test_a_blank_letter_mark_or_space_is_refused_as_invisible(char: str, named: str) -> None:
    """Characters of categories Lo, Mn, Zs and So that draw as nothing (issue 38, the tenth
    pass): each was taken as a visible value before."""
    with pytest.raises(KnobError) as caught:
        check_value(parse_knob(CTAS, SGLANG), f"5{char}12", SGLANG)
    assert f"{named}, at position 2" in str(caught.value)
    assert show_value(f"5{char}12") == '"' + escape_invisible(f"5{char}12") + '"'
    assert escape_invisible(char).startswith("\\u") or escape_invisible(char).startswith("\\U")


def test_visible_values_pass_and_an_invisible_one_is_found() -> None:
    assert check_value(parse_knob("SGLANG_X", SGLANG), "é 😀 a-b", SGLANG) == "é 😀 a-b"
    assert invisible_at("512") is None
    assert invisible_at("5\u200b12") == (2, "\u200b")


def test_a_stored_value_with_an_invisible_character_is_shown_escaped() -> None:
    assert show_value("\u200b384") == '"\\u200b384"'
    assert show_value("5\u200b12") == '"5\\u200b12"'
    assert show_value('a"b\u202e') == '"a\\"b\\u202e"'
    assert show_value("384") == "384" and show_value(" x") == '" x"'


def test_an_env_file_with_a_utf8_bom_is_read_and_written_back_with_it() -> None:
    raw = "\ufeffA=1\nB=2\n".encode()
    env = parse_env_bytes(raw, "/etc/x.env")
    assert env.as_dict() == {"A": "1", "B": "2"} and env.bom
    assert env.set("A", "3").render().encode() == "\ufeffA=3\nB=2\n".encode()
    assert parse_envfile("A=1\n").render() == "A=1\n"  # no BOM: none added
    assert parse_env_bytes(b"\xef\xbb\xbf", "/x.env").render() == "\ufeff"


@pytest.mark.parametrize(
    ("encoding", "named"),
    [
        ("utf-16", "UTF-16LE (byte order mark FF FE)"),
        ("utf-16-be", "UTF-16BE (byte order mark FE FF)"),
        ("utf-32", "UTF-32LE (byte order mark FF FE 00 00)"),
    ],
)
def test_an_env_file_in_utf16_or_utf32_is_refused_naming_the_file_and_the_encoding(
    encoding: str, named: str
) -> None:
    raw = "A=1\n".encode(encoding)
    if encoding == "utf-16-be":
        raw = b"\xfe\xff" + raw
    with pytest.raises(KnobError) as caught:
        parse_env_bytes(raw, "/etc/x.env")
    assert str(caught.value).startswith("/etc/x.env: the file is ") and named in str(caught.value)


@pytest.mark.parametrize(
    ("char", "named"),
    [
        ("\uf8ff", "U+F8FF"),  # private use (Co): Apple's logo on one machine, blank on another
        ("\ue000", "U+E000"),
        ("\U000ffffd", "U+FFFFD"),  # plane 15
        ("\U0010fffd", "U+10FFFD"),  # plane 16
        ("\U0001d159", "U+1D159 MUSICAL SYMBOL NULL NOTEHEAD"),  # a blank reference glyph
        ("\u0f0c", "U+0F0C TIBETAN MARK DELIMITER TSHEG BSTAR, drawn as U+0F0B"),  # <noBreak>
        ("\u2011", "U+2011 NON-BREAKING HYPHEN, drawn as U+2010"),
        ("\u2065", "U+2065"),  # unassigned (Cn), a default ignorable
        ("\U000e0041", "U+E0041 TAG LATIN CAPITAL LETTER A"),
    ],
)
def test_private_use_blank_glyphs_and_no_break_forms_are_refused(char: str, named: str) -> None:
    """Decided by Unicode properties (issue 38, the thirteenth pass): private use (Co), the
    planes 15 and 16, unassigned code points, default ignorables, ``<noBreak>`` forms, blank
    reference glyphs; each was taken as a visible value before."""
    with pytest.raises(KnobError) as caught:
        check_value(parse_knob(CTAS, SGLANG), f"5{char}12", SGLANG)
    assert f"{named}, at position 2" in str(caught.value)
    assert show_value(f"5{char}12") == '"' + escape_invisible(f"5{char}12") + '"'
