"""An env file holding bytes that are not UTF-8 (issue 38, the tenth pass, H6): read with each
such byte shown as U+FFFD, and written back with every line not edited byte for byte (before,
``knob set`` of another variable rewrote ``caf\\xe9`` as ``caf\\ufffd``: the user's setting
changed silently)."""

from __future__ import annotations

from servelab.core.knobs.rules import parse_env_bytes

RAW = b'# caf\xe9 comment\nNAME=caf\xe9\nQUOTED="na\xefve x"\nCTAS=256\n'


def test_a_latin1_byte_reads_as_the_replacement_character() -> None:
    env = parse_env_bytes(RAW, "/etc/x.env")
    assert env.get("NAME") == "caf\ufffd"
    assert env.get("QUOTED") == "na\ufffdve x"
    assert env.get("CTAS") == "256"


def test_a_file_with_latin1_bytes_is_written_back_byte_for_byte() -> None:
    env = parse_env_bytes(RAW, "/etc/x.env")
    assert env.encode() == RAW


def test_setting_another_variable_keeps_the_latin1_bytes_of_the_others() -> None:
    env = parse_env_bytes(RAW, "/etc/x.env")
    assert env.set("CTAS", "512").encode() == RAW.replace(b"CTAS=256", b"CTAS=512")
    assert env.set("NEW", "1").encode() == RAW + b"NEW=1\n"
    assert env.unset("CTAS").encode() == RAW.replace(b"CTAS=256\n", b"")


def test_a_value_rewritten_in_part_keeps_its_bytes() -> None:
    raw = b'ARGS="--served-model-name caf\xe9 --max-running-requests 32"\n'
    env = parse_env_bytes(raw, "/etc/x.env")
    exact = env.exact("ARGS")
    assert exact is not None and "\ufffd" not in exact
    again = env.set("ARGS", exact.replace("32", "48")).encode()
    assert b"caf\xe9" in again and b"48" in again
    assert env.exact("MISSING") is None


def test_an_invalid_utf8_sequence_and_a_valid_one_side_by_side() -> None:
    raw = b"A=\xc3\xa9\nB=\xff\xc3\n"
    env = parse_env_bytes(raw, "/x.env")
    assert env.get("A") == "é" and env.get("B") == "\ufffd\ufffd"
    assert env.set("A", "e").encode() == b"A=e\nB=\xff\xc3\n"
