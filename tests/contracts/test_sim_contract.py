"""The simulator against the engines' contracts (``sglang.toml``, ``vllm.toml``), field by field.

Each engine's simulated prefill and decode run as a user's deployment runs them (no
``SERVELAB_SIM_EXTRAS``; SGLang with ``--enable-metrics --enable-trace``, vLLM with
``VLLM_SERVER_DEV_MODE=1`` and ``--otlp-traces-endpoint``) behind the engine's real router, and
every endpoint, metric and span the fixture lists is checked: its status, every key of its body
and the key's type, no key the engine does not have; every metric's type and labels, no metric
the engine does not have; every span's name, parent and attributes. Nothing they answer says
"servelab" but the model name the spec gives."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from servelab.core.ledger.codec import encode
from servelab.core.load.identity import request_identity
from servelab.core.telemetry.promtext import parse_exposition
from servelab.core.telemetry.spans import Span
from servelab.core.telemetry.traces import spans_by_request, traced
from tests.contracts.stacks import MODEL, Pd, SpanSink, fetch, pd_stack, post

HERE = Path(__file__).parent
ENGINES = ("sglang", "vllm")
_TYPES: Mapping[str, tuple[type, ...]] = {
    "str": (str,), "int": (int,), "float": (float,), "number": (int, float), "bool": (bool,),
    "null": (type(None),), "list": (list,), "object": (dict,),
}  # fmt: skip


def contract(engine: str) -> dict[str, Any]:
    with (HERE / f"{engine}.toml").open("rb") as f:
        return tomllib.load(f)


def _typed(value: object, kinds: str) -> bool:
    wanted = tuple(t for kind in kinds.split("|") for t in _TYPES[kind])
    if isinstance(value, bool) and bool not in wanted:
        return False
    return isinstance(value, wanted)


def _keys(doc: Mapping[str, Any], required: Mapping[str, str], allowed: set[str]) -> list[str]:
    """What is wrong with ``doc``: a required key missing or mistyped, a key not allowed."""
    wrong = [f"{k}: missing" for k in required if k not in doc]
    wrong += [
        f"{k}: {doc[k]!r} is not {t}"
        for k, t in required.items()
        if k in doc and not _typed(doc[k], t)
    ]
    wrong += [f"{k}: not the engine's" for k in doc if k not in allowed]
    return wrong


@dataclass
class Deployed:
    """One engine's stack, its spans, and everything it answered (for the grep)."""

    engine: str
    pd: Pd
    sink: SpanSink
    trace: str  # the traced streamed request's trace id
    parent: str  # the span id its traceparent named
    answered: list[str]


def _prompt_body(stream: bool) -> dict[str, Any]:
    prompt = [{"role": "user", "content": "hello world " * 40}]
    return {"model": MODEL, "max_tokens": 4, "stream": stream, "messages": prompt}


@pytest.fixture(scope="module", params=ENGINES)
def deployed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployed]:
    engine = request.param
    with SpanSink() as sink:
        if engine == "sglang":
            args = ["--enable-metrics", "--enable-trace", "--otlp-traces-endpoint", sink.endpoint]
            env: dict[str, str] = {}
        else:
            args, env = ["--otlp-traces-endpoint", sink.endpoint], {"VLLM_SERVER_DEV_MODE": "1"}
        with pd_stack(engine, tmp_path_factory.mktemp(engine), worker_args=args, env=env) as pd:
            answered = []
            for stream in (False, True):  # the first pays the cold start
                rid, traceparent = request_identity("00000000000000c0", int(stream))
                headers = {"x-request-id": rid, "traceparent": traceparent}
                status, body = post(
                    pd.router_url + "/v1/chat/completions", _prompt_body(stream), headers
                )
                assert status == 200, body
                answered.append(body)
            trace, parent = traceparent.split("-")[1:3]
            sink.wait(lambda spans: traced(spans_by_request(spans, [rid])[rid]), 30)
            yield Deployed(engine, pd, sink, trace, parent, answered)


# -- endpoints ------------------------------------------------------------------------------------


