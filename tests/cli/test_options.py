"""An option two commands share is one option: the same declaration, help, default and parser.

Walks every command through click's own API (as ``tests/test_docs.py`` does) and compares each
flag across the commands that take it. A flag that means something else in one command is a
homonym, listed in :data:`HOMONYMS` with what it means there. A command that needs another
default says why at the end of its help (``Default here: WHY.``), the only difference allowed.
Nothing runs: values are parsed with ``make_context``, and the one end-to-end check per command
fails while parsing, before its body.
"""

from __future__ import annotations

import re
from collections import defaultdict

import click
import pytest
from click.testing import CliRunner

from servelab.cli import cli
from servelab.cli.options import (
    SHARED_OPTIONS,
    LoadOptions,
    WorkloadOptions,
    load_options,
    no_ledger_option,
    workload_options,
)
from servelab.cli.sharedoption import Default
from servelab.core.load.workload import LengthDist
from tests.support import REPO

#: (command, flag) → what the flag means in that command, where it is not the shared option.
#: Commands with the same words share that other meaning (and are compared with each other).
HOMONYMS = {
    ("case test", "--rounds"): "visits per arm of the experiment, not an agent session's rounds",
    ("case test", "--effect"): "a drop in failure rate to exclude, not a throughput change",
    ("case suspect", "--reason"): "why a target is suspected: required, unlike a knob change's",
    ("case bisect", "--rounds"): "most rounds of each probe of a bisection, not a session's",
    ("case bisect", "--effect"): "a drop in failure rate to exclude, not a throughput change",
    ("case bisect", "--resume"): "a flag: go on with the case's unfinished bisection",
    ("case bisect", "--answers"): "whether a threshold test's runs carry probes (gate or off)",
    ("investigate", "--resume"): "a flag: go on with the case's stored investigation",
    ("tune", "--alpha"): "the family-wise error rate of every statement of a tune",
    ("tune", "--knob"): "one knob and the values to try, repeatable for a grid",
    ("tune", "--keep"): "which arm to leave live (best), not the last arm's value",
    ("tune", "--max-rounds"): "most blocks of a tune, each a visit of every arm still running",
    ("tune", "--order"): "a tune's block order (williams or random)",
    ("tune", "--order-seed"): "the seed of a tune's block order",
    ("tune", "--plan"): "what a tune's rule takes, simulated on the recorded noise",
    ("tune", "--resume"): "the id of an interrupted tune",
    ("trace generate", "--sessions"): "agent sessions written into a trace, not run at once",
    ("trace generate", "--requests"): "requests written into a trace, not measured per run",
    ("trace generate", "--rate"): "arrivals per second written into a trace, not sent",
    ("restore", "--force"): "write a knob back over a hand edit, not overwrite an output file",
    ("case revert", "--force"): "write a knob back over a hand edit, not overwrite an output file",
}

#: Lengths whose parameters pass every float or every context (issue 38 H5: an OverflowError).
HUGE_LEN = ("normal:10:1e308", "uniform:1e308:0", "normal:1e300:1e300", "9" * 400)

