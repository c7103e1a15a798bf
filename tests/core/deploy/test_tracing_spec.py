"""``[tracing]`` in the spec, the trace switches the argv builders add, the request identity, and
the record's compact form with its identity (and without: blobs written before it)."""

from __future__ import annotations

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_SPEC_TOML
from servelab.core.deploy.spec import DEFAULT_OTLP_ENDPOINT, parse_spec
from servelab.core.deploy.topology import router_argv, sim_argv
from servelab.core.ledger.codec import encode
from servelab.core.load.identity import request_identity
from servelab.core.load.records import RequestRecord
from servelab.core.telemetry.traces import ClockAnchor, join_records
from servelab.errors import SpecError
from servelab.io.ledger.packed import pack_record, unpack_record


def _spec(extra: str, engine: str = "sglang"):  # type: ignore[no-untyped-def]
    default = (
        DEFAULT_SPEC_TOML if engine == "sglang" else DEFAULT_SPEC_TOML.replace('kind = "smg", ', "")
    )
    return parse_spec(f'engine = "{engine}"\n' + default + extra, source="t.toml")


def test_an_empty_tracing_table_means_loopback_4317() -> None:
    spec = _spec("\n[tracing]\n")
    assert spec.tracing is not None and spec.tracing.endpoint == DEFAULT_OTLP_ENDPOINT
    assert (spec.tracing.host, spec.tracing.port) == ("127.0.0.1", 4317)
    assert _spec("").tracing is None


@pytest.mark.parametrize(
    "bad", ["http://127.0.0.1:4317", "127.0.0.1", "host:0", ":4317", "[::1:4317", "::1:4317",
            "[zz]:4317", "a b:4317", "h:99999", "u:sk-secret@h:4317"],
)  # fmt: skip
def test_a_bad_endpoint_names_the_file_and_the_field(bad: str) -> None:
    with pytest.raises(SpecError) as err:
        _spec(f'\n[tracing]\nendpoint = "{bad}"\n')
    assert "t.toml" in str(err.value) and "tracing.endpoint" in str(err.value)
    assert "sk-secret" not in str(err.value)


def test_an_ipv6_endpoint_in_brackets_is_taken() -> None:
    spec = _spec('\n[tracing]\nendpoint = "[::1]:4317"\n')
    assert spec.tracing is not None and (spec.tracing.host, spec.tracing.port) == ("::1", 4317)


def test_engines_get_their_trace_switches_and_the_router_keeps_the_clients_trace() -> None:
    spec = _spec('\n[tracing]\nendpoint = "127.0.0.1:5555"\n')
    trace = ["--enable-trace", "--otlp-traces-endpoint", "127.0.0.1:5555"]
    assert " ".join(trace) in " ".join(sim_argv(spec, "decode", "py"))
    # sglang-router 0.3.2 tracing itself would replace each request's traceparent with its own
    # and export its span for only some requests: servelab leaves its tracing off
    assert "--enable-trace" not in router_argv(spec, "router", "py")
    plain = _spec("")
    assert "--enable-trace" not in router_argv(plain, "router", "py")
    assert "--otlp-traces-endpoint" not in sim_argv(plain, "prefill", "py")


def test_vllm_engines_get_their_flag_and_vllm_router_none() -> None:
    spec = _spec("\n[tracing]\n", engine="vllm")
    argv = sim_argv(spec, "decode", "py")
    assert argv[argv.index("--otlp-traces-endpoint") + 1] == DEFAULT_OTLP_ENDPOINT
    assert "--enable-trace" not in argv
    assert "--otlp-traces-endpoint" not in router_argv(spec, "router", "py")


def test_request_identity_is_unique_and_a_valid_traceparent() -> None:
    rid, tp = request_identity("0123456789abcdef", 7)
    assert rid == "servelab-0123456789abcdef-7"
    version, trace, span, flags = tp.split("-")
    assert (version, flags) == ("00", "01") and len(trace) == 32 and len(span) == 16
    assert trace == "0123456789abcdef" + "0" * 15 + "7" and int(span, 16) == 8
    assert request_identity("0123456789abcdef", 8)[1] != tp


def test_the_compact_form_keeps_the_identity_and_reads_old_blobs() -> None:
    record = RequestRecord(3, 1000, sent_ns=1100, end_ns=2000, status=200,
                           event_ns=[1500, 1600], event_tokens=[1, 2])  # fmt: skip
    old = pack_record(encode(record))
    assert old is not None and unpack_record(old) == encode(record)
    record.request_id, record.traceparent = request_identity("00000000000000aa", 3)
    blob = pack_record(encode(record))
    assert blob is not None and blob.startswith(old)  # added at the end, nothing else moved
    assert unpack_record(blob) == encode(record)


def test_a_request_without_spans_is_untraced_and_one_without_an_id_is_not_joined() -> None:
    ok = RequestRecord(0, 0, sent_ns=1, end_ns=9, status=200, event_ns=[5], event_tokens=[1])
    ok.request_id = "servelab-x-0"
    anonymous = RequestRecord(1, 0, sent_ns=1, end_ns=9, status=200, event_ns=[5],
                              event_tokens=[1])  # fmt: skip
    got = join_records([ok, anonymous], ClockAnchor(0, 0), [], complete=False)
    assert got.untraced == ("servelab-x-0",) and got.breakdowns == ()
    summary = got.summary
    assert (summary.n_requests, summary.n_traced, summary.n_untraced) == (1, 0, 1)
    assert summary.max_abs_gap_ms is None and summary.phases == {}


def test_a_negative_index_still_gives_a_valid_traceparent() -> None:
    _rid, tp = request_identity("0123456789abcdef", -1)
    _v, trace, span, _f = tp.split("-")
    assert len(trace) == 32 and int(trace, 16) and len(span) == 16 and int(span, 16)
