"""Two specs beside each other share the default state folder (``.servelab``), so one finds the
other's pid record of a service of the same name (issue 38, H2): it is never stopped, adopted or
shown as this deployment's, and the command says the folder is shared; also when both specs have
one name (H1: a copy of a spec on other ports). Real processes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.io.hosts.place import read_place
from tests.support import free_ports
from tests.support.generic import HTTP_SERVER, generic_service, servelab_in
from tests.support.processes import alive, listening, live_procs_under
from tests.support.specs import PdEnv, PdPorts, pd_spec_toml


@pytest.fixture
def prod_up(tmp_path: Path) -> Iterator[tuple[Path, list[int], int]]:
    """``prod.toml`` (deployment prod) up; ``staging.toml`` beside it, the same service name on
    another port; both with the default state folder. Yields the folder, ports, prod's pid."""
    ports = free_ports(2)
    for name, port in (("prod", ports[0]), ("staging", ports[1])):
        spec = f'name = "{name}"\n' + generic_service("a", port, 'ready_path = "/"\n')
        (tmp_path / f"{name}.toml").write_text(spec)
    try:
        code, _, err = servelab_in(tmp_path, "up", "-f", "prod.toml")
        assert code == 0, err
        record = json.loads((tmp_path / ".servelab" / "run" / "a.json").read_text())
        place = read_place(tmp_path / ".servelab")  # made by the first launch
        assert record["extra"]["mark"] == f"prod/a@local:{ports[0]}#{place}"
        yield tmp_path, ports, record["pid"]
    finally:
        servelab_in(tmp_path, "down", "-f", "staging.toml")
        servelab_in(tmp_path, "down", "-f", "prod.toml")
    assert live_procs_under(tmp_path) == []


def _squeezed(text: str) -> str:
    """The text without white space or table borders."""
    return "".join(c for c in text if not c.isspace() and c != "│")


def _forget_mark(root: Path) -> None:
    """Make the record an older one: without the deployment's mark."""
    path = root / ".servelab" / "run" / "a.json"
    record = json.loads(path.read_text())
    del record["extra"]["mark"]
    path.write_text(json.dumps(record))


def _down_leaves_prod(root: Path, port: int, pid: int) -> None:
    code, out, err = servelab_in(root, "down", "-f", "staging.toml", "--json")
    assert code == 0, err
    (step,) = json.loads(out)["steps"]
    assert step["outcome"] == "not running"
    state_dir = str(root / ".servelab")
    others = {"deployment": "prod", "pid": pid, "state_dir": state_dir}
    assert step["evidence"]["others_record"] == others
    assert alive(pid) and listening(port)
    code, out, err = servelab_in(root, "down", "-f", "staging.toml")  # in words too
    assert code == 0, err
    said = _squeezed(out)  # the table wraps the cell, and cuts a long path short with "…"
    assert _squeezed(f"the state folder {state_dir[:40]}") in said, out
    assert _squeezed("is shared with deployment 'prod'") in said, out
    assert _squeezed(f"(pid {pid}) is that deployment's, left alone") in said
    assert (root / ".servelab" / "run" / "a.json").exists()


def test_down_and_status_of_another_spec_leave_its_process_alone(
    prod_up: tuple[Path, list[int], int],
) -> None:
    root, ports, pid = prod_up
    code, out, _ = servelab_in(root, "status", "-f", "staging.toml", "--json")
    assert code == 1  # staging's service is not up
    (shown,) = json.loads(out)
    assert shown["pid"] is None and not shown["alive"]
    assert shown["pid_source"] == f"another deployment's record ('prod', pid {pid})"
    code, out, _ = servelab_in(root, "status", "-f", "staging.toml")
    assert "- (another deployment's" in out, out  # the cell wraps
    _down_leaves_prod(root, ports[0], pid)
    code, out, _ = servelab_in(root, "status", "-f", "prod.toml", "--json")  # still prod's own
    (shown,) = json.loads(out)
    assert code == 0 and shown["alive"] and shown["ready"]
    assert shown["pid_source"] == "port owner in the recorded process group"


def test_an_older_record_is_known_by_its_process_mark(
    prod_up: tuple[Path, list[int], int],
) -> None:
    root, ports, pid = prod_up
    _forget_mark(root)
    _down_leaves_prod(root, ports[0], pid)
    code, out, err = servelab_in(root, "down", "-f", "prod.toml", "--json")  # its own: stopped
    assert code == 0, err
    assert json.loads(out)["steps"][0]["outcome"] == "stopped"
    assert not alive(pid) and not listening(ports[0])