def _check_endpoint(d: Deployed, entry: Mapping[str, Any], url: str) -> list[str]:
    status, _, body = fetch(url + entry["path"])
    d.answered.append(body)
    if status not in entry["statuses"] or status != 200:
        return [f"{entry['path']}: HTTP {status}"]
    kind = entry["body"]
    if kind == "empty":
        return [] if body == "" else [f"{entry['path']}: a body {body[:40]!r}"]
    if kind == "prometheus":
        parse_exposition(body, entry["path"])
        return []
    doc = json.loads(body)
    if "alias_of" in entry:  # its keys: the aliased endpoint's (checked below)
        return []
    if kind == "json-list":
        item = entry["item"]
        return [f"{entry['path']}[]: {w}" for one in doc for w in _keys(one, item, set(item))]
    required = dict(entry.get("required", {}))
    allowed = {*required, *entry.get("optional", {})}
    if entry["path"] == "/server_info" and d.engine == "sglang":
        allowed |= set(contract("sglang")["server_args"]["fields"])
        state = entry["internal_state"]
        wrong = [
            f"internal_states[0]: {w}"
            for w in _keys(doc["internal_states"][0], state, set(doc["internal_states"][0]))
        ]
        return wrong + [f"{entry['path']}: {w}" for w in _keys(doc, required, allowed)]
    wrong = [f"{entry['path']}: {w}" for w in _keys(doc, required, allowed)]
    if "item" in entry:
        item, optional = entry["item"], entry.get("item_optional", {})
        wrong += [f"{entry['path']} data[]: {w}" for one in doc["data"]
                  for w in _keys(one, item, {*item, *optional})]  # fmt: skip
    return wrong


def test_every_endpoint_answers_as_the_engine(deployed: Deployed) -> None:
    spec = contract(deployed.engine)
    wrong: list[str] = []
    for entry in spec["endpoint"]:
        if entry.get("method", "GET") != "GET":
            continue
        for url in (deployed.pd.prefill_url, deployed.pd.decode_url):
            wrong += _check_endpoint(deployed, entry, url)
    assert not wrong, wrong
    aliased = [e for e in spec["endpoint"] if "alias_of" in e]
    for entry in aliased:  # the deprecated alias answers the same keys
        same = json.loads(fetch(deployed.pd.decode_url + entry["alias_of"])[2])
        assert set(json.loads(fetch(deployed.pd.decode_url + entry["path"])[2])) == set(same)


def test_a_chat_completion_through_the_router_has_the_engines_keys(deployed: Deployed) -> None:
    entry = next(
        e for e in contract(deployed.engine)["endpoint"] if e["path"] == "/v1/chat/completions"
    )
    doc = json.loads(deployed.answered[0])  # the non-streamed one
    assert not _keys(doc, entry["required"], set(doc)), doc
    assert doc["model"] == MODEL and doc["choices"][0]["message"]["content"]
    events = [line[6:] for line in deployed.answered[1].splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and any(json.loads(e)["choices"] for e in events[:-1])


def test_a_vllm_prefill_leg_answers_the_nixl_params() -> None:
    entry = next(e for e in contract("vllm")["endpoint"] if e["path"] == "/v1/chat/completions")
    assert set(entry["kv_transfer_params"]) == {
        "do_remote_prefill", "do_remote_decode", "remote_engine_id", "remote_request_id",
        "remote_block_ids", "remote_host", "remote_port", "tp_size",
    }  # fmt: skip


def test_log_probabilities_have_the_engines_shape(deployed: Deployed) -> None:
    spec = contract(deployed.engine)["logprobs"]
    body = {**_prompt_body(False), "temperature": 0, "logprobs": True, "top_logprobs": 2}
    status, raw = post(deployed.pd.router_url + "/v1/chat/completions", body)
    assert status == 200, raw
    deployed.answered.append(raw)
    logprobs = json.loads(raw)["choices"][0]["logprobs"]
    assert sorted(logprobs) == sorted(spec["chat"])
    for entry in logprobs["content"]:
        assert sorted(entry) == sorted(spec["chat_entry"])
        assert all(sorted(top) == sorted(spec["chat_top"]) for top in entry["top_logprobs"])
    status, raw = post(deployed.pd.router_url + "/v1/chat/completions", {**body, "stream": True})
    events = [json.loads(line[6:]) for line in raw.splitlines()
              if line.startswith("data: {")]  # fmt: skip
    tokens = [c["logprobs"] for e in events for c in e["choices"] if c.get("logprobs")]
    assert tokens and all(len(lp["content"]) == 1 for lp in tokens)  # each chunk its own token
    completion = {"model": MODEL, "prompt": "hello", "max_tokens": 3, "logprobs": 2}
    status, raw = post(deployed.pd.router_url + "/v1/completions", completion)
    assert status == 200, raw
    assert sorted(json.loads(raw)["choices"][0]["logprobs"]) == sorted(spec["completion"])


# -- metrics ------------------------------------------------------------------------------------


def test_every_metric_is_the_engines_with_its_labels(deployed: Deployed) -> None:
    spec = {m["name"]: m for m in contract(deployed.engine)["metric"]}
    for role, url in (("prefill", deployed.pd.prefill_url), ("decode", deployed.pd.decode_url)):
        status, _, text = fetch(url + "/metrics")
        assert status == 200
        deployed.answered.append(text)
        exp = parse_exposition(text)
        assert set(exp.types) <= set(spec), set(exp.types) - set(spec)  # no invented metric
        for name, m in spec.items():
            if not m.get("sim"):
                continue
            if name not in exp.types:
                assert name == "sglang:cached_tokens_total", (
                    f"{role}: {name} missing"
                )  # once counted
                continue
            assert exp.types[name] == m["type"], (name, exp.types[name])
            for s in exp.samples:
                base = (
                    re.sub(r"_(bucket|sum|count)$", "", s.name)
                    if m["type"] == "histogram"
                    else s.name
                )
                if base != name:
                    continue
                labels = {k for k, _ in s.labels} - {"le"}
                assert labels == set(m["labels"]), (name, labels)
                if "engine_type" in labels:
                    assert s.label("engine_type") == role


# -- spans ----------------------------------------------------------------------------------------


def _mine(d: Deployed) -> list[Span]:
    return [s for s in d.sink.spans() if s.trace_id == d.trace]


def test_every_span_is_the_engines(deployed: Deployed) -> None:
    spans = _mine(deployed)
    deployed.answered += [json.dumps(encode(s)) for s in spans]
    if deployed.engine == "sglang":
        _sglang_spans(deployed, spans)
    else:
        _vllm_spans(deployed, spans)


def _sglang_spans(deployed: Deployed, spans: list[Span]) -> None:
    spec = contract("sglang")
    root, thread = (next(s for s in spec["span"] if s["kind"] == k) for k in ("root", "thread"))
    stages = {s["name"]: s for s in spec["stage"]}
    assert spans and {s.service for s in spans} == {spec["tracing"]["service_name"]}
    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if s.parent_id == deployed.parent]
    assert sorted(r.name.split()[0] for r in roots) == ["decode", "prefill"]
    allowed = {**root["attributes"], **root["finish_attributes"]}
    for r in roots:
        assert re.match(root["pattern"], r.name) and r.name.endswith(str(r.attributes["rid"])[:8])
        assert not _keys(r.attributes, root["attributes"], set(allowed)), r.attributes
        assert all(_typed(v, allowed[k]) for k, v in r.attributes.items())
    assert len({r.attributes["bootstrap_room"] for r in roots}) == 1  # one room, both workers
    assert str(roots[0].attributes["bootstrap_room"]).startswith("0x")
    threads = [s for s in spans if s.parent_id in {r.span_id for r in roots}]
    assert len(threads) == 2 and all(re.match(thread["pattern"], t.name) for t in threads)
    assert all(
        not _keys(t.attributes, thread["attributes"], set(thread["attributes"])) for t in threads
    )
    staged = [s for s in spans if s not in roots and s not in threads]
    assert {s.name for s in staged} <= set(stages)
    role_of = {t.span_id: by_id[t.parent_id].name.split()[0] for t in threads}
    for s in staged:
        parent = by_id[s.parent_id]
        wanted = stages[s.name].get("parent")
        assert parent.name == wanted if wanted else parent.span_id in role_of, s
        if not wanted:
            assert stages[s.name]["role"] in ("any", role_of[parent.span_id]), s
    assert {n for n, st in stages.items() if st.get("sim")} == {s.name for s in staged}


