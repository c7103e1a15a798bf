"""A stopped command's put-back in words (:mod:`servelab.report.putback`): every part of a
:class:`~servelab.core.deploy.putback.PutBack` that is not as found is named, with its fix."""

from __future__ import annotations

from dataclasses import replace

from servelab.core.case.record import PutBackEvent
from servelab.core.deploy.putback import KnobBack, PutBack, StillLive
from servelab.core.ledger.codec import decode, encode
from servelab.report.putback import (
    after_failure,
    describe_put_back,
    render_left_down,
    render_put_back,
)

KNOB = KnobBack("decode", "SGLANG_SM120_MMA_TARGET_CTAS", "512")
FLAG = KnobBack("decode", "--disable-radix-cache", None)


def test_as_found_says_what_it_did_or_that_nothing_had_changed() -> None:
    done = PutBack(written=(KNOB,), restarted=("decode", "router"))
    assert done.ok and render_put_back(done) == (
        "stopped; the deployment is as this command found it (wrote back decode "
        "SGLANG_SM120_MMA_TARGET_CTAS=512; co-restarted decode, router)\n"
    )
    assert "(nothing had changed)" in render_put_back(PutBack())


def test_what_is_not_as_found_is_named_with_the_command_that_fixes_it() -> None:
    fix = ("servelab", "knob", "set", "-f", "s.toml", "decode", "--unset", FLAG.knob)
    left = PutBack(
        written=(KNOB,), down=("decode", "router"), recovery=("servelab", "up", "-f", "s.toml"),
        not_written=(FLAG,), fixes=(fix,), interrupted=True,
    )  # fmt: skip
    text = render_put_back(left)
    assert not left.ok
    assert "NOT as this command found it (a second signal stopped putting it back)" in text
    assert "written back: decode SGLANG_SM120_MMA_TARGET_CTAS=512" in text
    assert f"decode {FLAG.knob} is not back at unset in its file; put it back with: " in text
    assert "servelab knob set -f s.toml decode --unset --disable-radix-cache" in text
    assert "down: decode, router; bring them back with: servelab up -f s.toml" in text
    doc = encode(left)
    assert doc["recovery"] == "servelab up -f s.toml" and doc["ok"] is False
    assert doc["fixes"] == ["servelab knob set -f s.toml decode --unset --disable-radix-cache"]


def test_a_knob_not_written_back_is_followed_by_the_restart_that_runs_it() -> None:
    """A file left at an arm's value whose service runs it: the ``knob set`` first, then the
    restart (never the restart alone, which would apply the arm's value)."""
    fix = ("servelab", "knob", "set", "-f", "s.toml", "decode", f"{KNOB.knob}=512")
    restart = ("servelab", "restart", "-f", "s.toml", "decode")
    left = PutBack(recovery=restart, not_written=(KNOB,), fixes=(fix,), interrupted=True)
    lines = render_put_back(left).splitlines()
    assert lines[1] == (f"  decode {KNOB.knob} is not back at 512 in its file; put it back with: "
                        f"servelab knob set -f s.toml decode {KNOB.knob}=512")  # fmt: skip
    assert lines[2] == "  then run the value found with: servelab restart -f s.toml decode"
    still = StillLive("router", "--policy", "random", "round_robin")
    other = render_put_back(replace(left, still_live=(still,)))
    assert other.splitlines()[-1] == "  then put back with: servelab restart -f s.toml decode"
    assert "router: still running --policy=random (file: round_robin)" in other
    assert render_put_back(replace(left, recovery=())).count("\n") == 2  # nothing to restart


def test_a_failed_put_back_says_why() -> None:
    failed = PutBack(down=("router",), recovery=("servelab", "up"), error="router did not start")
    assert "(putting it back failed: router did not start)" in render_put_back(failed)