def test_up_of_another_spec_does_not_adopt_and_each_down_stops_its_own(
    prod_up: tuple[Path, list[int], int],
) -> None:
    root, ports, pid = prod_up
    code, _, err = servelab_in(root, "up", "-f", "staging.toml")
    assert code == 0, err
    assert "already up" not in err and "shared with deployment 'prod'" in err
    assert listening(ports[1]) and alive(pid)
    code, out, _ = servelab_in(root, "status", "-f", "staging.toml", "--json")
    staging = json.loads(out)[0]["pid"]
    assert staging not in (None, pid)
    code, out, err = servelab_in(root, "down", "-f", "prod.toml", "--json")
    assert code == 0, err
    assert json.loads(out)["steps"][0]["outcome"] == "stopped"
    assert not alive(pid) and not listening(ports[0]) and alive(staging)
    assert servelab_in(root, "down", "-f", "staging.toml")[0] == 0
    assert not alive(staging) and not listening(ports[1])


def _pids(root: Path, spec: str) -> dict[str, int | None]:
    _, out, _ = servelab_in(root, "status", "-f", spec, "--json")
    return {shown["service"]: shown["pid"] for shown in json.loads(out)}


@pytest.fixture
def twins(tmp_path: Path) -> Iterator[Path]:
    """``staging.toml`` and ``canary.toml`` beside each other: one simulated PD spec copied, on
    other ports, neither with ``name`` nor ``state_dir`` (one name, one state folder)."""
    PdEnv().write(tmp_path / "env")
    for spec in ("staging.toml", "canary.toml"):
        text = pd_spec_toml(PdPorts.free(proxy=False), name="servelab", state_dir=".servelab")
        text = text.replace('name = "servelab"\nstate_dir = ".servelab"\n', "")
        (tmp_path / spec).write_text(text)
    try:
        yield tmp_path
    finally:
        servelab_in(tmp_path, "down", "-f", "canary.toml")
        servelab_in(tmp_path, "down", "-f", "staging.toml")
    assert live_procs_under(tmp_path) == []


@pytest.mark.timeout(600)
def test_two_copies_of_one_spec_in_one_folder_never_touch_each_other(twins: Path) -> None:
    """Issue 38 H1: one name, one state folder, two specs: ``up``, ``status``, ``down`` and
    ``restart`` of one never stop, adopt or show the other's processes."""
    root = twins
    code, _, err = servelab_in(root, "up", "-f", "staging.toml")
    assert code == 0, err
    staging = _pids(root, "staging.toml")
    assert all(staging.values()), staging
    code, _, err = servelab_in(root, "up", "-f", "canary.toml")
    assert code == 0, err
    assert "shared with deployment 'servelab@local:" in err, err
    canary = _pids(root, "canary.toml")
    assert all(canary.values()) and not set(canary.values()) & set(staging.values())
    assert _pids(root, "staging.toml") == staging  # each its own, not the other's
    logs = root / ".servelab" / "logs"
    assert (logs / "decode.log").read_text().count("--- servelab start") == 1  # staging's alone
    assert len(list(logs.glob("decode@local:*.log"))) == 1  # canary's, kept aside
    code, _, err = servelab_in(root, "down", "-f", "canary.toml")
    assert code == 0, err
    assert all(alive(pid) for pid in staging.values() if pid)
    assert not any(alive(pid) for pid in canary.values() if pid)
    assert servelab_in(root, "up", "-f", "canary.toml")[0] == 0
    code, _, err = servelab_in(root, "restart", "-f", "canary.toml", "decode")
    assert code == 0, err
    assert all(alive(pid) for pid in staging.values() if pid)
    assert _pids(root, "staging.toml") == staging
    assert (logs / "decode.log").read_text().count("--- servelab start") == 1


@pytest.mark.timeout(600)
def test_a_record_kept_aside_is_not_a_third_spec_of_another_name(twins: Path) -> None:
    """Fifteenth pass, H1: canary's records sit aside under its addresses; a third spec in the
    folder serving those addresses under another name (canary's file renamed) finds them there:
    they are canary's, never stopped, adopted or shown as the third's."""
    root = twins
    for spec in ("staging.toml", "canary.toml"):
        code, _, err = servelab_in(root, "up", "-f", spec)
        assert code == 0, err
    canary = _pids(root, "canary.toml")
    assert all(canary.values()), canary
    (root / "other.toml").write_text('name = "other"\n' + (root / "canary.toml").read_text())
    try:
        _, out, _ = servelab_in(root, "status", "-f", "other.toml", "--json")
        for row in json.loads(out):  # what holds its ports is shown, never as its own record
            assert row["pid_source"] == row["pid_source"].split(",")[0], row
            assert row["pid_source"].startswith("owner of port "), row
        code, _, err = servelab_in(root, "down", "-f", "other.toml")
        assert all(alive(pid) for pid in canary.values() if pid), err
        code, _, err = servelab_in(root, "up", "-f", "other.toml")  # canary's ports: never adopted
        # Sixteenth pass, H1: a port held by another deployment's marked process fails the step
        # (it was "already up, not started by servelab" and ok before).
        assert code == 1, err
        assert f"is held by pid {canary['prefill']}, prefill@" in err, err
        assert "this spec's port collides with it" in err, err
        assert "started by servelab" not in err, err
        assert _pids(root, "canary.toml") == canary  # its records are still its own
    finally:
        servelab_in(root, "down", "-f", "other.toml")
    assert all(alive(pid) for pid in canary.values() if pid)


