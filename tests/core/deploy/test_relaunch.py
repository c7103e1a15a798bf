"""The one rule of a router's launch settings against its spec's (issue 38, the nineteenth pass's
M4): the command line the spec would launch now, diffed setting by setting with the one the router
was launched with (its pid record's argv)."""

from __future__ import annotations

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_SPEC_TOML
from servelab.core.deploy.relaunch import (
    KIND,
    SettingChange,
    argv_changes,
    argv_settings,
    launched_argv,
    router_changes,
)
from servelab.core.deploy.routers import RouterOptions
from servelab.core.deploy.spec import parse_spec
from servelab.core.deploy.topology import router_argv
from servelab.core.ledger.codec import encode
from servelab.core.redaction import REDACTED, redact_words
from servelab.report.relaunch import SHOWN_CHARS, SHOWN_SETTINGS, changed_settings

SPEC = parse_spec(DEFAULT_SPEC_TOML)
TABLE = '{ kind = "smg", prometheus_port = 29000, health_check_interval_s = 2 }'


def _spec(table: str) -> str:
    assert TABLE in DEFAULT_SPEC_TOML
    return DEFAULT_SPEC_TOML.replace(TABLE, table)


def _launched(text: str = DEFAULT_SPEC_TOML, python: str = "/old/venv/bin/python") -> list[str]:
    """The argv a router was launched with from ``text``, as its pid record keeps it."""
    return redact_words(router_argv(parse_spec(text), "router", python))


def test_a_router_launched_from_the_spec_as_it_is_has_no_change() -> None:
    assert router_changes(SPEC, "router", _launched()) == []


def test_the_python_that_ran_it_is_not_a_setting() -> None:
    assert router_changes(SPEC, "router", _launched(python="/elsewhere/python3.12")) == []


def test_the_nineteenth_pass_edit_names_policy_and_interval_spec_vs_live() -> None:
    edited = parse_spec(_spec(
        '{ kind = "smg", prometheus_port = 29000, health_check_interval_s = 9, '
        'policy = "cache_aware" }'
    ))  # fmt: skip
    assert router_changes(edited, "router", _launched()) == [
        SettingChange("policy", "--policy", "cache_aware", "round_robin"),
        SettingChange("health_check_interval_s", "--health-check-interval-secs", "9", "2"),
    ]
    words = changed_settings(router_changes(edited, "router", _launched()))
    assert words == (
        "policy: spec cache_aware, live round_robin; health_check_interval_s: spec 9, live 2"
    )


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('prefill_policy = "cache_aware"', ("prefill_policy", "cache_aware", None)),
        ("request_timeout_s = 600", ("request_timeout_s", "600", None)),
        ("health_failure_threshold = 3", ("health_failure_threshold", "3", None)),
        ("worker_startup_timeout_s = 120", ("worker_startup_timeout_s", "120", "60")),
        ("prometheus_port = 29001", ("prometheus_port", "29001", "29000")),
        ('extra_args = ["--disable-retries"]', ("--disable-retries", "", None)),
        ('extra_args = ["--max-payload-size", "1024"]', ("--max-payload-size", "1024", None)),
    ],
)
def test_every_router_setting_is_covered(
    table: str, expected: tuple[str, str | None, str | None]
) -> None:
    key = table.partition(" =")[0]
    edited = TABLE.replace("prometheus_port = 29000", table) if key in TABLE else (
        TABLE.replace(" }", f", {table} }}"))  # fmt: skip
    changes = router_changes(parse_spec(_spec(edited)), "router", _launched())
    assert [(c.setting, c.spec, c.live) for c in changes] == [expected]


#: A value of each router table key other than the default spec's (``version`` names the pinned
#: version: it launches nothing else, so it is no setting of the command line).
_OTHER = {
    "kind": '"sglang-router"',
    "policy": '"cache_aware"',
    "prefill_policy": '"cache_aware"',
    "decode_policy": '"power_of_two"',
    "prometheus_port": "29001",
    "worker_startup_timeout_s": "61",
    "health_check_interval_s": "3",
    "request_timeout_s": "7",
    "health_failure_threshold": "4",
    "health_success_threshold": "5",
    "extra_args": '["--disable-retries"]',
}


@pytest.mark.parametrize("key", sorted(set(RouterOptions.model_fields) - {"version"}))
def test_a_change_of_any_key_of_the_router_table_is_seen(key: str) -> None:
    pairs = dict(part.split(" = ") for part in TABLE.strip("{} ").split(", "))
    table = "{ " + ", ".join(f"{k} = {v}" for k, v in (pairs | {key: _OTHER[key]}).items()) + " }"
    changes = router_changes(parse_spec(_spec(table)), "router", _launched())
    assert changes, key
    if key in ("kind", "extra_args"):
        return
    assert key in [c.setting for c in changes]


