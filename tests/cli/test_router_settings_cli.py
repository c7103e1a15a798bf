"""A router table edited on a running deployment is a restart needed (issue 38, the nineteenth
pass's M4): the router reads its settings at start only and writes its title over its argv, so
``verify`` compares the command line its pid record keeps with the one the spec would launch now:
it fails naming each setting (spec vs live) and the restart; ``up`` warns (not "already up"
alone); after ``servelab restart router`` both are quiet again. Real processes: the simulated
workers and the real router, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.generic import servelab_in
from tests.support.specs import ROUTER_KINDS, write_pd_spec

RUNS = '{ policy = "round_robin", prometheus_port = '
EDITED = ('policy = "cache_aware"', "health_check_interval_s = 9")


def _router_checks(root: Path) -> tuple[int, list[dict[str, object]]]:
    code, out, err = servelab_in(root, "verify", "--layer", "live", "--json")
    assert code in (0, 1), err
    checks = json.loads(out)["checks"]
    return code, [c for c in checks if c["service"] == "router"]


def _edit_router_table(spec: Path) -> None:
    text = spec.read_text()
    assert 'policy = "round_robin"' in text and "health_check_interval_s = 1 " in text
    text = text.replace('policy = "round_robin"', EDITED[0])
    spec.write_text(text.replace("health_check_interval_s = 1 ", EDITED[1] + " "))


@pytest.mark.parametrize("kind", ROUTER_KINDS)
def test_an_edited_router_table_fails_verify_warns_up_until_the_router_restarts(
    tmp_path: Path, kind: str
) -> None:
    spec = write_pd_spec(tmp_path, router_kind=None if kind == "sglang-router" else kind)
    code, _, err = servelab_in(tmp_path, "up")
    assert code == 0, err
    try:
        code, checks = _router_checks(tmp_path)
        assert code == 0, checks
        assert [c["code"] for c in checks] == ["live.no_knobs", "live.router_as_spec"]

        _edit_router_table(spec)
        code, out, _ = servelab_in(tmp_path, "verify")
        assert code == 1, out
        assert "policy: spec cache_aware, live round_robin" in out, out
        assert "health_check_interval_s: spec 9, live 1" in out, out
        assert "restart the router" in out
        code, checks = _router_checks(tmp_path)
        launch = checks[-1]
        assert code == 1 and launch["code"] == "live.router_restart_needed", checks
        assert launch["ok"] is False
        assert launch["changes"] == [
            {"setting": "policy", "flag": "--policy", "spec": "cache_aware",
             "live": "round_robin"},
            {"setting": "health_check_interval_s", "flag": "--health-check-interval-secs",
             "spec": "9", "live": "1"},
        ]  # fmt: skip

        code, out, err = servelab_in(tmp_path, "up")
        assert code == 0, err
        said = out + err
        assert "router: already up" in said
        assert "warning: router was launched with other router settings than the spec's" in said
        assert "policy: spec cache_aware, live round_robin" in said
        assert f"apply the spec's with: servelab restart -f {spec} router" in said, said

        code, out, err = servelab_in(tmp_path, "restart", "router")
        assert code == 0, out + err
        code, checks = _router_checks(tmp_path)
        assert code == 0 and checks[-1]["code"] == "live.router_as_spec", checks
        code, out, err = servelab_in(tmp_path, "up")
        assert code == 0 and "warning" not in out + err, out + err
    finally:
        servelab_in(tmp_path, "down")