def _vllm_spans(deployed: Deployed, spans: list[Span]) -> None:
    spec = contract("vllm")
    shape = spec["span"][0]
    assert [s.name for s in spans] == [shape["name"]] * 2  # the prefill leg's and the decode's
    assert all(s.service.startswith(spec["tracing"]["service_name"]) for s in spans)
    allowed = {**shape["attributes"], **shape["optional_attributes"]}
    for s in spans:
        assert s.parent_id == deployed.parent  # vllm-router forwards the client's traceparent
        # every attribute but the completion-token count, which the simulator does not emit
        required = {k: v for k, v in shape["attributes"].items() if "completion" not in k}
        wrong = _keys(s.attributes, required, set(allowed))
        assert not wrong, wrong
        assert all(_typed(v, allowed[k]) for k, v in s.attributes.items())
        assert str(s.attributes["gen_ai.request.id"]).startswith("chatcmpl-___prefill_addr_")


# -- nothing says servelab -------------------------------------------------------------------------


def test_nothing_answered_says_servelab_but_the_model_name(deployed: Deployed) -> None:
    """Run last in the module: the other tests add what they fetched to ``answered``."""
    for url in (deployed.pd.prefill_url, deployed.pd.decode_url):
        for entry in contract(deployed.engine)["endpoint"]:
            if entry.get("method", "GET") == "GET":
                deployed.answered.append(fetch(url + entry["path"])[2])
    deployed.answered += [json.dumps(encode(s)) for s in deployed.sink.spans()]
    said = [text.replace(MODEL, "") for text in deployed.answered]
    assert not [t for t in said if "servelab" in t.lower()], [
        t[:200] for t in said if "servelab" in t.lower()
    ]
