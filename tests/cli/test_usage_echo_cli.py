"""A usage error quotes what was typed through the one redaction policy, cut to a bound (issue 38,
third pass, item 7): ``--slo``, ``--fresh-context`` and ``--header`` values holding a token, or
5,000 characters long, were echoed whole in the error. Real processes; nothing listens at
:data:`NOWHERE` (the refusals come before any request)."""

from __future__ import annotations

import pytest

from servelab.core.redaction import LONGEST_QUOTED
from tests.support import run_cli

NOWHERE = "http://127.0.0.1:9"
SECRET = "sk-usage0error0SECRET0abcdef0123"
HUGE = "7" * 5000


@pytest.mark.parametrize(
    "args",
    [("bench", "--slo", f"ttft_p99={SECRET}"), ("bench", "--slo", f"ttft_p99={HUGE}"),
     ("soak", "--fresh-context", SECRET), ("soak", "--fresh-context", HUGE),
     ("bench", "--header", f"X-Up:{SECRET}\x01"), ("bench", "--slo", HUGE, "--json")],
    ids=["slo-secret", "slo-huge", "fresh-secret", "fresh-huge", "header-secret", "slo-json"],
)  # fmt: skip
def test_a_usage_error_never_echoes_a_secret_or_a_huge_value(args: tuple[str, ...]) -> None:
    done = run_cli(*args, "--url", NOWHERE)
    assert done.returncode == 2, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "Invalid value for" in done.stderr
    assert SECRET not in out
    assert "7" * (LONGEST_QUOTED + 1) not in out, f"{len(out)} characters"
    assert len(out) < 2 * LONGEST_QUOTED + 800
    if HUGE in args[2]:
        assert "7" * (LONGEST_QUOTED - 20) in done.stderr and "…" in done.stderr
