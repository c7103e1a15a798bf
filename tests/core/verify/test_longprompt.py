"""The long prompt's size (pure): the smallest limit read, less the template's headroom, at most
the cap; skipped, and why, when no limit was read or none leaves a longer prompt; and its words."""

from __future__ import annotations

from dataclasses import replace

from servelab.core.verify.checks import Check, CheckCode
from servelab.core.verify.e2e import E2EProbe, RequestTiming
from servelab.core.verify.longprompt import (
    LONG_PROMPT_CAP,
    TEMPLATE_HEADROOM,
    EngineLimit,
    LongProbe,
    LongSkip,
    long_prompt_size,
)
from servelab.report.verify import check_detail

P, D = (
    EngineLimit("prefill", "max_req_input_len", 163_834),
    EngineLimit("decode", "max_req_input_len", 4000),
)
NONE = EngineLimit("decode", "max_model_len", None)


def test_the_size_is_the_smallest_limit_less_the_headroom_at_most_the_cap() -> None:
    assert long_prompt_size([P], 512) == LONG_PROMPT_CAP == 8192
    assert long_prompt_size([P, D], 512) == 4000 - TEMPLATE_HEADROOM
    assert long_prompt_size([NONE, D], 512) == 4000 - TEMPLATE_HEADROOM  # the one read


def test_no_limit_read_or_none_longer_is_a_skip_with_its_reason() -> None:
    assert long_prompt_size([], 512) is LongSkip.NO_LIMIT
    assert long_prompt_size([NONE], 512) is LongSkip.NO_LIMIT
    assert long_prompt_size([EngineLimit("p", "max_model_len", 600)], 540) is LongSkip.NOT_LONGER


def _check(code: CheckCode, long: LongProbe) -> str:
    first = RequestTiming(200, 0.02, 0.09, 16, 530, None)
    probe = E2EProbe.of("m", first, (2,))
    probe = replace(probe, long=long)
    return check_detail(Check("router", code is CheckCode.E2E_PASSED, code, probe))


def test_the_long_prompt_is_worded_sent_skipped_and_failed() -> None:
    sent = LongProbe(8192, (P,), None, 200, 0.16, 0.17, 8188, 16)
    assert not sent.failed
    assert _check(CheckCode.E2E_PASSED, sent).endswith(
        "long prompt 8,188 tokens (capped at 8,192; prefill's max_req_input_len 163,834) "
        "0.17 s, TTFT 0.16 s"
    )
    skipped = LongProbe(None, (NONE,), LongSkip.NO_LIMIT)
    assert not skipped.failed
    assert _check(CheckCode.E2E_PASSED, skipped).endswith(
        "long prompt skipped: no worker said its input limit (decode max_model_len)"
    )
    failed = LongProbe(3936, (P, D), None, 500, None, 0.3, None, 0, "http 500", "transfer failed")
    assert failed.failed
    assert _check(CheckCode.E2E_LONG_FAILED, failed) == (
        "short prompts ok, a long prompt of 3,936 tokens (sized from decode's max_req_input_len "
        "4,000) failed (status 500): HTTP 500: transfer failed; the KV transfer of long prompts "
        "fails (transfer buffers smaller than the longest prompt the engines admit?)"
    )
    # a 4xx is the entry point's refusal (the final run's nginx with a 6 KB body limit: 413)
    refused = LongProbe(8192, (P,), None, 413, None, 0.01, None, 0, "http 413", "Too Large")
    assert _check(CheckCode.E2E_LONG_FAILED, refused).endswith(
        "failed (status 413): HTTP 413: Too Large; the entry point refuses long prompts (a body "
        "limit in a proxy in front?)"
    )
