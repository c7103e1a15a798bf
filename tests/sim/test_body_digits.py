"""``decode_body``'s check for integers orjson may read beyond 64 bits: a byte translation and
two substring searches that find exactly what :data:`_LONG_DIGITS` (the rule, as an expression)
finds (the expression tries a match at each digit of a body)."""

from __future__ import annotations

import json
import random

from servelab.sim.protocol import _LONG_DIGITS, _long_digits, decode_body


def test_the_fast_check_finds_what_the_expression_finds() -> None:
    """Runs of 18 to 21 digits, with and without a minus, at either end, among bytes of every
    kind (a BOM, NUL, 0xff, letters, more minuses)."""
    rng = random.Random(34)
    cases = [b"", b"-", b"0" * 19, b"0" * 20, b"-" + b"9" * 19, b"--" + b"1" * 18, b"9" * 19 + b"-"]
    cases += [b"\xef\xbb\xbf" + b"1" * 20, b"\x00" * 5 + b"-" + b"5" * 19 + b"\xff"]
    alphabet = b"0123456789-- \x00\xff\xb0a"
    for _ in range(20_000):
        run = bytes(rng.choice(b"0123456789") for _ in range(rng.choice((18, 19, 20, 21))))
        noise = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
        cut = rng.randrange(len(noise) + 1)
        cases.append(noise[:cut] + rng.choice((b"", b"-")) + run + noise[cut:])
    for raw in cases:
        assert _long_digits(raw) == (_LONG_DIGITS.search(raw) is not None), raw


def test_a_routed_body_decodes_as_json_decodes_it() -> None:
    """A body as the router forwards it (a 128-word prompt of words with digits in them, a
    19-digit bootstrap room) decodes as ``json`` decodes it. (The check's speed against the
    expression is a benchmark's to show, never a unit test's.)"""
    rng = random.Random(7)
    prompt = " ".join(f"w{rng.randrange(10_000)}" for _ in range(128))
    body = {
        "model": "sim", "messages": [{"role": "user", "content": prompt}], "max_tokens": 64,
        "stream": True, "bootstrap_host": "127.0.0.1", "bootstrap_port": 22345,
        "bootstrap_room": 5234567890123456789,
    }  # fmt: skip
    raw = json.dumps(body).encode()
    assert decode_body(raw) == json.loads(raw)
    assert _long_digits(raw) == (_LONG_DIGITS.search(raw) is not None)
