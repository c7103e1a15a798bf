"""The A/B report's server-side table: a client ratio the servers do not share is flagged next
to the verdict, with both values; agreeing ratios are not."""

from __future__ import annotations

from servelab.report.ab import ab_markdown
from tests.report.test_ab import _result, with_servers


def test_a_client_ratio_the_servers_do_not_share_is_flagged_with_both_values() -> None:
    result = with_servers(_result(), 1000.0, 1100.0)
    (flag,) = result.server_disagreements
    assert flag.concurrency == 80 and round(flag.server_ratio, 3) == 1.1
    c80 = next(c for c in result.comparisons if c.concurrency == 80)
    assert flag.client_ratio == c80.ratio
    text = ab_markdown(result)
    assert "| 80 | +10.0% | +1.1% | 1000.0 | 1100.0 | DISAGREE |" in text
    assert (
        f"**client and servers disagree at C80** (verdict: {c80.verdict}): the client's ratio "
        "is +1.1%, the decodes' own counters +10.0%; they differ by 8.1%, more than the 5% "
        "tolerance"
    ) in text


def test_agreeing_ratios_carry_no_flag() -> None:
    result = with_servers(_result(), 1000.0, 1012.0)
    assert result.server_disagreements == ()
    text = ab_markdown(result)
    assert "| 80 | +1.2% | +1.1% | 1000.0 | 1012.0 | agree |" in text
    assert "disagree at" not in text
