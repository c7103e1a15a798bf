"""The words for another deployment's pid record found in a shared state folder, for a pid
record that stays, stale, once its processes are stopped, and for a router on the port whose
deployment cannot be told (pure: returns str). Apart from
:mod:`servelab.report.progress` (every feature's progress events) so that
``up``/``down``/``restart``'s report (:mod:`servelab.report.deploy`) imports no other feature's
events."""

from __future__ import annotations

__all__ = ["others_words", "stale_words", "untold_words"]


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