def _web_spec(root: Path, name: str, shared: Path, port: int, secret: str) -> Path:
    """``root/spec.toml``: deployment ``name``, state folder ``shared``, one generic service
    ``decode`` whose env file (``root/env/decode.env``) holds its port and ``secret``."""
    (root / "env").mkdir(parents=True)
    (root / "env" / "decode.env").write_text(f"WEB_PORT={port}\nSECRET_TOKEN={secret}\nK=1\n")
    start = HTTP_SERVER.replace("{port}", "$WEB_PORT")
    (root / "spec.toml").write_text(
        f'name = "{name}"\nstate_dir = "{shared}"\n[services.decode]\nrole = "generic"\n'
        f'url = "http://127.0.0.1:{port}"\nstart = \'{start}\'\nready_path = "/"\n'
        'ready_timeout_s = 10\nenv_file = "env/decode.env"\nknobs = ["K"]\n'
    )
    return root / "spec.toml"


@pytest.mark.timeout(300)
def test_two_deployments_in_one_folder_never_see_each_others_backups(tmp_path: Path) -> None:
    """Issue 38 H5: alpha's backup is never shown as beta's, nor restored into beta's file."""
    shared, ports = tmp_path / "shared", free_ports(2)
    alpha = _web_spec(tmp_path / "a", "alpha", shared, ports[0], "sk-alpha-secret")
    beta = _web_spec(tmp_path / "b", "beta", shared, ports[1], "sk-beta-secret")
    code, _, err = servelab_in(tmp_path, "knob", "set", "-f", str(alpha), "decode", "K=333")
    assert code == 0, err
    code, out, err = servelab_in(tmp_path, "knob", "diff", "-f", str(beta), "decode", "K", "--json")
    assert code == 0, err
    assert json.loads(out)["backup_path"] is None, out  # alpha's is not beta's
    try:
        code, _, err = servelab_in(tmp_path, "up", "-f", str(beta))
        assert code == 0, err
        env = tmp_path / "b" / "env" / "decode.env"
        env.write_text("WEB_PORT=bogus\nSECRET_TOKEN=sk-beta-secret\nK=1\n")  # beta's broken
        code, _, _ = servelab_in(tmp_path, "restart", "-f", str(beta), "decode", "--rollback")
        assert code != 0
        assert "sk-alpha-secret" not in env.read_text()  # never alpha's file
        assert "K=333" not in env.read_text()
    finally:
        servelab_in(tmp_path, "down", "-f", str(beta))
    assert live_procs_under(tmp_path) == []


@pytest.mark.parametrize("name", ["../../etc", "a/b", "", " "])
def test_a_name_that_is_not_one_path_segment_is_refused(tmp_path: Path, name: str) -> None:
    """Issue 38 M5: the name becomes ``~/.servelab/<name>`` over SSH: one line, exit 2."""
    spec = tmp_path / "spec.toml"
    spec.write_text(f"name = {json.dumps(name)}\n" + generic_service("a", free_ports(1)[0]))
    for extra in ((), ("--json",)):
        code, _, err = servelab_in(tmp_path, "status", "-f", str(spec), *extra)
        assert code == 2 and err.count("\n") == 1, err
        assert "spec.toml: name:" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("table", "name"),
    [
        ("services", "../../victim"),
        ("services", "/tmp/abs"),
        ("services", "x\ny"),
        ("services", "a b"),
        ("hosts", "../../hx"),
    ],
)
def test_a_service_or_host_name_that_is_not_one_path_segment_is_refused(
    tmp_path: Path, table: str, name: str
) -> None:
    """Sixteenth pass, H1: a service's name names its pid record, log and backups: a service
    ``../../victim`` wrote its pid record over ``victim.json`` outside the state folder, and
    ``down`` deleted it. Refused before anything is written, naming the table."""
    victim = tmp_path / "victim.json"
    victim.write_text("precious\n")
    (port,) = free_ports(1)
    quoted = json.dumps(name)
    if table == "services":
        spec = generic_service(quoted, port)
    else:
        spec = f'[hosts.{quoted}]\nssh = "u@127.0.0.1"\n' + generic_service("a", port)
    (tmp_path / "st").mkdir()
    (tmp_path / "st" / "spec.toml").write_text('state_dir = "state"\n' + spec)
    for command in ("up", "down", "status"):
        code, _, err = servelab_in(tmp_path / "st", command, "-f", "spec.toml")
        assert code == 2 and f"spec.toml: {table}:" in err and "Traceback" not in err, err
    assert victim.read_text() == "precious\n" and not (tmp_path / "victim.log").exists()
    assert not (tmp_path / "st" / "state").exists()