#: Values each shared option must accept (parsed alike everywhere) and refuse (exit 2, naming it).
PROBES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "--concurrency": (
        ("1", "64,80,96", "4, 8,"),
        ("0", "", ",", "x", "1,-2", "0,4", "1.5", "1,,2", ",4", "4,8,,", "\uff11", "6\u0664"),
    ),
    "--requests": (("1", "256"), ("0", "-1", "x", "1.5", "\uff11\uff10")),
    "--repeat": (("1", "3"), ("0", "-1", "x")),
    "--warmup": (("0", "4"), ("-1", "x", "1.5")),
    "--ramp": (("0", "2.5", "86400"), ("-1", "x", "nan", "inf", "1e308", "86401", "\u0663")),
    "--rate": (
        ("0.5", "100", "1e6", "0.0001"),
        ("0", "-1", "x", "nan", "inf", "1e-308", "1e308", "\u0663", "\uff11.\uff15"),
    ),
    "--deadline": (
        ("0.5", "60", "86400"),
        ("0", "-1", "x", "nan", "inf", "1e308", "86401", "\uff12"),
    ),
    "--idle-timeout": (("0.5", "30"), ("0", "-1", "x", "nan", "inf", "1e308", "\u0663\u0660")),
    "--workers": (("1", "2"), ("0", "x")),
    "--input-len": (
        ("64", "uniform:128:32", "normal:128:16"),
        (
            "uniform:128",
            "zipf:1:2",
            "0",
            "x",
            "uniform:1:x",
            "uniform:128:-1",
            "64:32",
            "\uff16\uff14",
            *HUGE_LEN,
        ),
    ),
    "--output-len": (
        ("64", "uniform:128:32", "normal:128:16"),
        ("uniform:128", "zipf:1:2", "0", "x", "uniform:1:x", "uniform:128:-1", "64:32", *HUGE_LEN),
    ),
    "--seed": (("0", "42", "-1"), ("x", "1.5")),
    "--answers": (("off", "check", "gate"), ("maybe", "")),
    "--runs": (("1", "3"), ("0", "51", "x")),
    "--test": (("soak", "answers"), ()),
    "--endpoint": (("/v1/chat/completions", "/v1/completions"), ("/v1/embeddings", "")),
    "--url": (
        ("http://127.0.0.1:8000", "https://h.example/v1"),
        ("127.0.0.1:8000", "ftp://h", "http://", ""),
    ),
    "--model": (("servelab-sim", "org/model"), ("", " ")),
    "--header": (("Authorization:Bearer x", "X-Tenant: a:b"), ("nocolon", "Host:x", ":v")),
    "--export": (("out", "a/b"), ("",)),
    "--case": (("1", "42"), ("0", "-1", "x")),
    "--sessions": (("1", "4096"), ("0", "4097", "x")),
    "--to": (("256", "a b"), ()),
    "--trace": ((str(REPO / "examples" / "traces" / "agentic.jsonl"),), ("", "no-such-file.jsonl")),
    "--trace-block-size": (("512", "16"), ("0", "x", "1.5")),
    "--speedup": (("1", "0.5", "8"), ("0", "-1", "x", "nan", "inf", "\uff11.\uff15")),
    "--trace-window": (
        ("60:120", ":5min", "30:"),
        ("5", "10:5", "a:b", "-1:3", "nan:1", "\u0663:"),
    ),
    "--slo": (
        ("ttft_p99=2s", "ttft_p99=2s,itl_p99.9=60ms,e2e_p50=1.5min"),
        ("", "ttft=2s", "ttft_p99=2", "ttft_p100=2s", "x_p99=2s", "ttft_p99=1s,ttft_p99=2s"),
    ),
    "--spec": (("servelab.toml",), ()),
    "--ledger": (("l.db",), ()),
    "--alpha": (("0.05", "0.01"), ("x", "0.\u0660\u0665")),
    "--answer-probes": (("0", "3", "24"), ("-1", "25", "x")),
    "--boundary": (("pocock", "lai"), ("x",)),
    "--effect": (("5%", "0.05"), ("x", "100%", "\u0665%")),
    "--gpus": (("1", "8"), ("0", "x")),
    "--margin": (("1%", "0.01"), ("x", "100%", "\uff11%")),
    "--metric": (("throughput", "goodput", "capacity"), ("latency", "")),
    "--probe-s": (("1", "10", "2.5"), ("0.5", "0", "-1", "nan", "inf", "1e308", "x", "")),
    "--proxy": (("http://127.0.0.1:3128", "127.0.0.1:3128"), ("socks5://h:1", "http://", "")),
    "--duration": (("1", "30.5", "604800"), ("0", "x", "1e308", "604801", "\u0663\u0660")),
    "--max-minutes": (
        ("0.5", "10", "10080"),
        ("0", "-1", "x", "nan", "inf", "1e308", "10081", "\uff11\uff10"),
    ),
    "--out": (("report",), ()),
    "--rounds": (("1", "6"), ("0", "x")),
}

#: A command that needs another default says why at the end of the option's help.
_OWN_DEFAULT = " Default here: "


