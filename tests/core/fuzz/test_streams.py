"""The fuzz tier (issue 38), what servers send: Prometheus text and SSE streams, cut anywhere.
A metrics source's bytes give a result or a :class:`~servelab.errors.MetricsError`; an SSE
stream never raises; the redaction policy never raises and leaves no value after a secret flag."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from servelab.core.load.sse import SSEDecoder
from servelab.core.redaction import clip_long, redact
from servelab.core.telemetry.promtext import parse_exposition
from servelab.errors import MetricsError
from tests.core.fuzz.support import mutated, result_or_error, texts

PROM = """# HELP sglang:num_running_reqs running
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",engine_type="unified"} 3
# TYPE x_seconds histogram
x_seconds_bucket{le="0.1"} 1
x_seconds_bucket{le="+Inf"} 2
x_seconds_sum 0.3
x_seconds_count 2
"""
SSE = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\nevent: x\nid: 7\ndata: a\ndata: b\n\n'


@given(text=st.one_of(texts, mutated(PROM)))
def test_prometheus_text(text: str) -> None:
    result_or_error(parse_exposition, text, "fuzz", errors=(MetricsError,))


@given(stream=st.one_of(st.binary(max_size=300), st.just(SSE)), cuts=st.lists(st.integers(0, 300)))
def test_sse_stream_cut_anywhere(stream: bytes, cuts: list[int]) -> None:
    bounds = sorted({0, len(stream), *(c for c in cuts if c <= len(stream))})
    whole, parts = SSEDecoder(), SSEDecoder()
    expected = [e.data for e in whole.feed(stream, 0)]
    pieces = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    got = [e.data for piece in pieces for e in parts.feed(piece, 0)]
    assert got == expected


@given(text=texts, secret=st.from_regex(r"[a-zA-Z0-9][a-zA-Z0-9-]{7,19}", fullmatch=True))
def test_redaction_never_raises_and_hides_flag_values(text: str, secret: str) -> None:
    out = redact(f"{text} --api-key {secret} {text}", [])
    assert f"--api-key {secret}" not in out
    assert redact(text, [text]) is not None


@given(text=texts, head=st.sampled_from(["Bearer ", "x glpat-", "eyJ"]),
       body=st.from_regex(r"[A-Za-z0-9_-]{20,40}", fullmatch=True))  # fmt: skip
def test_redaction_hides_bearer_gitlab_and_jwt_shapes_anywhere(
    text: str, head: str, body: str
) -> None:
    """Issue 38, third pass, item 4: the new shapes, inside any text."""
    token = f"{body}.eyJ{body}.{body}" if head == "eyJ" else body
    out = redact(f"{text} {head}{token} {text}")
    assert f"{head}{token}" not in out


@given(text=texts, limit=st.integers(1, 300))
def test_clip_long_leaves_no_run_over_its_limit(text: str, limit: int) -> None:
    """A usage error's quoted value (item 7): no run of non-blank characters over the limit."""
    out = clip_long(text, limit)
    assert all(len(word.rstrip("…")) <= limit for word in out.split())