def test_a_service_still_running_another_value_is_named_with_both_values_and_the_restart() -> None:
    still = StillLive("decode", KNOB.knob, "1024", "512")
    fix = ("servelab", "restart", "-f", "s.toml", "decode")
    left = PutBack(down=("router",), recovery=fix, interrupted=True, still_live=(still,))
    text = render_put_back(left)
    assert not left.ok
    assert "  decode: still running SGLANG_SM120_MMA_TARGET_CTAS=1024 (file: 512)\n" in text
    assert "  router: down\n  put back with: servelab restart -f s.toml decode\n" in text
    assert "down: router;" not in text  # the restart brings it back: no second command
    assert after_failure(replace(left, interrupted=False, error="x")).endswith(
        "decode: still running SGLANG_SM120_MMA_TARGET_CTAS=1024 (file: 512); router: down; "
        "put back with: servelab restart -f s.toml decode"
    )
    doc = encode(left)
    assert doc["still_live"] == [{"service": "decode", "knob": KNOB.knob, "live": "1024",
                                  "file": "512", "read": True}]  # fmt: skip
    assert doc["recovery"] == "servelab restart -f s.toml decode" and doc["ok"] is False
    secret = encode(replace(left, still_live=(StillLive("decode", "HF_TOKEN", "hf_x1", None),)))
    assert secret["still_live"][0]["live"] == "***"


def test_a_value_not_read_back_is_never_said_to_be_running() -> None:
    """22nd pass: a router (its command line written over, its policy not reported yet) was said
    "router: still running --policy=unset", a value nobody read."""
    unread = StillLive("router", "--policy", None, "round_robin", read=False)
    fix = ("servelab", "restart", "-f", "s.toml", "router")
    left = PutBack(recovery=fix, interrupted=True, still_live=(unread,))
    for text in (render_put_back(left), after_failure(replace(left, interrupted=False, error="x"))):
        assert (
            "router: --policy not read back (its process hides it and has not reported it " in text
        )
        assert "not known to be as its file (file: round_robin)" in text
        assert "still running" not in text and "unset" not in text, text
        assert "put back with: servelab restart -f s.toml router" in text
    assert encode(left)["still_live"][0] == {"service": "router", "knob": "--policy", "live": None,
                                             "file": "round_robin", "read": False}  # fmt: skip


def test_a_failures_put_back_a_signal_came_during_says_the_failure_first() -> None:
    done = PutBack(written=(KNOB,), restarted=("decode",), failure="restart for arm 256 failed")
    lines = render_put_back(done).splitlines()
    assert lines[0] == "failed: restart for arm 256 failed"
    assert lines[1].startswith("stopped; the deployment is as this command found it")
    assert encode(done)["failure"] == "restart for arm 256 failed"
    assert "failed:" not in render_put_back(PutBack())


def test_a_case_put_back_event_says_what_was_put_back_and_whether_it_is_verified() -> None:
    done = PutBackEvent("revert", (KNOB,), ("decode", "router"), (), True, True)
    stored = decode(PutBackEvent, encode(done))  # as the case's timeline reads it back
    assert describe_put_back(stored) == (
        "revert failed; put back as found (wrote back decode SGLANG_SM120_MMA_TARGET_CTAS=512; "
        "co-restarted decode, router): verified live"
    )
    left = PutBackEvent(
        "restore", (), ("decode",), ("router",), False, False, "router did not start"
    )
    assert describe_put_back(left) == (
        "restore failed; NOT put back as found (router did not start; co-restarted decode)"
        "; down: router"
    )
    unproven = PutBack(written=(KNOB,))
    assert after_failure(unproven).endswith("NOT verified: a knob's live value or a service's "
                                            "readiness was not as found")  # fmt: skip


def test_a_stop_no_put_back_said_names_what_is_down_and_the_command() -> None:
    text = render_left_down(["decode", "router"], ["servelab", "up", "-f", "my spec.toml"])
    assert text == ("stopped before the deployment was put back; down: decode, router; "
                    "bring them back with: servelab up -f 'my spec.toml'\n")  # fmt: skip