def _leaves(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    """Every runnable command by its path without ``servelab`` (``case test``), through click."""
    ctx = click.Context(group)
    found: dict[str, click.Command] = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            found.update(_leaves(command, f"{path} "))
        elif command is not None:
            found[path] = command
    return found


COMMANDS = _leaves(cli)


def _flag(option: click.Option) -> str:
    """An option by its longest flag (``--spec`` for ``-f/--spec``)."""
    return max(option.opts, key=len)


def _families() -> dict[tuple[str, str], dict[str, click.Option]]:
    """(flag, meaning) → {command: its option}: the declarations that must be alike."""
    families: dict[tuple[str, str], dict[str, click.Option]] = defaultdict(dict)
    for path, command in COMMANDS.items():
        for param in command.params:
            if isinstance(param, click.Option):
                flag = _flag(param)
                families[flag, HOMONYMS.get((path, flag), "")][path] = param
    return {key: uses for key, uses in families.items() if len(uses) > 1}


FAMILIES = _families()
SHARED = sorted(flag for flag, meaning in FAMILIES if not meaning)


def _uses(flag: str) -> dict[str, click.Option]:
    return FAMILIES[flag, ""]


def _split_help(option: click.Option) -> tuple[str, bool]:
    """An option's help without its ``Default here: WHY.`` note, and whether it had one."""
    shared, own, _why = (option.help or "").partition(_OWN_DEFAULT)
    return shared, bool(own)


def _context(path: str, args: list[str]) -> click.Context:
    """``args`` parsed by the command at ``path``, with a placeholder for each other required
    parameter (``case test CASE_ID TARGET``, ``case resolve --root-cause``)."""
    filled = list(args)
    for param in COMMANDS[path].params:
        if isinstance(param, click.Argument) and param.required:
            filled.append("1")
        elif isinstance(param, click.Option) and param.required and _flag(param) not in args:
            filled += [_flag(param), "1"]
    return COMMANDS[path].make_context(path, filled)


def _refused(path: str, args: list[str]) -> click.BadParameter:
    """The error ``args`` raise while ``path`` parses them (a test failure if they pass)."""
    try:
        _context(path, args)
    except click.BadParameter as exc:
        return exc
    pytest.fail(f"{path} accepts {args}")


def test_the_walk_finds_the_shared_options() -> None:
    assert {"--concurrency", "--idle-timeout", "--input-len", "--seed", "--url"} <= set(SHARED)
    assert set(_uses("--idle-timeout")) == {
        "ab",
        "bench",
        "case bisect",
        "investigate",
        "soak",
        "tune",
    }


def test_every_homonym_is_a_flag_of_its_command() -> None:
    """A stale entry (the command lost the flag, or it became the shared option) is refused."""
    for path, flag in HOMONYMS:
        assert any(flag in p.opts for p in COMMANDS[path].params), f"{path} has no {flag}"


@pytest.mark.parametrize("key", sorted(FAMILIES), ids=lambda k: k[0] + ("~" if k[1] else ""))
def test_a_shared_option_is_declared_alike(key: tuple[str, str]) -> None:
    """Same destination, type (parser), flags and help everywhere; a default differs only where
    the command's help says why, and every other command agrees on one."""
    uses = FAMILIES[key]
    shape = {
        path: {k: v for k, v in option.to_info_dict().items() if k not in ("default", "help")}
        for path, option in uses.items()
    }
    assert len({repr(s) for s in shape.values()}) == 1, f"{key[0]} declared differently: {shape}"
    helps = {path: _split_help(option)[0] for path, option in uses.items()}
    assert len(set(helps.values())) == 1, f"{key[0]}'s help differs: {helps}"
    plain = {path: o.default for path, o in uses.items() if not _split_help(o)[1]}
    assert len({repr(d) for d in plain.values()}) <= 1, f"{key[0]}'s default differs: {plain}"


def test_every_shared_option_has_probes() -> None:
    """The simulator's flags mirror the engines' own (``cli/sim.py`` declares them once)."""
    valued = {
        flag
        for flag in SHARED
        if not all(o.is_flag for o in _uses(flag).values())
        and not all(path.startswith("sim ") for path in _uses(flag))
    }
    assert valued <= set(PROBES), f"no probes for {sorted(valued - set(PROBES))}"


def test_every_declared_shared_option_is_probed_and_shared() -> None:
    flags = {option.flag for option in SHARED_OPTIONS}
    assert flags <= set(PROBES), f"no probes for {sorted(flags - set(PROBES))}"
    assert flags <= set(SHARED), f"taken by one command only: {sorted(flags - set(SHARED))}"


PROBED = [flag for flag in PROBES if flag in SHARED]


@pytest.mark.parametrize("flag", PROBED)
def test_a_shared_option_accepts_the_same_values(flag: str) -> None:
    for value in PROBES[flag][0]:
        parsed = {}
        for path, option in _uses(flag).items():
            ctx = _context(path, [flag, value])
            parsed[path] = ctx.params[option.name or ""]
        assert len({repr(v) for v in parsed.values()}) == 1, f"{flag} {value!r}: {parsed}"


@pytest.mark.parametrize("flag", PROBED)
def test_a_shared_option_refuses_the_same_values_naming_itself(flag: str) -> None:
    for value in PROBES[flag][1]:
        for path in _uses(flag):
            refused = _refused(path, [flag, value])
            assert refused.exit_code == 2
            assert f"'{flag}'" in refused.format_message(), (path, value)


@pytest.mark.parametrize("flag", [flag for flag in PROBED if PROBES[flag][1]])
def test_a_refused_value_exits_2_through_the_cli(flag: str) -> None:
    """The whole path: ``servelab COMMAND FLAG BAD`` exits 2 naming the option, runs nothing."""
    bad = PROBES[flag][1][0]
    for path in _uses(flag):
        _refused(path, [flag, bad])  # refused while parsing: the body never runs
        result = CliRunner().invoke(cli, [*path.split(), flag, bad])
        assert result.exit_code == 2, (path, result.output)
        assert f"Invalid value for '{flag}'" in result.stderr, (path, result.stderr)


def _documented() -> dict[str, set[str]]:
    """docs/commands.md's table of shared options: flag → the commands its last column names."""
    text = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    section = text.split("## Shared options", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `--")]
    return {re.findall(r"`(--[\w-]+)", row)[0]: set(re.findall(r"`([\w ]+)`", row.split(" | ")[-1]))
            for row in rows}  # fmt: skip


def test_docs_list_each_shared_option_once_with_the_commands_that_take_it() -> None:
    documented = _documented()
    assert set(documented) == {option.flag for option in SHARED_OPTIONS}
    for flag, commands in documented.items():
        assert commands == set(_uses(flag)), (
            f"docs/commands.md: {flag} is taken by {sorted(_uses(flag))}"
        )


def test_a_group_hands_the_command_one_frozen_dataclass() -> None:
    seen: list[object] = []

    @click.command()
    @load_options(requests=Default("7", "a test's own"))
    @workload_options()
    def probe(load: LoadOptions, workload: WorkloadOptions) -> None:
        seen.extend((load, workload))

    result = CliRunner().invoke(probe, ["--concurrency", "2,4", "--input-len", "uniform:64:8"])
    assert result.exit_code == 0, result.output
    load, workload = seen
    assert isinstance(load, LoadOptions) and isinstance(workload, WorkloadOptions)
    assert (load.concurrencies, load.requests, load.idle_timeout_s) == ((2, 4), 7, 60.0)
    assert workload.input_len == LengthDist("uniform", 64.0, 8.0)
    assert "Default here: a test's own." in probe.get_help(click.Context(probe))


def test_a_default_for_an_option_the_group_lacks_is_refused() -> None:
    with pytest.raises(TypeError, match="LoadOptions has no option"):
        load_options(concurrency=Default("1", "not the field's name: concurrencies"))


def test_one_spelling_for_not_recording_in_the_ledger() -> None:
    """Defect 25 (issue 38): ``bench --no-ledger`` but ``soak --no-record``. Every command that
    can leave the ledger alone spells it ``--no-ledger`` (declared once, the same help); the old
    spelling is a hidden alias that still works and says it is deprecated."""
    assert set(_uses("--no-ledger")) == {"bench", "soak"}
    for path, command in COMMANDS.items():
        for param in command.params:
            if isinstance(param, click.Option) and "--no-record" in param.opts:
                assert param.hidden and param.deprecated, path
    seen: list[bool] = []

    @click.command()
    @no_ledger_option
    def probe(no_ledger: bool) -> None:
        seen.append(no_ledger)

    for args, expected in (([], False), (["--no-ledger"], True), (["--no-record"], True)):
        result = CliRunner().invoke(probe, args)
        assert result.exit_code == 0, result.output
        assert seen.pop() is expected
        assert ("deprecated" in result.output) is (args == ["--no-record"]), result.output
    assert "--no-record" not in probe.get_help(click.Context(probe))
