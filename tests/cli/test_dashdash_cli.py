"""The ``--`` rules of ``knob get|set|diff``: a bare flag after ``--`` means ``on``; an option of
the command written after ``--`` is refused, saying options go before ``--`` (nothing is
changed)."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.cli.dashdash import bare_flag_value, misplaced_option
from tests.support import free_port
from tests.support.generic import servelab_in
from tests.support.specs import write_decode_spec


def _workdir(tmp_path: Path) -> Path:
    knobs = ("--max-running-requests", "--disable-overlap-schedule")
    spec = write_decode_spec(tmp_path, free_port(), knobs=knobs,
                             env_text="SGLANG_ARGS=--max-running-requests 64\n")  # fmt: skip
    spec.write_text(spec.read_text() + 'args_env = "SGLANG_ARGS"\n')
    return tmp_path


def test_a_bare_flag_after_double_dash_means_on(tmp_path: Path) -> None:
    root = _workdir(tmp_path)
    code, out, err = servelab_in(root, "knob", "set", "decode", "--json", "--",
                          "--disable-overlap-schedule")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["new"] == "on"
    env = (root / "env" / "decode.env").read_text()
    assert env == 'SGLANG_ARGS="--max-running-requests 64 --disable-overlap-schedule"\n'
    code, out, err = servelab_in(
        root, "knob", "get", "decode", "--json", "--", "--disable-overlap-schedule"
    )
    assert code == 0 and json.loads(out)["value"] == "on", err
    # a bare word that is no flag is still NAME=VALUE's error
    code, _, err = servelab_in(root, "knob", "set", "decode", "SOME_VARIABLE")
    assert code == 2 and "give NAME=VALUE" in err


def test_an_option_after_double_dash_says_options_go_before_it(tmp_path: Path) -> None:
    root = _workdir(tmp_path)
    before = (root / "env" / "decode.env").read_text()
    for args in (("set", "decode", "--", "--max-running-requests=128", "--json"),
                 ("set", "decode", "--", "--max-running-requests=128", "--reason=x"),
                 ("get", "decode", "--", "--max-running-requests", "-f", "other.toml"),
                 ("diff", "decode", "--", "--json")):  # fmt: skip
        code, out, err = servelab_in(root, "knob", *args)
        assert code == 2, (args, out, err)
        assert "options go before `--`" in err, err
        assert "unexpected extra argument" not in err
    assert (root / "env" / "decode.env").read_text() == before  # nothing changed
    # the message shows the command line fixed
    _, _, err = servelab_in(
        root, "knob", "set", "decode", "--", "--max-running-requests=128", "--json"
    )
    assert "decode --json -- --max-running-requests=128" in err


def test_the_rules_as_functions() -> None:
    assert bare_flag_value("--enable-foo") == "on"
    assert bare_flag_value("NAME") is None
    own = ["--json", "--reason", "-f", "--spec"]
    assert misplaced_option(["decode", "--", "--x=1", "--reason=why"], own) == "--reason=why"
    assert misplaced_option(["decode", "--json", "--", "--x=1"], own) is None  # before: fine
    assert misplaced_option(["decode", "--x=1"], own) is None
