"""Issue 38, fifth pass, D4, through the real CLI: ``bench --export DIR`` replaced an earlier
export's ``summary.md``/``result.json`` silently. Like ``ledger export``, it now refuses (exit 2,
before any load) when DIR holds a file the export would replace, unless ``--force``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import arun_cli, run_cli
from tests.support.servers import SEEN, served, streaming_app

PRECIOUS = b"# the summary of last week's run, kept by hand\n"


async def _bench(url: str, tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    argv = ["--url", url, "--requests", "4", "--input-len", "8", "--output-len", "2"]
    done = await arun_cli(
        *("bench", *argv),
        *("--json", "--ledger", str(tmp_path / "l.db"), "--export", str(tmp_path / "out")),
        *extra,
        cwd=tmp_path,
        unset=("SERVELAB_LEDGER",),
        timeout=60,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("name", ["summary.md", "result.json", "load_ttft.png"])
async def test_an_earlier_export_is_kept_without_force_then_replaced_with_it(
    tmp_path: Path, name: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    kept = out / name
    kept.write_bytes(PRECIOUS)
    app = streaming_app(gap_s=0.001)
    async with served(app) as url:
        code, stdout, err = await _bench(url, tmp_path)
        assert code == 2, err
        assert f"{kept} exists: give --force to overwrite it" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert kept.read_bytes() == PRECIOUS
        assert app[SEEN].streams == 0  # refused before any load
        assert not (tmp_path / "l.db").exists()
        assert json.loads(stdout)["error_type"] == "OptionError"  # --json: the error as JSON too
        assert sorted(p.name for p in out.iterdir()) == [name]

        code, stdout, err = await _bench(url, tmp_path, "--force")
    assert code == 0, err
    assert app[SEEN].streams == 4
    assert json.loads(stdout)["levels"][0]["ok"] == 4
    assert json.loads((out / "result.json").read_text())["levels"][0]["ok"] == 4
    assert (out / "summary.md").read_bytes() != PRECIOUS
    if name == "load_ttft.png":  # a closed loop writes no load plot: the file stays as it was
        assert kept.read_bytes() == PRECIOUS


async def test_an_empty_file_destroys_nothing_and_needs_no_force(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.md").write_bytes(b"")
    async with served(streaming_app(gap_s=0.001)) as url:
        code, _, err = await _bench(url, tmp_path)
    assert code == 0, err
    assert (out / "summary.md").stat().st_size > 0


def test_force_without_export_is_a_usage_error(tmp_path: Path) -> None:
    done = run_cli("bench", "--url", "http://127.0.0.1:9", "--force", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "--force goes with --export DIR" in done.stderr


@pytest.mark.parametrize("name", ["records.jsonl", "summary.md"])
async def test_a_link_to_a_folder_in_the_export_is_refused_before_any_load(
    tmp_path: Path, name: str
) -> None:
    """The sixteenth pass (issue 38): ``bench --export DIR --force`` with ``DIR/records.jsonl``
    a link to a folder passed the check, ran the whole load, wrote the files before it, and
    then failed (exit 1): refused before any load, exit 2, naming the link; nothing written."""
    out, folder = tmp_path / "out", tmp_path / "folder"
    out.mkdir()
    folder.mkdir()
    link = out / name
    link.symlink_to(folder)
    app = streaming_app(gap_s=0.001)
    async with served(app) as url:
        code, _, err = await _bench(url, tmp_path, "--force")
    assert code == 2, err
    assert f"cannot write {link}: it is a symbolic link (to {folder}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert app[SEEN].streams == 0
    assert sorted(p.name for p in out.iterdir()) == [name] and link.is_symlink()
    assert list(folder.iterdir()) == []


async def test_a_folder_where_an_export_file_goes_is_refused_before_any_load(
    tmp_path: Path,
) -> None:
    """The same with ``DIR/result.json`` a folder itself: exit 2 before any load, naming it."""
    out = tmp_path / "out"
    (out / "result.json").mkdir(parents=True)
    app = streaming_app(gap_s=0.001)
    async with served(app) as url:
        code, _, err = await _bench(url, tmp_path, "--force")
    assert code == 2, err
    assert f"cannot write {out / 'result.json'}: it is a directory" in err
    assert app[SEEN].streams == 0 and sorted(p.name for p in out.iterdir()) == ["result.json"]
