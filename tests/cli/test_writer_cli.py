"""Every file a command writes goes through the one writer: ``trace generate`` to a device, a
FIFO, a link and a missing directory (issue 38, defect 1)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from tests.support import run_cli


def test_trace_generate_to_dev_full_fails_in_one_line_and_keeps_the_device() -> None:
    """Defect 1 (issue 38): ``trace generate /dev/full`` said "wrote", exit 0, and replaced the
    device with a regular file."""
    done = run_cli("trace", "generate", "/dev/full")
    assert done.returncode in (1, 2), done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left" in lines[0], done.stderr
    assert "wrote" not in done.stdout + done.stderr
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_trace_generate_keeps_a_fifo_and_a_link_and_creates_no_directory(tmp_path: Path) -> None:
    """Defect 1 (issue 38): a FIFO and a symlink were replaced; missing folders were created."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    done = run_cli("trace", "generate", str(fifo), "--sessions", "2")
    reader.join(30)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and got and got[0].count(b"\n") > 1
    target = tmp_path / "real.jsonl"
    target.write_text("")
    link = tmp_path / "trace.jsonl"
    link.symlink_to(target)
    refused = run_cli("trace", "generate", str(link), "--sessions", "2")
    assert (
        refused.returncode == 2 and f"cannot write {link}: it is a symbolic link" in refused.stderr
    )
    assert link.is_symlink() and target.read_bytes() == b""  # the link and its target kept
    missing = tmp_path / "no" / "such" / "trace.jsonl"
    done = run_cli("trace", "generate", str(missing))
    assert done.returncode == 2, done.stderr  # an input error, before any work
    assert "no directory" in done.stderr and str(missing) in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()


def test_trace_generate_dash_writes_standard_output_not_a_file_named_dash(tmp_path: Path) -> None:
    """A low of issue 38's later pass: ``trace generate -`` wrote a file named ``-``."""
    done = run_cli("trace", "generate", "-", "--sessions", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") > 1 and done.stdout.startswith('{"session_id"')
    assert "wrote standard output" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_trace_generate_refuses_a_resolution_past_a_minute(tmp_path: Path) -> None:
    """A low of issue 38's later pass: ``--resolution-ms`` had no upper bound."""
    out = tmp_path / "t.jsonl"
    done = run_cli("trace", "generate", str(out), "--resolution-ms", "100000000")
    assert done.returncode == 2, done.stdout
    assert "--resolution-ms 100000000: arrivals are recorded at 1 to 60,000 ms" in done.stderr
    assert not out.exists()
    assert run_cli("trace", "generate", str(out), "--resolution-ms", "60000").returncode == 0


def test_a_json_document_onto_a_full_standard_output_is_one_line(tmp_path: Path) -> None:
    """``--json > /dev/full`` (a second adversarial pass): the failure's own JSON document went
    to the same full output and ended in a traceback; stderr says it in one line, exit 1."""
    import subprocess
    import sys

    ledger = str(tmp_path / "l.db")
    assert run_cli("case", "open", "x", "--ledger", ledger).returncode == 0
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "servelab", "case", "list", "--ledger", ledger, "--json"],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "No space left on device" in done.stderr


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """A file outside the export folder, and the folder (made) where a link to it is planted."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "passwd"
    victim.write_text("root:x:0:0:root:/root:/bin/bash\n")
    folder = tmp_path / "export"
    folder.mkdir()
    return victim, folder


def test_bench_export_force_refuses_a_link_planted_in_its_folder(tmp_path: Path) -> None:
    """The sixth hostile pass: ``bench --export --force DIR`` wrote through ``DIR/records.jsonl
    -> /etc/passwd``: refused before any load, exit 2, naming the path; the target unchanged."""
    victim, export = _planted(tmp_path)
    link = export / "records.jsonl"
    link.symlink_to(victim)
    done = run_cli("bench", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--requests",
                   "1", "--export", str(export), "--force")  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot write {link}: it is a symbolic link (to {victim})" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert victim.read_text() == "root:x:0:0:root:/root:/bin/bash\n" and link.is_symlink()


def test_init_output_force_refuses_a_link(tmp_path: Path) -> None:
    """The sixth hostile pass: ``init -o FILE --force`` with FILE a link to a file outside."""
    victim, folder = _planted(tmp_path)
    link = folder / "servelab.toml"
    link.symlink_to(victim)
    done = run_cli("init", "--router", "http://127.0.0.1:9", "-o", str(link), "--force")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot write {link}: it is a symbolic link (to {victim})" in done.stderr
    assert victim.read_text() == "root:x:0:0:root:/root:/bin/bash\n" and link.is_symlink()


def test_trace_generate_to_dev_stdout_redirected_to_a_file(tmp_path: Path) -> None:
    """``/dev/stdout`` is a link (to ``/proc/self/fd/1``, to the shell's file): it names the
    descriptor, which is written; it is no link refused."""
    import subprocess
    import sys

    out = tmp_path / "trace.jsonl"
    with out.open("wb") as held:
        done = subprocess.run(
            [sys.executable, "-m", "servelab", "trace", "generate", "/dev/stdout", "--sessions",
             "1"], stdout=held, stderr=subprocess.PIPE, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.read_text().count("\n") > 1 and out.read_text().startswith('{"session_id"')
