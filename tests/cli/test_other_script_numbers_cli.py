"""Real-number options given another script's digits (issue 38, the sixteenth pass): ``float``
reads them, so ``bench --rate ٣`` (an Arabic-Indic 3) ran at 3 requests a second and
``--alpha ٠.٠٥`` was 0.05, while ``--concurrency ٣`` was refused. Each is refused now, exit 2,
naming the option, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import run_cli


@pytest.mark.parametrize(
    ("argv", "option"),
    [(["bench", "--url", "http://127.0.0.1:9", "--rate", "\u0663"], "--rate"),
     (["bench", "--url", "http://127.0.0.1:9", "--deadline", "\uff11.\uff15"], "--deadline"),
     (["case", "test", "1", "knob:decode/X", "--alpha", "\u0660.\u0660\u0665"], "--alpha"),
     (["ledger", "prune", "--older-than", "\u0663d"], "--older-than")],
    ids=["rate-arabic-indic", "deadline-full-width", "alpha-finite", "age"],
)  # fmt: skip
def test_a_real_number_in_another_scripts_digits_is_refused_naming_the_option(
    tmp_path: Path, argv: list[str], option: str
) -> None:
    done = run_cli(*argv, "--ledger", str(tmp_path / "l.db"), cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert option in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "l.db").exists()
