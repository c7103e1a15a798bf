"""``knob set``'s text: the restart it asks for is a command a newcomer can paste, naming the spec
it was given (issue: "after `servelab restart decode`" acted on the embedded default)."""

from __future__ import annotations

from dataclasses import replace

from servelab.core.knobs.contract import KnobChange
from servelab.report.knob import render_knob_change

K = "SGLANG_SM120_MMA_TARGET_CTAS"


def _change() -> KnobChange:
    return KnobChange("decode", K, "512", "256", True, "/b", "/e", True, True, "512", None, 4)


def test_the_restart_it_asks_for_names_the_spec() -> None:
    text = render_knob_change(_change(), ("-f", "pd dir/servelab.toml"))
    assert (
        "the new value becomes live after `servelab restart decode -f 'pd dir/servelab.toml'`"
        in (text)
    )
    assert "after `servelab restart decode`" in render_knob_change(_change())  # embedded default


def test_a_running_service_is_never_said_not_running() -> None:
    """A change to a running service says what it runs, never "is not running" (a regression the
    unread warning's branch brought: every change without the warning said "not running")."""
    restart = render_knob_change(_change())
    assert "restart needed: decode runs with" in restart and "not running" not in restart
    same = replace(_change(), restart_needed=False, live="256")
    assert "already runs with this value" in render_knob_change(same)
    assert "not running" not in render_knob_change(same)
    stopped = replace(_change(), restart_needed=False, running=False, live=None)
    assert "decode is not running: the value is used at its next start" in (
        render_knob_change(stopped)
    )


def test_a_reader_not_read_back_is_never_said_to_run_unset() -> None:
    """Another reader of the file whose value was not read back (a router hides it, a host
    error) is said so; one read unset is still said "(unset)"."""
    change = replace(_change(), shared=(("router", None), ("decode2", None)),
                     shared_unread=("router",))  # fmt: skip
    text = render_knob_change(change)
    assert f"  router reads the same file and its {K} not read back: `servelab restart " in text
    assert "  decode2 reads the same file and runs with (unset): " in text
    assert "router reads the same file and runs with" not in text
