"""``knob get``/``diff`` where the engine's flags are not known: a word that may abbreviate the
knob's flag makes the value uncertain, and the output names it (a typed field, words here)."""

from __future__ import annotations

from servelab.core.knobs.contract import KnobDiff, KnobValue
from servelab.core.ledger.codec import encode
from servelab.report.knob import render_knob_diff, render_knob_value

MRR = "--max-running-requests"


def test_knob_get_and_diff_say_the_value_is_uncertain_and_name_the_word() -> None:
    word = (("config_file", "--max-running"),)
    got = KnobValue("decode", MRR, None, None, "", abbreviated=word)
    text = render_knob_value(got)
    assert "uncertain: the config file gives --max-running" in text, text
    assert encode(got)["abbreviated"] == [["config_file", "--max-running"]]
    assert "abbreviated" not in encode(KnobValue("decode", MRR, None, None, ""))
    diff = KnobDiff("decode", MRR, None, None, None, None, None, "", None, "not running",
                    place=None, abbreviated=word)  # fmt: skip
    assert "uncertain: the config file gives --max-running" in render_knob_diff(diff)
