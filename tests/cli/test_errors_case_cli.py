"""Every case, restore, investigate, report and ledger command that reads a spec fails on one
that is not TOML in one clear line on stderr (no traceback), exit 2, with ``--json`` its failure
document, nothing written (tests/cli/test_errors.py holds the other commands, and checks that the
two files cover every command that reads a spec). Real processes, real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clierrors import CASE_AND_LEDGER, check_a_bad_spec


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("command", CASE_AND_LEDGER)
def test_a_bad_spec_is_one_line_exit_2_for_every_command(
    command: str, as_json: bool, tmp_path: Path
) -> None:
    check_a_bad_spec(command, as_json, tmp_path)
