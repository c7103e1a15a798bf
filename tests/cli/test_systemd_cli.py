"""A service that is a systemd unit (``unit = "..."``), against a real systemd over a real sshd.

The systemd is PID 1 of its own namespaces (:mod:`tests.support.systemd`); servelab reaches it as
an SSH host. ``servelab up`` starts the unit through its start command (``systemctl restart``) and
adopts its MainPID (``status``: "systemd unit X"); a knob set in the env file that the unit reads
(``EnvironmentFile=``) differs from the live one (restart needed) until ``servelab restart``,
then is live in ``/proc/MainPID/environ``; ``servelab down`` stops it with ``systemctl stop``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import free_port, run_cli
from tests.support.systemd import SystemdHost, start_systemd

UNIT = "servelab-web.service"
KNOB = "WEB_WORKERS"

_UNIT_TEXT = """[Unit]
Description=servelab test web service
[Service]
EnvironmentFile={env}
ExecStart={python} -m http.server {port} --bind 127.0.0.1 --directory {root}
StandardOutput=append:{log}
StandardError=append:{log}
"""


@pytest.fixture(scope="module")
def systemd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SystemdHost]:
    """A private systemd (and its sshd) for this module, sharing pytest's base temp directory."""
    host = start_systemd(tmp_path_factory.mktemp("systemd"), tmp_path_factory.getbasetemp())
    yield host
    host.stop()


def _spec(root: Path, systemd: SystemdHost, port: int) -> Path:
    spec = root / "unit.toml"
    spec.write_text(
        f'name = "unit"\nstate_dir = "{root}/state"\n'
        + systemd.sshd.host_toml("box")
        + "[services.web]\n"
        'role = "generic"\n'
        f'url = "http://127.0.0.1:{port}"\n'
        'host = "box"\n'
        f'start = "systemctl restart {UNIT}"\n'
        f'unit = "{UNIT}"\n'
        f'env_file = "{root}/web.env"\n'
        f"knobs = [{KNOB!r}]\n".replace("'", '"')
        + 'ready_path = "/"\nready_timeout_s = 20\n'
    )
    return spec


def _cli(spec: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "-f", str(spec), cwd=spec.parent, timeout=90)


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.stdout, done.stderr
    return json.loads(done.stdout)


def _main_pid(systemd: SystemdHost, unit: str = UNIT) -> int:
    return int(systemd.systemctl("show", "-p", "MainPID", "--value", unit).stdout.strip())


def _live_env(systemd: SystemdHost, pid: int) -> dict[str, str]:
    """``/proc/PID/environ`` as the namespace sees it (pid in its PID namespace)."""
    raw = systemd.nsenter("cat", f"/proc/{pid}/environ").stdout
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _check(doc: dict[str, Any], layer: str) -> dict[str, Any]:
    return next(c for c in doc["checks"] if c["layer"] == layer and c.get("knob") == KNOB)


