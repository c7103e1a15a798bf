"""A config YAML's bytes, bounded before any work: aliases and anchors refused, sizes and depth
capped, UTF-16 and binary files refused, and no error quoting the file's text (issue 38)."""

from __future__ import annotations

import time

import pytest

from servelab.core.engines import SGLANG
from servelab.core.knobs.configfile import config_values
from servelab.core.knobs.configyaml import MAX_CONFIG_BYTES, MAX_DEPTH, load_config
from servelab.errors import KnobError

PLANTED = "sk-PLANTED-7f3Qm9"


def alias_bomb(levels: int = 9, width: int = 9) -> bytes:
    """``levels`` levels of ``width`` aliases each: width**levels nodes once expanded."""
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels):
        refs = ", ".join([f"*l{level - 1}"] * width)
        lines.append(f"l{level}: &l{level} [{refs}]")
    return ("\n".join(lines) + "\n").encode()


def test_an_alias_bomb_is_refused_in_milliseconds() -> None:
    """Defect 6 (issue 38): a 9x9 alias bomb made ``knob get`` reach 4.3 GB and never end."""
    started = time.perf_counter()
    with pytest.raises(KnobError, match=r"decode\.yaml:1: an anchor"):
        config_values(alias_bomb(), SGLANG, "decode.yaml")
    assert time.perf_counter() - started < 0.5
    with pytest.raises(KnobError, match=r"decode\.yaml:2: an alias"):
        load_config(b"a: 1\nb: *a\n", "decode.yaml")


def test_a_utf16_file_is_refused_not_read_as_empty() -> None:
    """Defect 21 (issue 38): a config YAML beginning ``\\xff\\xfe`` was read as empty and passed
    as "engine default"."""
    data = "max-running-requests: 48\n".encode("utf-16")
    assert data.startswith(b"\xff\xfe")
    with pytest.raises(KnobError, match=r"decode\.yaml:1: not UTF-8"):
        config_values(data, SGLANG, "decode.yaml")
    with pytest.raises(KnobError, match=r"decode\.yaml:2: not UTF-8"):
        load_config(b"a: 1\nb: \xc3\x28\n", "decode.yaml")
    with pytest.raises(KnobError, match=r"decode\.yaml:1: a control character"):
        load_config(b"\x7fELF\x02\x01\x01\x00", "decode.yaml")
    assert load_config(b"\xef\xbb\xbfa: 1\n", "decode.yaml") == {"a": 1}  # a UTF-8 BOM is fine


def test_a_malformed_line_is_named_never_quoted() -> None:
    """Defect 5 (issue 38): the YAML error quoted an ``api-key: "sk-...`` line."""
    for text in (
        f'max-running-requests: 32\napi-key: "{PLANTED}\n',
        f"api-key: '{PLANTED}\n",
        f"api-key: {PLANTED}\n\tbad: 1\n",
        f"api-key: [{PLANTED}\n",
        f"!!python/object:{PLANTED} x\n",
        f"api-key: {PLANTED}: 1\n",
    ):
        with pytest.raises(KnobError, match=r"decode\.yaml(:\d+)?: ") as info:
            load_config(text, "decode.yaml")
        assert PLANTED not in str(info.value) and "PLANTED" not in str(info.value), info.value


def test_sizes_and_depth_are_capped() -> None:
    with pytest.raises(KnobError, match="read up to"):
        load_config(b"a: 1\n" + b"#" * MAX_CONFIG_BYTES, "c.yaml")
    with pytest.raises(KnobError, match=r"c\.yaml:1: (nested deeper|not valid YAML)"):
        load_config(b"a: " + b"[" * (MAX_DEPTH + 5) + b"]" * (MAX_DEPTH + 5), "c.yaml")
    deep = b"a: " + b"[" * 100_000
    started = time.perf_counter()
    with pytest.raises(KnobError):
        load_config(deep, "c.yaml")
    assert time.perf_counter() - started < 2.0
