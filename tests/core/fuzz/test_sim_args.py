"""The fuzz tier over ``servelab sim``'s command line (issue 38, the eighth pass): any value of a
numeric option gives parsed arguments within their bounds, or argparse's usage error (exit 2)
naming the option; never another exception. Any ``--config`` file too (the tenth pass)."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from servelab.sim.argbounds import BOUNDS
from servelab.sim.engineargs import ArgsExit, parse_worker_args
from tests.core.fuzz.support import mutated, texts, utf8

#: The numeric options of an SGLang decode (the vLLM-only and prefill-only ones aside).
_SGLANG_DECODE = sorted(
    d for d in BOUNDS if d not in {"max_num_seqs", "max_num_batched_tokens", "max_model_len",
                                   "gpu_memory_utilization", "block_size", "bootstrap_port"}
)  # fmt: skip
_NUMBERS = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "-inf", "1e400", "0", "-1", "65536", "0x10", "1_000", " 5 "]),
    texts,
)


@given(st.sampled_from(_SGLANG_DECODE), _NUMBERS)
def test_a_numeric_option_is_within_its_bounds_or_a_usage_error(dest: str, value: str) -> None:
    flag = "--" + dest.replace("_", "-")
    argv = ["--port", "31000", f"{flag}={value}"] if dest != "port" else [f"--port={value}"]
    try:
        parsed = parse_worker_args("decode", argv)
    except ArgsExit as exc:
        assert exc.status == 2 and "servelab sim decode: error:" in exc.text
        return
    given_value = parsed.servelab.get(dest, getattr(parsed.server, dest, None))
    assert given_value is not None
    number = float(given_value)
    assert math.isfinite(number) and BOUNDS[dest].allows(given_value)


_CONFIG = "max-running-requests: 32\nschedule-policy: lpm\napi-key: sk-FUZZsecretZ81\n"


@given(text=st.one_of(texts, mutated(_CONFIG), st.sampled_from(["a: &x 1\nb: *x\n", "[" * 40])))
def test_any_config_file_gives_arguments_or_one_usage_error(text: str) -> None:
    """``servelab sim decode --config FILE`` (issue 38, the tenth pass): any file gives parsed
    arguments or argparse's usage error (status 2), one error line that quotes no secret of
    the file (its malformed lines or its ``api-key`` turned into an argument)."""
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "c.yaml"
        config.write_bytes(utf8(text))
        try:
            parse_worker_args("decode", ["--port", "31000", "--config", str(config)])
        except ArgsExit as exc:
            errors = [line for line in exc.text.splitlines() if "error:" in line]
            assert exc.status == 2 and len(errors) == 1, exc.text
            assert "sk-FUZZsecretZ81" not in exc.text, exc.text