def test_a_unit_is_started_adopted_restarted_with_a_live_knob_and_stopped(
    tmp_path: Path, systemd: SystemdHost
) -> None:
    port = free_port()
    (tmp_path / "www").mkdir()
    (tmp_path / "web.env").write_text(f"{KNOB}=2\n")
    systemd.add_unit(
        UNIT,
        _UNIT_TEXT.format(
            env=tmp_path / "web.env",
            # the interpreter itself, not the venv's link to it: the namespace's /tmp is
            # private, so a checkout under /tmp (and its venv) is not there
            python=os.path.realpath(sys.executable),
            port=port,
            root=tmp_path / "www",
            log=tmp_path / "web.log",
        ),
    )
    spec = _spec(tmp_path, systemd, port)
    try:
        up = _cli(spec, "up", "--json")
        assert up.returncode == 0, up.stdout + up.stderr
        (step,) = _json(up)["steps"]
        first = _main_pid(systemd)
        assert step["outcome"] == "ok" and step["pid"] == first > 1
        assert systemd.systemctl("is-active", UNIT).stdout.strip() == "active"

        (status,) = _json(_cli(spec, "status", "--json"))
        assert status["pid_source"] == f"systemd unit {UNIT}"
        assert status["pid"] == first and status["alive"] and status["ready"]
        assert _live_env(systemd, first)[KNOB] == "2"

        knob = _cli(spec, "knob", "set", "web", f"{KNOB}=5", "--json")
        assert knob.returncode == 0 and _json(knob)["restart_needed"], knob.stdout + knob.stderr
        before = _cli(spec, "verify", "--layer", "live", "--json")
        assert before.returncode == 1
        stale = _check(_json(before), "live")
        assert stale["code"] == "live.differs" and (stale["file"], stale["live"]) == ("5", "2")

        restarted = _cli(spec, "restart", "web", "--no-verify", "--json")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        second = _main_pid(systemd)
        assert second != first and _json(restarted)["steps"][0]["pid"] == second
        assert _live_env(systemd, second)[KNOB] == "5"
        after = _cli(spec, "verify", "--layer", "config", "--layer", "live", "--json")
        assert after.returncode == 0, after.stdout
        live = _check(_json(after), "live")
        assert live["ok"] and live["pid"] == second
        assert live["pid_source"] == f"systemd unit {UNIT}"
    finally:
        down = _cli(spec, "down", "--json")
    assert down.returncode == 0, down.stdout + down.stderr
    (stopped,) = _json(down)["steps"]
    assert stopped["outcome"] == "stopped" and stopped["evidence"]["stop_command_exit"] == 0
    assert systemd.systemctl("is-active", UNIT).stdout.strip() == "inactive"
    assert _main_pid(systemd) == 0 and not _listening(port)


def test_the_namespace_keeps_its_hands_off_the_host(systemd: SystemdHost) -> None:
    """Its /tmp is its own, the host's files are read-only there, and only the units written
    for the tests exist (no tmpfiles, journald or udev that would touch the host)."""
    probe = f"servelab-ns-probe-{systemd.init_pid()}"
    wrote = systemd.nsenter("sh", "-c", f"echo x > /tmp/{probe} && ls /tmp")
    # only the probe, and the way to the shared directory when that lies in /tmp
    shared = {systemd.share.parts[2]} if systemd.share.parts[1] == "tmp" else set()
    assert wrote.returncode == 0 and set(wrote.stdout.split()) == {probe, *shared}
    assert not (Path("/tmp") / probe).exists()
    refused = systemd.nsenter("sh", "-c", f"echo x > /etc/{probe}")
    assert refused.returncode != 0 and "Read-only file system" in refused.stderr
    loaded = systemd.systemctl("list-units", "--all", "--plain", "--no-legend", "*.service")
    services = {line.split()[0] for line in loaded.stdout.splitlines()}
    assert "servelab-sshd.service" in services
    assert not {s for s in services if "tmpfiles" in s or "journald" in s or "udev" in s}


ARGS_UNIT = "servelab-args.service"
ARG = "--max-running-requests"
_SERVE = """import http.server, sys
port = int(sys.argv[1])
handler = http.server.SimpleHTTPRequestHandler
http.server.ThreadingHTTPServer(("127.0.0.1", port), handler).serve_forever()
"""
_ARGS_UNIT_TEXT = """[Unit]
Description=servelab test server with arguments
[Service]
EnvironmentFile={env}
ExecStart={python} {serve} {port} $WEB_ARGS{extra}
WorkingDirectory={root}
StandardOutput=append:{log}
StandardError=append:{log}
"""


def _args_unit(root: Path, port: int, extra: str = "") -> str:
    return _ARGS_UNIT_TEXT.format(
        env=root / "args.env", python=os.path.realpath(sys.executable), serve=root / "serve.py",
        port=port, root=root, log=root / "args.log", extra=extra,
    )  # fmt: skip


def _knob(spec: Path, action: str, argument: str) -> subprocess.CompletedProcess[str]:
    """``knob ACTION web --json -f SPEC -- ARGUMENT``: options before ``--``, the argument after."""
    return run_cli("knob", action, "web", "--json", "-f", str(spec), "--", argument,
                   cwd=spec.parent, timeout=90)  # fmt: skip


def _live_arg(spec: Path) -> dict[str, Any]:
    done = _knob(spec, "diff", ARG)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(_json(done))


