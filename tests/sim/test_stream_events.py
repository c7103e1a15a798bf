"""The decode's fast paths give what the general ones give: a stream's start, finish and usage
events, rendered as bytes around the envelope's head (``servelab.sim.tokenevent``), are the very
bytes of ``sse(envelope(...))`` for every API, model name, id, index, finish reason and usage
report; the prompt's token count (``count_tokens``' word-and-mark shortcut) is the tokenizer's."""

from __future__ import annotations

import itertools
import random
from typing import Any

from servelab.sim.limits import CachedTokens
from servelab.sim.protocol import (
    Api,
    GenItem,
    GenRequest,
    envelope,
    generate_meta,
    openai_usage,
    sse,
)
from servelab.sim.text import Output, count_tokens, tokenize
from servelab.sim.tokenevent import stream_finish, stream_start, stream_usage

APIS: tuple[Api, ...] = ("chat", "completions", "generate")
MODELS = ("simulated", 'a "quoted" \\ model', "modèle-δ-模型", "tab\there\n", "\ud800lone")
RIDS = ("0123456789abcdef0123456789abcdef", "chatcmpl-1", 'id"with\\quote', "é")
FINISHES = ("length", "stop", "tool_calls", None)


def _start(req: GenRequest, item: GenItem, rid: str, created: int) -> bytes:
    if req.api != "chat":
        return b""
    choice = {"index": item.index, "delta": {"role": "assistant", "content": ""}}
    choice["finish_reason"] = None
    return sse(envelope(req, rid, created, [choice]))


def _finish(req: GenRequest, item: GenItem, out: Output, n: int, rid: str, created: int) -> bytes:
    if req.api == "generate":
        text = "".join(out.pieces[:n])
        meta = generate_meta(item, rid, n, out.finish_reason)
        return sse({"text": text, "meta_info": meta, "index": item.index})
    key = "delta" if req.api == "chat" else "text"
    choice: dict[str, Any] = {"index": item.index, key: {} if key == "delta" else ""}
    choice["finish_reason"] = out.finish_reason
    return sse(envelope(req, rid, created, [choice]))


def _usage(
    req: GenRequest, n_outs: list[int], rid: str, created: int, cached: int, report: CachedTokens
) -> bytes:
    if req.api == "generate" or not req.include_usage:
        return b""
    data = envelope(req, rid, created, [])
    data["usage"] = openai_usage(req, n_outs, cached, report)
    return sse(data)


def _request(api: Api, model: str, usage: bool, n: int) -> GenRequest:
    items = tuple(GenItem(i, "p", 7 + i, 64) for i in range(n))
    return GenRequest(api, model, True, usage, None, (), items, False)


def test_start_and_finish_are_the_general_paths_bytes() -> None:
    out_pieces = ("Hello", " world", ".")
    for api, model, rid in itertools.product(APIS, MODELS, RIDS):
        req = _request(api, model, True, 3)
        for item, created, finish in itertools.product(req.items, (0, 1765000000), FINISHES):
            out = Output(out_pieces, finish_reason=finish)  # type: ignore[arg-type]
            assert stream_start(req, item, rid, created) == _start(req, item, rid, created)
            for n in (0, 2, 3):
                got = stream_finish(req, item, out, n, rid, created)
                assert got == _finish(req, item, out, n, rid, created), (api, model, n)


def test_usage_is_the_general_paths_bytes() -> None:
    for api, model, usage, n in itertools.product(APIS, MODELS, (True, False), (1, 3)):
        req = _request(api, model, usage, n)
        for report, cached, rid in itertools.product(CachedTokens, (0, 5), RIDS):
            n_outs = [64 - i for i in range(n)]
            got = stream_usage(req, n_outs, rid, 17, cached=cached, report=report)
            assert got == _usage(req, n_outs, rid, 17, cached, report), (api, report, cached)


#: characters of every class the tokenizer tells apart: word (ASCII, accented, CJK, digits of other
#: scripts, the underscore), marks (ASCII, Unicode), whitespace (ASCII, Unicode), a lone surrogate
_CHARS = "ab9Zé漢٣_" + ",.!?'-\"()«»—…" + " \t\n\u00a0\u3000" + "\ud800"


def test_the_token_count_is_the_tokenizers_for_any_text() -> None:
    rng = random.Random(34)
    texts = ["", " ", "a,", ",", ",a", "_,", "a_,", "é,", "漢。", "a,,", "word.\u00a0next!"]
    for _ in range(20000):
        texts.append("".join(rng.choice(_CHARS) for _ in range(rng.randint(1, 12))))
    words = ("alpha", "beta,", "gamma.", "x_y;", "«quoted»", "3.14", "naïve,")
    texts += [" ".join(rng.choice(words) for _ in range(40)) for _ in range(200)]
    for text in texts:
        assert count_tokens(text) == len(tokenize(text)), repr(text)