def test_the_router_kind_its_address_and_its_workers_are_settings_too() -> None:
    sglang = _spec(TABLE.replace('kind = "smg", ', ""))
    changes = router_changes(parse_spec(sglang), "router", _launched())
    assert changes[0] == SettingChange(KIND, KIND, "sglang-router", "smg")
    moved = DEFAULT_SPEC_TOML.replace("127.0.0.1:30001", "127.0.0.1:30011")
    assert [(c.setting, c.spec, c.live) for c in router_changes(parse_spec(moved), "router",
            _launched())] == [("url (port)", "30011", "30001")]  # fmt: skip
    prefill_moved = DEFAULT_SPEC_TOML.replace("bootstrap_port = 8998", "bootstrap_port = 8997")
    assert prefill_moved != DEFAULT_SPEC_TOML
    changes = router_changes(parse_spec(prefill_moved), "router", _launched())
    assert [(c.setting, c.spec, c.live) for c in changes] == [
        ("prefill workers", "http://127.0.0.1:30000 8997", "http://127.0.0.1:30000 8998")
    ]


def test_a_setting_only_the_launched_router_has_is_named() -> None:
    launched = [*_launched(), "--log-level", "debug"]
    assert router_changes(SPEC, "router", launched) == [
        SettingChange("--log-level", "--log-level", None, "debug")
    ]


def test_argv_settings_reads_values_repeats_and_equals() -> None:
    argv = ["/py", "-m", "smg.launch_router", "--prefill", "http://a", "8998", "--prefill",
            "http://b", "none", "--x=1", "--flag", "-v", "--n", "-1"]  # fmt: skip
    assert argv_settings(argv) == {
        KIND: ["smg"],
        "--prefill": ["http://a 8998", "http://b none"],
        "--x": ["1"],
        "--flag": [""],
        "-v": [""],
        "--n": ["-1"],
    }
    assert argv_settings([]) == {} and argv_settings(["/py"]) == {}
    assert argv_settings(["/py", "-m", "other.module"]) == {KIND: ["other.module"]}
    # the order of two flags is not a change; the order of a repeated flag's values is
    assert argv_changes(["/py", "--a", "1", "--b", "2"], ["/py", "--b", "2", "--a", "1"]) == []
    swapped = argv_changes(["/py", "--p", "x", "--p", "y"], ["/py", "--p", "y", "--p", "x"])
    assert swapped == [SettingChange("--p", "--p", "x, y", "y, x")]


def test_an_empty_or_broken_record_argv_is_every_setting_changed_not_a_crash() -> None:
    assert len(router_changes(SPEC, "router", [])) > 5
    assert router_changes(SPEC, "router", ["\x00", "\ufeff--policy", "x" * 100_000])


def test_a_secret_flag_value_is_compared_masked_and_never_shown() -> None:
    text = _spec(TABLE.replace(" }", ', extra_args = ["--api-key", "sk-live-123456"] }'))
    launched = _launched(text)
    assert REDACTED in launched and "sk-live-123456" not in launched  # as the record keeps it
    assert router_changes(parse_spec(text), "router", launched) == []
    other = parse_spec(text.replace("sk-live-123456", "sk-other-654321"))
    assert router_changes(other, "router", launched) == []  # masked on both sides: not seen
    added = router_changes(parse_spec(text), "router", _launched())
    assert added == [SettingChange("--api-key", "--api-key", REDACTED, None)]
    shown = changed_settings(added) + str(encode(added[0]))
    assert "sk-live" not in shown
    shaped = SettingChange(
        "--url", "--url", "http://u:hunter2@h:1/x", "hf_abcdefghijklmnopqrstu0123"
    )
    shown = changed_settings([shaped]) + str(encode(shaped))
    assert "hunter2" not in shown and "hf_abc" not in shown


@pytest.mark.parametrize(
    "stored", [None, [], "python -m smg.launch_router", [1, 2], ["/py", None], {"a": 1}, [["x"]]]
)
def test_a_record_argv_that_is_no_list_of_words_is_unknown(stored: object) -> None:
    assert launched_argv(stored) is None


def test_a_record_argv_of_words_is_read_as_is() -> None:
    words = ["/py", "-m", "smg.launch_router", "\ufeff--policy", "\x00"]
    assert launched_argv(words) == words


def test_the_words_are_bounded() -> None:
    many = [SettingChange(f"--f{i}", f"--f{i}", "v" * 10_000, None) for i in range(50)]
    words = changed_settings(many)
    assert words.count("spec ") == SHOWN_SETTINGS
    assert f"and {50 - SHOWN_SETTINGS} more setting(s)" in words
    assert len(words) < SHOWN_SETTINGS * (2 * SHOWN_CHARS + 40) + 40
    assert changed_settings([SettingChange("x", "x", "\u200b1", "a b ")]) == (
        'x: spec "\\u200b1", live "a b "'
    )
