"""Argument knobs end to end, through the real CLI and the real routers: set in the place the spec
names, co-restarted, and verified at every layer (the file, the process's own command line, the
engine's ``/server_info``).

SGLang behind sglang-router: ``--max-running-requests`` and ``--disable-overlap-schedule`` in the
decode's ``args_env`` variable, ``--chunked-prefill-size`` in its ``--config`` YAML. vLLM behind
vllm-router: ``--max-num-seqs`` in an ``args_env`` variable, ``/server_info`` answered under
``VLLM_SERVER_DEV_MODE=1``.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import REPO, free_ports, run_cli
from tests.support.processes import listening
from tests.support.specs import PdPorts, write_pd_spec

MRR = "--max-running-requests"
CHUNK = "--chunked-prefill-size"
OVERLAP = "--disable-overlap-schedule"
EFFECTIVE = "internal_states[0].effective_max_running_requests_per_dp"


@dataclass(frozen=True)
class Deployment:
    spec: Path
    env: dict[str, str]
    ports: list[int]

    def run(self, *args: str, after: tuple[str, ...] = (), timeout: float = 180) -> Any:
        """``servelab ARGS -f SPEC --json [-- AFTER]``: the JSON it printed (exit 0 or 1)."""
        tail = ("--", *after) if after else ()
        done = run_cli(*args, "-f", str(self.spec), "--json", *tail, env=self.env,
                       timeout=timeout)  # fmt: skip
        assert done.returncode in (0, 1), done.stderr
        return json.loads(done.stdout)

    def argument_checks(self, service: str = "decode") -> dict[tuple[str, str], dict[str, Any]]:
        """verify's config and live checks of ``service``'s argument knobs, by (layer, knob)."""
        doc = self.run("verify", "--layer", "config", "--layer", "live")
        return {
            (c["layer"], c["knob"]): c
            for c in doc["checks"]
            if c["service"] == service and str(c.get("knob", "")).startswith("--")
        }


def _down(dep: Deployment) -> None:
    done = run_cli("down", "-f", str(dep.spec), env=dep.env)
    assert done.returncode == 0, done.stderr
    assert not any(listening(port) for port in dep.ports)


@pytest.fixture(scope="module")
def sglang(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("sglang-args")
    ports = PdPorts.free(proxy=False)
    spec = write_pd_spec(root, ports=ports, knobs=(MRR, CHUNK, OVERLAP), knob=None,
                         decode_env="SGLANG_ARGS=--max-running-requests 32\n")  # fmt: skip
    text = spec.read_text().replace(
        'depends_on = ["prefill"]\n',
        'depends_on = ["prefill"]\nargs_env = "SGLANG_ARGS"\nconfig_file = "decode.yaml"\n',
        1,
    )
    spec.write_text(text)
    (root / "decode.yaml").write_text(
        "# the decode's engine settings\nchunked-prefill-size: 2048\n"
    )
    dep = Deployment(spec, {"SERVELAB_LEDGER": str(root / "ledger.db")}, ports.listened())
    try:
        up = dep.run("up", timeout=150)
        assert [s["outcome"] for s in up["steps"]] == ["ok"] * 3, up
        yield dep
    finally:
        _down(dep)


def test_file_argv_and_the_engine_agree_at_the_start(sglang: Deployment) -> None:
    checks = sglang.argument_checks()
    mrr = checks[("live", MRR)]
    assert mrr["code"] == "live.argument_match" and mrr["ok"]
    assert (mrr["file"], mrr["live"], mrr["live_source"]) == ("32", "32", "cmdline")
    assert (mrr["engine_known"], mrr["engine"], mrr["engine_field"]) == (
        True,
        "32",
        MRR[2:].replace("-", "_"),
    )
    assert checks[("config", MRR)]["place"] == "args_env"
    chunk = checks[("live", CHUNK)]
    assert (chunk["file"], chunk["live"], chunk["live_source"], chunk["engine"]) == (
        "2048", "2048", "config", "2048",
    )  # fmt: skip
    assert checks[("config", CHUNK)]["place"] == "config_file"
    overlap = checks[("live", OVERLAP)]
    assert (overlap["file"], overlap["live"], overlap["engine"], overlap["ok"]) == (
        "off", "off", "off", True,
    )  # fmt: skip
    assert checks[("config", OVERLAP)]["place"] is None  # set nowhere: the engine's default


def test_a_set_argument_is_pending_until_the_restart_then_live_at_every_layer(
    sglang: Deployment,
) -> None:
    change = sglang.run("knob", "set", "decode", after=(f"{MRR}=64",))
    assert (change["place"], change["old"], change["new"]) == ("args_env", "32", "64")
    assert change["restart_needed"] and change["live"] == "32"
    pending = sglang.argument_checks()[("live", MRR)]
    assert pending["code"] == "live.argument_differs" and not pending["ok"]
    assert (pending["file"], pending["live"], pending["engine"]) == ("64", "32", "32")

    flag = sglang.run("knob", "set", "decode", after=(f"{OVERLAP}=on",))
    assert flag["place"] == "args_env" and flag["new"] == "on"
    chunk = sglang.run("knob", "set", "decode", after=(f"{CHUNK}=4096",))
    assert chunk["place"] == "config_file"
    assert yaml.safe_load((sglang.spec.parent / "decode.yaml").read_text()) == {
        "chunked-prefill-size": 4096
    }
    restarted = sglang.run("restart", "decode")
    assert restarted["ok"], restarted
    checks = sglang.argument_checks()
    for knob, value, source in ((MRR, "64", "cmdline"), (OVERLAP, "on", "cmdline"),
                                (CHUNK, "4096", "config")):  # fmt: skip
        live = checks[("live", knob)]
        assert live["code"] == "live.argument_match", live
        assert (live["file"], live["live"], live["live_source"], live["engine"]) == (
            value, value, source, value,
        )  # fmt: skip


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """examples/local-vllm.toml on free ports, the decode's arguments in ``VLLM_ARGS``."""
    root = tmp_path_factory.mktemp("vllm-args")
    text = (REPO / "examples" / "local-vllm.toml").read_text()
    ports = free_ports(5)
    for old, new in zip(("32000", "32998", "32002", "32001", "32090"), ports, strict=True):
        text = text.replace(old, str(new))
    text = re.sub(r'state_dir = ".*"', 'state_dir = "state"', text)
    text = text.replace(
        'env_file = "env/vllm-decode.env"\n',
        'env_file = "env/vllm-decode.env"\nargs_env = "VLLM_ARGS"\n',
    )
    text = re.sub(r"knobs = \[(.*?)\]", r'knobs = [\1, "--max-num-seqs"]', text, count=1)
    shutil.copytree(REPO / "examples" / "env", root / "env")
    decode = root / "env" / "vllm-decode.env"
    decode.write_text(decode.read_text().replace("TIME_SCALE=0.25", "TIME_SCALE=0.02")
                      + "VLLM_ARGS=--max_num_seqs 96\n")  # fmt: skip
    spec = root / "servelab.toml"
    spec.write_text(text)
    dep = Deployment(spec, {"SERVELAB_LEDGER": str(root / "ledger.db")}, ports)
    try:
        up = dep.run("up", timeout=150)
        assert [s["outcome"] for s in up["steps"]] == ["ok"] * 3, up
        yield dep
    finally:
        _down(dep)


def test_vllm_max_num_seqs_set_restarted_and_reported_by_the_engine(vllm: Deployment) -> None:
    first = vllm.argument_checks()[("live", "--max-num-seqs")]
    assert (first["file"], first["live"], first["engine"]) == ("96", "96", "96")  # underscores
    assert first["engine_field"] == "vllm_config.scheduler_config.max_num_seqs"
    change = vllm.run("knob", "set", "decode", after=("--max-num-seqs=48",))
    assert change["place"] == "args_env" and change["restart_needed"]
    assert vllm.run("restart", "decode")["ok"]
    live = vllm.argument_checks()[("live", "--max-num-seqs")]
    assert live["code"] == "live.argument_match", live
    assert (live["file"], live["live"], live["engine"]) == ("48", "48", "48")
