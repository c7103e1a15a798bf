"""Two deployments (two specs in two folders) sharing one ledger (issue 38): ``restore`` of a
case whose revert one of them recorded is refused (exit 2) from the other, before anything is
written or restarted, naming the deployment and the spec to restore it with; ``case revert``
from the other of a knob the case holds the first one's change of, the same. Real processes
and files; each spec's only service cannot start (``exit 3``), so a command that got past the
checks fails its restart (exit 1) and shows it."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.core.knobs.record import KnobChangeRecord
from servelab.io.ledger.ledger import Ledger
from tests.cli.test_shared_ledger_revert_cli import TARGET
from tests.support import run_cli
from tests.support.history import K
from tests.support.unstartable import alpha_and_beta, mark, same_named


def _written(ledger_file: Path) -> list[tuple[str | None, str | None]]:
    with Ledger.open(ledger_file) as ledger:
        return [(c.new, c.deployment) for c in ledger.list(KnobChangeRecord, name=K)]


def _reverted_in_alpha(tmp_path: Path) -> tuple[Path, Path, tuple[str, str], str]:
    """alpha set 512 and beta 128; a case suspects the knob; alpha's revert of it (512 -> 256)
    got as far as its restart, which failed: its put-back (256 -> 512) is the case's too."""
    ledger_file = tmp_path / "shared" / "ledger.db"
    led = ("--ledger", str(ledger_file))
    alpha, beta = alpha_and_beta(tmp_path)
    for spec, value in ((alpha, "512"), (beta, "128")):
        done = run_cli("knob", "set", "decode", f"{K}={value}", "-f", str(spec), *led)
        assert done.returncode == 0, done.stdout + done.stderr
    cid = str(json.loads(run_cli("case", "open", "hang", "--json", *led).stdout)["id"])
    done = run_cli("case", "suspect", cid, TARGET, "--reason", "latest", "-f", str(alpha), *led)
    assert done.returncode == 0, done.stderr
    done = run_cli("case", "revert", cid, TARGET, "--yes", "-f", str(alpha), *led)
    assert done.returncode == 1, done.stdout + done.stderr  # past the checks: the restart fails
    return alpha, beta, led, cid


def test_restore_of_another_deployments_revert_is_refused(tmp_path: Path) -> None:
    alpha, beta, led, cid = _reverted_in_alpha(tmp_path)
    # alpha's file holds 256 as its revert left it (the put-back undone by hand: the plan then
    # restores 512, and nothing in alpha's history says otherwise)
    (tmp_path / "a" / "decode.env").write_text(f"{K}=256\n")
    with Ledger.open(Path(led[1])) as ledger:
        ledger.add(KnobChangeRecord(id=0, at="2026-12-06T00:00:00Z", service="decode", name=K,
                                    case_id=int(cid), old="512", new="256", reason="again",
                                    deployment="alpha"))  # fmt: skip
    done = run_cli("case", "resolve", cid, "--root-cause", "proxy", "--exonerate", TARGET,
                   "-f", str(beta), *led)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # issue 38, sixteenth pass: it said to restore from beta (refused): it names alpha's spec
    said = " ".join(done.stdout.split())
    assert f"apply it with: servelab restore {cid} -f {alpha}" in said, said
    assert f"-f {beta}" not in said and "alpha's revert, not this deployment's (beta)" in said
    shown = run_cli("case", "show", cid, "-f", str(beta), *led)
    said = " ".join(shown.stdout.split())
    assert shown.returncode == 0 and "alpha's revert, not this deployment's (beta)" in said, said
    assert f"restore it with -f {alpha}" in said, said
    own = run_cli("case", "show", cid, "-f", str(alpha), *led)  # its own: nothing to name
    assert own.returncode == 0 and "not this deployment's" not in own.stdout, own.stdout
    before = _written(Path(led[1]))
    refused = run_cli("restore", cid, "-f", str(beta), *led)
    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode == 2, said
    assert f"case {cid}'s revert of {TARGET} was alpha's, not this deployment's (beta)" in said
    assert f"restore it with -f {alpha}" in said and "Traceback" not in said
    assert (tmp_path / "b" / "decode.env").read_text() == f"{K}=128\n"  # never written
    assert not (tmp_path / "b" / "state" / "logs").exists()  # nothing restarted
    assert _written(Path(led[1])) == before
    # forced or not: --force overrides a hand edit, not another deployment's case
    forced = run_cli("restore", cid, "--force", "-f", str(beta), *led)
    assert forced.returncode == 2 and "was alpha's" in forced.stderr, forced.stderr
    assert (tmp_path / "b" / "decode.env").read_text() == f"{K}=128\n"
    # beta's later change of its own knob is no "changed again since" of alpha's plan
    moved = run_cli("knob", "set", "decode", f"{K}=64", "-f", str(beta), *led)
    assert moved.returncode == 0, moved.stdout + moved.stderr
    shown = run_cli("case", "show", cid, *led)
    assert shown.returncode == 0 and "256 → 512" in shown.stdout, shown.stdout + shown.stderr
    assert "changed again since" not in shown.stdout, shown.stdout
    # its own deployment restores it: past the checks, its restart fails (exit 1)
    written = len(_written(Path(led[1])))
    own = run_cli("restore", cid, "-f", str(alpha), *led)
    assert own.returncode == 1, own.stdout + own.stderr
    assert "changed again since" not in own.stdout + own.stderr
    assert _written(Path(led[1]))[written:] == [("512", mark(alpha)), ("256", mark(alpha))]


