"""A decode with a ``config_file`` YAML, on the real simulated stack behind the real router: the
live value is what the process read, a hostile or malformed YAML is refused (named, never quoted)
by every command before anything stops, and a rollback restores the YAML too (issue 38)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.core.knobs.test_configyaml import alias_bomb
from tests.support import run_cli
from tests.support.processes import listening
from tests.support.specs import PdPorts, write_pd_spec

MRR = "--max-running-requests"
PLANTED = "sk-PLANTED-c0nf1gYaml"
GOOD = b"# the decode's engine settings\nmax-running-requests: 32\n"


@dataclass(frozen=True)
class Deployment:
    spec: Path
    yaml: Path
    env: dict[str, str]
    ports: PdPorts

    def cli(self, *args: str, after: tuple[str, ...] = (), timeout: float = 180) -> Any:
        tail = ("--", *after) if after else ()
        return run_cli(*args, "-f", str(self.spec), *tail, env=self.env, timeout=timeout)

    def json(self, *args: str, after: tuple[str, ...] = (), code: int = 0) -> Any:
        done = self.cli(*args, "--json", after=after)
        assert done.returncode == code, done.stdout + done.stderr
        return json.loads(done.stdout)

    def pid(self, service: str) -> int:
        record = json.loads((self.spec.parent / "state" / "run" / f"{service}.json").read_text())
        return int(record["pid"])


@pytest.fixture(scope="module")
def dep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("config-file")
    ports = PdPorts.free(proxy=False)
    spec = write_pd_spec(root, ports=ports, knobs=(MRR,), knob=None)
    text = spec.read_text().replace(
        'depends_on = ["prefill"]\n', 'depends_on = ["prefill"]\nconfig_file = "decode.yaml"\n', 1
    )
    spec.write_text(text)
    (root / "decode.yaml").write_bytes(GOOD)
    d = Deployment(spec, root / "decode.yaml", {"SERVELAB_LEDGER": str(root / "ledger.db")}, ports)
    try:
        up = d.json("up")
        assert [s["outcome"] for s in up["steps"]] == ["ok"] * 3, up
        yield d
    finally:
        assert d.cli("down").returncode == 0
        assert not any(listening(port) for port in ports.listened())


@pytest.fixture
def restored(dep: Deployment) -> Iterator[Deployment]:
    """The YAML as at the start after the test, whatever the test wrote."""
    try:
        yield dep
    finally:
        dep.yaml.write_bytes(GOOD)


def test_the_live_value_is_what_the_process_read_not_the_yaml_now(restored: Deployment) -> None:
    """Defect 2 (issue 38): after the YAML was edited without a restart, ``knob set`` said
    "already runs with this value; no restart needed", ``knob diff`` said live = file, while the
    engine ran with the old value; ``verify`` named the wrong cause."""
    dep = restored
    dep.yaml.write_bytes(GOOD.replace(b"32", b"48"))  # edited by hand, not restarted
    diff = dep.json("knob", "diff", "decode", after=(MRR,))
    assert (diff["file"], diff["live"]) == ("48", "32"), diff
    change = dep.json("knob", "set", "decode", after=(f"{MRR}=48",))
    assert change["restart_needed"] is True and change["live"] == "32", change
    said = dep.cli("knob", "set", "decode", after=(f"{MRR}=48",))
    assert "already runs" not in said.stdout + said.stderr
    checks = dep.json("verify", "--layer", "config", "--layer", "live", code=1)["checks"]
    live = next(c for c in checks if c["layer"] == "live" and c.get("knob") == MRR)
    assert live["code"] == "live.argument_differs", live
    assert (live["file"], live["live"], live["engine"]) == ("48", "32", "32"), live


def _bad_yamls() -> dict[str, bytes]:
    return {
        "alias bomb": alias_bomb(),
        "utf-16": "max-running-requests: 48\n".encode("utf-16"),
        "malformed": f'max-running-requests: 32\napi-key: "{PLANTED}\nx: [\n'.encode(),
        "binary": b"\x7fELF\x02\x01\x01\x00" + PLANTED.encode(),
    }


@pytest.mark.parametrize("kind", list(_bad_yamls()))
def test_a_bad_yaml_is_refused_named_never_quoted_and_nothing_stops(
    restored: Deployment, kind: str
) -> None:
    """Defects 6, 10, 12, 21 and 5 (issue 38): an alias bomb hung ``knob get``/``set``/``verify``
    (4.3 GB) and made ``restart`` stop decode and router before the engine died; a UTF-16 YAML
    read as empty passed as "engine default"; a malformed YAML made ``verify`` fail with
    "unexpected TypeError: config.error carries EnvFileFailure, not CheckFailure" and its error
    quoted an ``api-key`` line; ``restart`` stopped the services before the engine failed."""
    dep = restored
    dep.yaml.write_bytes(_bad_yamls()[kind])
    pids = {name: dep.pid(name) for name in ("prefill", "decode", "router")}
    outputs: list[str] = []
    commands = [(("knob", "get", "decode"), (MRR,)), (("knob", "diff", "decode"), (MRR,)),
                (("knob", "set", "decode"), (f"{MRR}=64",)), (("restart", "decode"), ()),
                (("restart", "decode", "--json"), ())]  # fmt: skip
    for args, after in commands:
        done: subprocess.CompletedProcess[str] = dep.cli(*args, after=after, timeout=60)
        said = done.stdout + done.stderr
        outputs.append(said)
        assert done.returncode == 2, f"{args}: {said}"
        assert "decode.yaml" in said and "Traceback" not in said, said
        if "--json" not in args:
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    verify = dep.cli("verify", "--json", timeout=60)
    outputs.append(verify.stdout + verify.stderr)
    assert verify.returncode == 1 and "unexpected" not in verify.stderr, verify.stderr
    checks = json.loads(verify.stdout)["checks"]
    failed = [c for c in checks if c["service"] == "decode" and c["code"] == "config.error"]
    assert failed and all(not c["ok"] for c in failed), checks
    assert all("decode.yaml" in c["error"] for c in failed), failed
    for said in outputs:
        assert PLANTED not in said and "PLANTED" not in said, said
    assert {name: dep.pid(name) for name in pids} == pids  # nothing was stopped
    assert all(listening(port) for port in dep.ports.listened())
    assert dep.yaml.read_bytes() == _bad_yamls()[kind]  # nothing written into it


def test_a_rollback_restores_the_config_file_too(restored: Deployment) -> None:
    """Defect 29 (issue 38): ``restart --rollback`` put back env files only; the YAML stayed
    changed after a failed restart."""
    dep = restored
    change = dep.json("knob", "set", "decode", after=(f"{MRR}=48",))
    assert change["place"] == "config_file" and change["new"] == "48", change
    # then a hand edit the engine refuses (knob set itself refuses a count under 1)
    dep.yaml.write_text(dep.yaml.read_text().replace("48", "-5"))
    report = dep.json("restart", "decode", "--rollback", code=1)
    assert report["rolled_back"] is True, report
    assert "decode" in report["config_rollback_from"], report
    assert dep.yaml.read_bytes() == GOOD
    assert all(step["outcome"] == "ok" for step in report["rollback_steps"]), report
    assert dep.json("knob", "diff", "decode", after=(MRR,))["live"] == "32"


@pytest.mark.parametrize("size", [300 * 1024, 12 << 20], ids=["300KiB", "12MiB"])
def test_a_config_file_over_the_bound_is_one_refusal_exit_2(tmp_path: Path, size: int) -> None:
    """A low of issue 38's later pass: a 300 KiB YAML was refused with exit 2 by its parser, a
    12 MiB one with exit 1 and another message by its reader. One bound, one message, exit 2."""
    spec = write_pd_spec(tmp_path, knobs=(MRR,), knob=None)
    spec.write_text(spec.read_text().replace(
        'depends_on = ["prefill"]\n', 'depends_on = ["prefill"]\nconfig_file = "decode.yaml"\n', 1
    ))  # fmt: skip
    (tmp_path / "decode.yaml").write_bytes(GOOD + b"#" * size)
    done = run_cli("knob", "get", "decode", "-f", str(spec), "--", MRR, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "larger than 262,144 bytes, the most a config file is read up to" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_rollback_puts_back_the_files_the_running_decode_was_started_from(
    restored: Deployment,
) -> None:
    """``restart --rollback`` restored each file's latest backup (the file before the last
    ``knob set``): after two ``knob set``s without a restart in between, a value that never ran
    (the first set's); a hand edit of the env file was kept. It puts back the files as the running
    decode was started from them (thirteenth pass)."""
    dep = restored
    env_file = dep.spec.parent / "env" / "decode.env"
    env_before = env_file.read_bytes()
    try:
        dep.json("knob", "set", "decode", after=(f"{MRR}=48",))
        assert dep.json("restart", "decode", "--no-verify")["ok"] is True
        ran = dep.yaml.read_bytes()  # what the decode now runs with: 48
        dep.json("knob", "set", "decode", after=(f"{MRR}=40",))  # never restarted
        dep.json("knob", "set", "decode", after=(f"{MRR}=44",))
        dep.yaml.write_text(dep.yaml.read_text().replace("44", "-5"))  # the engine refuses it
        env_file.write_bytes(env_before + b"HAND_EDITED=1\n")
        report = dep.json("restart", "decode", "--rollback", code=1)
        assert report["rolled_back"] is True, report
        assert all(step["outcome"] == "ok" for step in report["rollback_steps"]), report
        assert dep.yaml.read_bytes() == ran  # 48, not 40 (the file before the last knob set)
        assert env_file.read_bytes() == env_before
        assert ".launched-" in report["config_rollback_from"]["decode"], report
        assert ".launched-" in report["rollback_from"]["decode"], report
        assert dep.json("knob", "diff", "decode", after=(MRR,))["live"] == "48"
    finally:
        env_file.write_bytes(env_before)
        dep.yaml.write_bytes(GOOD)
        assert dep.cli("restart", "decode", "--no-verify").returncode == 0


def test_knob_set_refuses_a_complex_key_naming_the_file_and_the_key(tmp_path: Path) -> None:
    """The sixteenth pass (issue 38): ``knob set`` on ``? max-running-requests`` then ``: 32``
    left it and added a second ``max-running-requests: 48`` (exit 0); refused, exit 2, naming
    the file and the key, the file as it was."""
    spec = write_pd_spec(tmp_path, knobs=(MRR,), knob=None)
    spec.write_text(spec.read_text().replace(
        'depends_on = ["prefill"]\n', 'depends_on = ["prefill"]\nconfig_file = "decode.yaml"\n', 1
    ))  # fmt: skip
    complex_key = b"# decode\n? max-running-requests\n: 32\n"
    (tmp_path / "decode.yaml").write_bytes(complex_key)
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    done = run_cli("knob", "set", "decode", "-f", str(spec), "--", f"{MRR}=48", env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{tmp_path / 'decode.yaml'}:2: max-running-requests is written in a YAML form" in (
        done.stderr
    )
    assert len(done.stderr.strip().splitlines()) == 1
    assert (tmp_path / "decode.yaml").read_bytes() == complex_key
    got = run_cli("knob", "get", "decode", "-f", str(spec), "--json", "--", MRR, env=env)
    assert got.returncode == 0 and json.loads(got.stdout)["value"] == "32", got.stdout
