"""The words for another deployment's pid record found in a shared state folder, for a pid
record that stays, stale, once its processes are stopped, for a router on the port whose
deployment cannot be told, and for whose another deployment's process is (pure: returns str).
Apart from :mod:`servelab.report.progress` (every feature's progress events) so that
``up``/``down``/``restart``'s report (:mod:`servelab.report.deploy`) imports no other feature's
events."""

from __future__ import annotations

from servelab.core.deploy.whose import Others, Whose
from servelab.core.printable import printable

__all__ = ["others_words", "stale_words", "untold_words", "whose_mark", "whose_words"]

#: Characters of another deployment's name or address shown at most (its process sets its mark).
_NAME_CHARS = 80


def _shown(text: str) -> str:
    return printable(text[:_NAME_CHARS] + ("…" if len(text) > _NAME_CHARS else ""))


def whose_mark(others: Others) -> str:
    """Whose another deployment's process is, in a table's cell: ``NAME's``, ``NAME@ADDRESS's``
    for another copy of this spec serving elsewhere, ``another state folder's`` for a copy with
    its own state folder (its name is this deployment's own: ``NAME's`` would read as ours)."""
    match others.whose:
        case Whose.NAMED:
            return f"{_shown(others.name)}'s"
        case Whose.ADDRESS if others.address is None:  # an older mark: no address in it
            return f"another {_shown(others.name)}'s"
        case Whose.ADDRESS:
            return f"{_shown(others.name)}@{_shown(others.address or '')}'s"
        case Whose.STATE_FOLDER:
            return "another state folder's"


def whose_words(others: Others) -> str:
    """Whose another deployment's process is, in a sentence: ``deployment NAME``, ``deployment
    NAME serving at ADDRESS``, ``this spec's deployment NAME run from another state folder``."""
    match others.whose:
        case Whose.NAMED:
            return f"deployment {_shown(others.name)}"
        case Whose.ADDRESS if others.address is None:
            return f"another deployment named {_shown(others.name)}"
        case Whose.ADDRESS:
            return f"deployment {_shown(others.name)} serving at {_shown(others.address or '')}"
        case Whose.STATE_FOLDER:
            return f"deployment {_shown(others.name)} run from another state folder"


def others_words(deployment: str, pid: int, state_dir: str) -> str:
    """Another deployment's pid record found in a shared state folder, left alone."""
    return (
        f"the state folder {state_dir} is shared with deployment {deployment!r}: its pid record "
        f"(pid {pid}) is that deployment's, left alone (give each spec its own state_dir)"
    )


def stale_words(why: str) -> str:
    """A pid record left behind once its processes were stopped (a read-only state folder)."""
    return (
        f"WARNING: its pid record could not be removed ({why}): it stays, stale; its "
        "processes are stopped (its pid dead) and later commands read it as not running"
    )


def untold_words(pid: int, missing: tuple[str, ...] | None) -> str:
    """``up`` found a ready router it did not start on the port, and cannot tell whose it is: its
    worker list unreadable (``missing`` None), or listing no worker but this spec's, not yet
    ``missing`` (workers may register with it later)."""
    if missing is None:
        why = "whose worker list cannot be read"
    else:
        why = (f"that lists no worker but this spec's, and not {', '.join(missing)} (yet: "
               "workers may register with it later)")  # fmt: skip
    return (
        f"WARNING: pid {pid} holds its port, a router not started by this deployment {why}: "
        "whose router it is cannot be told; left running as it is, not adopted"
    )
