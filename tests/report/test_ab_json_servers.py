"""``ab --json`` carries the server cross-check: each concurrency where the client's ratio and
the decodes' own disagree, with both ratios, their difference and the tolerance."""

from __future__ import annotations

import json

from servelab.core.ab.crosscheck import RATIO_TOLERANCE
from servelab.core.ledger.codec import encode
from tests.report.test_ab import _result, with_servers


def test_the_json_carries_each_disagreement_with_both_ratios() -> None:
    result = with_servers(_result(), 1000.0, 1100.0)
    doc = json.loads(json.dumps(encode(result)))
    (flag,) = doc["server_disagreements"]
    c80 = next(c for c in result.comparisons if c.concurrency == 80)
    assert flag["concurrency"] == 80 and round(flag["server_ratio"], 3) == 1.1
    assert flag["client_ratio"] == c80.ratio and flag["tolerance"] == RATIO_TOLERANCE
    assert flag["difference"] == c80.ratio / flag["server_ratio"] - 1.0


def test_agreeing_ratios_give_an_empty_list() -> None:
    result = with_servers(_result(), 1000.0, 1012.0)
    assert encode(result)["server_disagreements"] == []
