"""Env files in systemd EnvironmentFile syntax: parse, edit, render, diff, redact."""

from __future__ import annotations

import pytest

from servelab.core.knobs import envfile
from servelab.core.knobs.envfile import (
    EnvChange,
    diff,
    parse_envfile,
    parse_environ,
    redact,
    render_value,
    select,
)
from servelab.errors import KnobError

SAMPLE = """\
# decode engine
; another comment style

SERVELAB_SIM_TIME_SCALE=0.25
SGLANG_SM120_MMA_TARGET_CTAS = 512
QUOTED="a b \\"c\\" \\$HOME"
SINGLE='x $y \\n'
TRAIL=value with blanks   \n\
CONT=one\\
two
"""


def test_parse_values_and_comments() -> None:
    env = parse_envfile(SAMPLE, source="decode.env")
    assert env.as_dict() == {
        "SERVELAB_SIM_TIME_SCALE": "0.25",
        "SGLANG_SM120_MMA_TARGET_CTAS": "512",
        "QUOTED": 'a b "c" $HOME',
        "SINGLE": "x $y \\n",
        "TRAIL": "value with blanks",
        "CONT": "onetwo",
    }
    assert env.get("MISSING") is None
    assert "QUOTED" in env


def test_round_trip_is_byte_exact() -> None:
    assert parse_envfile(SAMPLE).render() == SAMPLE
    assert parse_envfile("A=1").render() == "A=1"
    assert parse_envfile("").render() == ""


def test_set_keeps_comments_and_order() -> None:
    env = parse_envfile(SAMPLE).set("SGLANG_SM120_MMA_TARGET_CTAS", "256")
    text = env.render()
    assert "SGLANG_SM120_MMA_TARGET_CTAS=256\n" in text
    assert text.splitlines()[:4] == SAMPLE.splitlines()[:4]
    assert text.index("SERVELAB_SIM_TIME_SCALE") < text.index("SGLANG_SM120")
    assert parse_envfile(text).get("SGLANG_SM120_MMA_TARGET_CTAS") == "256"


def test_set_appends_new_and_last_assignment_wins() -> None:
    env = parse_envfile("A=1\n# keep\nA=2\n")
    assert env.get("A") == "2"
    changed = env.set("A", "3")
    assert changed.render() == "# keep\nA=3\n"
    assert env.set("B", "x y").render() == 'A=1\n# keep\nA=2\nB="x y"\n'
    assert env.unset("A").render() == "# keep\n"


@pytest.mark.parametrize("value", ["plain", "with space", 'q"uote', "dollar$x", "back\\slash", ""])
def test_render_value_round_trips(value: str) -> None:
    assert parse_envfile(f"K={render_value(value)}\n").get("K") == value


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("export A=1\n", "env:1: 'export'"),
        ("A=1\nnot an assignment\n", "env:2: expected NAME=VALUE"),
        ("1A=2\n", "not a valid"),
        ('A="open\n', "unterminated double quote"),
        ("A='open\n", "unterminated single quote"),
    ],
)
def test_bad_lines_name_the_line(text: str, needle: str) -> None:
    with pytest.raises(KnobError) as info:
        parse_envfile(text, source="env")
    assert needle in str(info.value)


def test_set_rejects_bad_names_and_newlines() -> None:
    with pytest.raises(KnobError):
        parse_envfile("").set("BAD-NAME", "1")
    with pytest.raises(KnobError):
        parse_envfile("").set("A", "two\nlines")


def test_diff_and_kinds() -> None:
    old = parse_envfile("A=1\nB=2\n")
    new = parse_envfile("A=1\nB=3\nC=4\n")
    changes = diff(old, new)
    assert changes == [EnvChange("B", "2", "3"), EnvChange("C", None, "4")]
    assert [c.kind for c in changes] == ["changed", "added"]
    assert diff(new, {"A": "1"})[0].kind == "removed"
    assert diff(old, old) == []


def test_parse_environ_and_select() -> None:
    raw = b"PATH=/bin\0KNOB=512\0EMPTY=\0EQ=a=b\0\xff=x\0"
    parsed = parse_environ(raw)
    assert parsed["KNOB"] == "512" and parsed["EMPTY"] == "" and parsed["EQ"] == "a=b"
    assert select(parsed, ["KNOB", "MISSING"]) == {"KNOB": "512"}


def test_redact_hides_secrets_but_reveals_declared() -> None:
    values = {"HF_TOKEN": "hf_abc", "DB_PASSWORD": "pw", "KNOB": "1", "MY_API_KEY": "k"}
    shown = redact(values, reveal=["MY_API_KEY"])
    assert shown == {"HF_TOKEN": "***", "DB_PASSWORD": "***", "KNOB": "1", "MY_API_KEY": "k"}


def test_public_api() -> None:
    for name in envfile.__all__:
        assert hasattr(envfile, name)


def test_a_double_quoted_value_keeps_its_edge_blanks_as_systemd_does() -> None:
    """The sixth hostile pass: ``K="x "`` (what ``knob set K='x '`` writes) read back as ``x``;
    an unquoted value still loses its trailing blanks."""
    from servelab.core.knobs.envfile import parse_envfile, render_value

    for value in ("x ", " y", "a\t", " "):
        assert parse_envfile(f"K={render_value(value)}\n").as_dict() == {"K": value}
    assert parse_envfile("K=x  \nL='z '\n").as_dict() == {"K": "x", "L": "z "}


@pytest.mark.parametrize(
    ("text", "edit", "written"),
    [("A=1\r\nB=2\r\n# c\r\n", ("set", "A", "x"), "A=x\r\nB=2\r\n# c\r\n"),
     ("A=1\r\nB=2\r\n", ("set", "C", "3"), "A=1\r\nB=2\r\nC=3\r\n"),
     ("A=1\r\nB=2", ("set", "C", "3"), "A=1\r\nB=2\r\nC=3"),
     ("A=1\r\nB=2", ("unset", "B", ""), "A=1"),
     ("A=1\nB=2\n", ("set", "C", "3"), "A=1\nB=2\nC=3\n"),
     ("A=1\r\nB=2\n", ("set", "B", "y"), "A=1\r\nB=y\n")],
)  # fmt: skip
def test_an_edit_keeps_the_files_own_line_ends(
    text: str, edit: tuple[str, str, str], written: str
) -> None:
    """Issue 38, defect D: ``knob set`` on a CRLF env file wrote its line with LF alone (a file
    of mixed line ends); the value read is the same without the CR."""
    env = parse_envfile(text)
    assert env.get("A") == "1"
    op, name, value = edit
    edited = env.set(name, value) if op == "set" else env.unset(name)
    assert edited.render() == written
    assert parse_envfile(written).as_dict() == edited.as_dict()
