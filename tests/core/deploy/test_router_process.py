"""A router told from an engine's worker by its command line (issue 38, seventeenth pass H1):
the titles the real routers write over their argv (seen in ``/proc/PID/cmdline`` of
sglang-router 0.3.2, smg 1.13.0 and vllm-router 0.1.17), their launchers, and what is not one."""

from __future__ import annotations

import pytest

from servelab.core.deploy.routers import router_process

_PAD = [""] * 230  # the title is written over the argv's bytes: NULs follow it


@pytest.mark.parametrize("title", ["sglang::router", "smg::router", "vllm::router"])
def test_a_routers_title_tells_it(title: str) -> None:
    assert router_process([title, *_PAD]) == title
    assert router_process([title]) == title


@pytest.mark.parametrize(
    ("argv", "word"),
    [
        (["/venv/bin/python", "-m", "sglang_router.launch_router", "--port", "1"],
         "sglang_router.launch_router"),
        (["python3", "-X", "dev", "-m", "smg.launch_router"], "smg.launch_router"),
        (["/usr/local/bin/vllm-router", "--vllm-pd-disaggregation"], "vllm-router"),
        (["/opt/bin/smg", "--api-key", "hunter2"], "smg"),
    ],
)  # fmt: skip
def test_a_router_not_yet_titled_is_told_by_its_launcher(argv: list[str], word: str) -> None:
    assert router_process(argv) == word


@pytest.mark.parametrize(
    "argv",
    [
        [],
        [""],
        ["python", "-m", "sglang.launch_server", "--served-model-name", "smg"],
        ["python", "-m", "servelab", "sim", "decode", "--port", "1", "smg::router"],
        ["vllm", "serve", "m", "--api-key", "sglang::router x"],
        ["my router::router with spaces"],
        ["\ufeffpython", "-m", "vllm_router.launch_routerX"],
    ],
)
def test_an_engine_or_anything_else_is_no_router(argv: list[str]) -> None:
    assert router_process(argv) is None