def _args_spec(root: Path, systemd: SystemdHost, port: int, *, manage: bool) -> Path:
    spec = root / "args.toml"
    spec.write_text(
        f'name = "args"\nstate_dir = "{root}/state"\n'
        + systemd.sshd.host_toml("box")
        + f'[services.web]\nrole = "generic"\nurl = "http://127.0.0.1:{port}"\nhost = "box"\n'
        f'start = "systemctl restart {ARGS_UNIT}"\nunit = "{ARGS_UNIT}"\n'
        f'env_file = "{root}/args.env"\nargs_env = "WEB_ARGS"\nknobs = ["{ARG}"]\n'
        f'manage_unit = {"true" if manage else "false"}\nready_path = "/"\nready_timeout_s = 20\n'
    )
    return spec


def test_an_argument_knob_in_a_units_args_env_and_a_unit_changed_without_reload(
    tmp_path: Path, systemd: SystemdHost
) -> None:
    """``ExecStart=... $WEB_ARGS``: the argument is set in the env file, live after a restart in
    ``/proc/MainPID/cmdline``. A unit file edited on disk without ``daemon-reload`` stops the
    restart before anything stops (its old command line would run); with ``manage_unit`` servelab
    reloads it, and the new command line is live."""
    port = free_port()
    (tmp_path / "serve.py").write_text(_SERVE)
    (tmp_path / "args.env").write_text(f"WEB_ARGS={ARG} 32\n")
    unit_path = systemd.add_unit(ARGS_UNIT, _args_unit(tmp_path, port))
    spec = _args_spec(tmp_path, systemd, port, manage=False)
    try:
        up = _cli(spec, "up", "--json")
        assert up.returncode == 0, up.stdout + up.stderr
        assert _live_arg(spec)["live"] == "32"
        first = _main_pid(systemd, ARGS_UNIT)

        knob = _knob(spec, "set", f"{ARG}=64")
        assert knob.returncode == 0, knob.stdout + knob.stderr
        change = _json(knob)
        assert (change["place"], change["live"], change["restart_needed"]) == (
            "args_env",
            "32",
            True,
        )
        restarted = _cli(spec, "restart", "web", "--no-verify", "--json")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        second = _main_pid(systemd, ARGS_UNIT)
        assert second != first
        assert _live_arg(spec)["live"] == "64"

        # the unit changes on disk (a later literal argument wins over $WEB_ARGS), not reloaded
        unit_path.write_text(_args_unit(tmp_path, port, extra=f" {ARG} 16"))
        stale = _cli(spec, "restart", "web", "--no-verify")
        assert stale.returncode == 1
        assert f"systemd unit {ARGS_UNIT} changed on disk and is not reloaded" in stale.stderr
        assert "nothing was started or stopped" in stale.stderr
        assert _main_pid(systemd, ARGS_UNIT) == second
        seen = _cli(spec, "verify", "--layer", "config", "--json")  # and verify says so
        assert seen.returncode == 1
        (unit,) = [c for c in _json(seen)["checks"] if c["code"].startswith("config.unit")]
        assert (unit["code"], unit["unit"], unit["needs_reload"]) == (
            "config.unit_stale", ARGS_UNIT, True,
        )  # fmt: skip

        managed = _args_spec(tmp_path, systemd, port, manage=True)
        reloaded = _cli(managed, "restart", "web", "--no-verify")
        assert reloaded.returncode == 0, reloaded.stdout + reloaded.stderr
        assert "ran systemctl daemon-reload" in reloaded.stdout + reloaded.stderr
        assert _main_pid(systemd, ARGS_UNIT) != second
        live = _live_arg(managed)
        assert (live["file"], live["live"]) == ("64", "16")
        after = _json(_cli(managed, "verify", "--layer", "config", "--layer", "live", "--json"))
        codes = {c["code"] for c in after["checks"]}
        # the unit is loaded now; its literal argument (after $WEB_ARGS) wins over the file's
        assert "config.unit_loaded" in codes and "live.argument_differs" in codes
    finally:
        down = _cli(spec, "down", "--json")
    assert down.returncode == 0, down.stdout + down.stderr