def test_case_revert_from_another_deployment_of_a_case_holding_ones_revert_is_refused(
    tmp_path: Path,
) -> None:
    _alpha, beta, led, cid = _reverted_in_alpha(tmp_path)
    before = _written(Path(led[1]))
    refused = run_cli("case", "revert", cid, TARGET, "--yes", "--to", "64", "-f", str(beta), *led)
    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode == 2, said
    assert f"case {cid} holds alpha's revert of {TARGET}, not this deployment's (beta)" in said
    assert (tmp_path / "b" / "decode.env").read_text() == f"{K}=128\n"
    assert _written(Path(led[1])) == before


def test_restore_and_revert_of_a_same_named_deployments_revert_are_refused(
    tmp_path: Path,
) -> None:
    """c and d2, both named servelab (the default name), share the ledger: d2's revert of its
    own change is d2's, so `restore` and `case revert` from c (same name, other port) are
    refused; before, both compared the name only and wrote d2's values into c's file."""
    ledger_file = tmp_path / "shared" / "ledger.db"
    led = ("--ledger", str(ledger_file))
    c, d2 = same_named(tmp_path)
    for spec in (c, d2):
        done = run_cli("knob", "set", "decode", f"{K}=100", "-f", str(spec), *led)
        assert done.returncode == 0, done.stdout + done.stderr
    cid = str(json.loads(run_cli("case", "open", "hang", "--json", *led).stdout)["id"])
    done = run_cli("case", "suspect", cid, TARGET, "--reason", "x", "-f", str(d2), *led)
    assert done.returncode == 0, done.stderr
    done = run_cli("case", "revert", cid, TARGET, "--yes", "-f", str(d2), *led)
    assert done.returncode == 1, done.stdout + done.stderr  # past the checks: the restart fails
    assert (tmp_path / "d2" / "decode.env").read_text() == f"{K}=100\n"  # put back
    # c's own value back to 512; d2's file holds 512 as its revert left it (the put-back undone
    # by hand and recorded as a row from before rows named their deployment: anyone's, so only
    # d2's own revert above tells whose the case's revert is; the plan then restores 100)
    assert run_cli("knob", "set", "decode", f"{K}=512", "-f", str(c), *led).returncode == 0
    (tmp_path / "d2" / "decode.env").write_text(f"{K}=512\n")
    with Ledger.open(ledger_file) as ledger:
        ledger.add(KnobChangeRecord(id=0, at="2026-12-06T00:00:00Z", service="decode", name=K,
                                    case_id=int(cid), old="100", new="512", reason="again",
                                    deployment=None))  # fmt: skip
    d2_is = f"servelab@{mark(d2).partition('@')[2].partition('#')[0]}"
    before = _written(ledger_file)
    refused = run_cli("case", "revert", cid, TARGET, "--yes", "--to", "64", "-f", str(c), *led)
    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode == 2, said
    assert f"case {cid} holds {d2_is}'s revert of {TARGET}, not this deployment's" in said, said
    done = run_cli("case", "resolve", cid, "--root-cause", "proxy", "--exonerate", TARGET,
                   "-f", str(c), *led)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert f"apply it with: servelab restore {cid} -f {d2}" in said, said
    assert f"{d2_is}'s revert, not this deployment's (servelab)" in said, said
    shown = run_cli("case", "show", cid, "-f", str(c), *led)
    assert f"{d2_is}'s revert, not this deployment's" in shown.stdout, shown.stdout
    refused = run_cli("restore", cid, "-f", str(c), *led)
    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode == 2, said
    assert f"case {cid}'s revert of {TARGET} was {d2_is}'s, not this deployment's" in said, said
    assert "Traceback" not in said
    assert (tmp_path / "c" / "decode.env").read_text() == f"{K}=512\n"  # never written
    assert not (tmp_path / "c" / "state" / "logs").exists()  # nothing restarted
    assert _written(ledger_file) == before
    # its own deployment restores it: past the checks, its restart fails (exit 1)
    own = run_cli("restore", cid, "-f", str(d2), *led)
    assert own.returncode == 1, own.stdout + own.stderr
    assert _written(ledger_file)[len(before) :][0] == ("100", mark(d2))


def test_resolve_json_carries_the_restore_advice_the_text_shows(tmp_path: Path) -> None:
    """Known after the seventeenth pass: ``case resolve --json`` had the plan but not whose each
    revert is nor the ``restore`` that would be accepted, which the text says."""
    alpha, beta, led, cid = _reverted_in_alpha(tmp_path)
    (tmp_path / "a" / "decode.env").write_text(f"{K}=256\n")
    with Ledger.open(Path(led[1])) as ledger:
        ledger.add(KnobChangeRecord(id=0, at="2026-12-06T00:00:00Z", service="decode", name=K,
                                    case_id=int(cid), old="512", new="256", reason="again",
                                    deployment="alpha"))  # fmt: skip
    args = ("case", "resolve", cid, "--root-cause", "proxy", "--exonerate", TARGET, "-f", str(beta))
    done = run_cli(*args, *led, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    advice = doc["restore_advice"]
    assert advice["here"] == "beta" and advice["spec_args"] == ["-f", str(alpha)], advice
    assert [w["other"] for w in advice["whose"]] == ["alpha"], advice
    text = run_cli(*args, *led)  # resolved again: the same lines as text
    shown = [" ".join(line.split()) for line in text.stdout.splitlines() if line.startswith("  ")]
    lines = doc["restore_lines"]
    assert lines[-1] == f"apply it with: servelab restore {cid} -f {alpha}", lines
    assert "alpha's revert, not this deployment's (beta)" in lines[0], lines
    assert [" ".join(line.split()) for line in lines] == shown[-len(lines) :], (lines, shown)
