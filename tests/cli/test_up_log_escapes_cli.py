"""``up`` that fails quotes its service's log tail with the log's control characters escaped (the
twenty-fifth pass, issue 38): a log's ``ESC`` sequences (a title, a colour), a ``BEL``, a lone
``CR`` and a right-to-left override reached the user's terminal as they were written. Line ends
and tabs are kept. A real process writes the log."""

from __future__ import annotations

from pathlib import Path

from tests.support import free_port
from tests.support.generic import servelab_in
from tests.support.processes import live_procs_under

_HOSTILE = r"printf '\033]0;pwned\007\033[31mred\tcol\342\200\256rev\rover\r\nsecond\n'; exit 3"


def test_up_escapes_the_control_characters_of_the_log_it_quotes(tmp_path: Path) -> None:
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        'name = "g"\nstate_dir = "state"\n[services.web]\nrole = "generic"\n'
        f"url = 'http://127.0.0.1:{free_port()}'\nstart = '''{_HOSTILE}'''\n"
    )
    code, out, err = servelab_in(tmp_path, "up")
    assert code == 1, out + err
    assert "the start command exited with status 3" in err, err
    both = out + err
    for raw in ("\x1b", "\x07", "\u202e", "\r"):
        assert raw not in both, repr(both)
    assert "\\x1b]0;pwned\\x07\\x1b[31mred" in err, repr(err)  # the tab shown as spaces
    assert "col\\u202erev\\x0dover\n  second\n" in err, repr(err)
    assert err.rstrip().endswith("\n  second"), repr(err)
    assert live_procs_under(tmp_path) == []
