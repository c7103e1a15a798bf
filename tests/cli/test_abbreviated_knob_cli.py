"""A knob given by an abbreviation, on the real simulated stack behind the real router: the
engine's argparse (``allow_abbrev``) takes ``max-running: 48`` in the decode's ``--config`` YAML
as ``--max-running-requests 48``, and ``knob get``/``diff`` now say so, as the engine's own
``/server_info`` does; ``knob set`` replaces the abbreviation, so the engine gets one value."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import free_ports, run_cli
from tests.support.processes import listening
from tests.support.specs import PdPorts, write_pd_spec

MRR = "--max-running-requests"
ABBREVIATED = b"# the decode's engine settings\nmax-running: 48\n"
_rng = random.Random()


@dataclass(frozen=True)
class Deployment:
    spec: Path
    yaml: Path
    env: dict[str, str]
    ports: PdPorts

    def json(self, *args: str, after: tuple[str, ...] = (), code: int = 0) -> Any:
        tail = ("--", *after) if after else ()
        done = run_cli(*args, "-f", str(self.spec), "--json", *tail, env=self.env, timeout=180)
        assert done.returncode == code, done.stdout + done.stderr
        return json.loads(done.stdout)


@pytest.fixture(scope="module")
def dep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("abbreviated-knob")
    ports = PdPorts(*free_ports(5, draw=lambda: _rng.randint(21000, 21999)))
    spec = write_pd_spec(root, ports=ports, knobs=(MRR,), knob=None)
    text = spec.read_text().replace(
        'depends_on = ["prefill"]\n', 'depends_on = ["prefill"]\nconfig_file = "decode.yaml"\n', 1
    )
    spec.write_text(text)
    (root / "decode.yaml").write_bytes(ABBREVIATED)
    d = Deployment(spec, root / "decode.yaml", {"SERVELAB_LEDGER": str(root / "ledger.db")}, ports)
    try:
        up = d.json("up")
        assert [s["outcome"] for s in up["steps"]] == ["ok"] * 3, up
        yield d
    finally:
        assert run_cli("down", "-f", str(spec), env=d.env).returncode == 0
        assert not any(listening(port) for port in ports.listened())


def test_an_abbreviated_config_key_reads_as_the_engine_takes_it(dep: Deployment) -> None:
    """Before: ``knob get``/``diff`` read ``max-running: 48`` as nothing (the engine's default),
    while the engine ran with 48 (its ``/server_info`` said so): a wrong verdict."""
    live = dep.json("verify", "--layer", "live")["checks"]
    check = next(c for c in live if c.get("knob") == MRR and c["service"] == "decode")
    assert check["engine"] == "48", check  # what the engine itself reports it took
    got = dep.json("knob", "get", "decode", after=(MRR,))
    assert (got["value"], got["place"]) == ("48", "config_file"), got
    diff = dep.json("knob", "diff", "decode", after=(MRR,))
    assert (diff["file"], diff["live"]) == ("48", "48"), diff
    assert check["code"] == "live.argument_match" and check["ok"], check


def test_set_replaces_the_abbreviation(dep: Deployment) -> None:
    """Before: ``knob set`` added ``max-running-requests: 64`` and left ``max-running: 48``, so
    what the engine took depended on the keys' order."""
    try:
        change = dep.json("knob", "set", "decode", after=(f"{MRR}=64",))
        assert (change["old"], change["new"]) == ("48", "64"), change
        text = dep.yaml.read_text()
        assert "max-running:" not in text and "max-running-requests: 64" in text, text
        assert text.startswith("# the decode's engine settings\n"), text
        diff = dep.json("knob", "diff", "decode", after=(MRR,))
        assert (diff["file"], diff["backup"], diff["live"]) == ("64", "48", "48"), diff
    finally:
        dep.yaml.write_bytes(ABBREVIATED)
