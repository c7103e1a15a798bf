"""Whether a writer may replace what is at a path: the one rule every writer of a user's file
follows (``--force``; never through a symbolic link), what a descriptor's name names, and the
unused name a report written at the end of a long run takes."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from servelab.errors import HostError, OptionError

__all__ = [
    "PARTIAL",
    "block_refusal",
    "check_overwrite",
    "descriptor",
    "existing",
    "folder_refusal",
    "folders_refusal",
    "link_refusal",
    "linked_folder",
    "name_refusal",
    "unused_stem",
    "unwritten",
    "write_refusal",
]


def existing(path: Path) -> os.stat_result | None:
    """The file's status (a link's target's), None when there is none."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def link_refusal(path: Path) -> str | None:
    """Why ``path`` is not written, when it is a symbolic link that leads to a regular file, a
    folder or nothing (a link planted in an export's folder would send the bytes anywhere, and
    ``--force`` replace what it names: ``/etc/passwd``); None for anything else (a link to a
    device or a FIFO, ``/dev/stdout``, is streamed into: nothing is replaced)."""
    if not path.is_symlink() or descriptor(path) is not None:  # /dev/stdout: its descriptor
        return None
    try:
        end = path.stat()
    except OSError:  # a dangling link, or a loop
        end = None
    if end is not None and not (stat.S_ISREG(end.st_mode) or stat.S_ISDIR(end.st_mode)):
        return None
    folder = ", a folder" if end is not None and stat.S_ISDIR(end.st_mode) else ""
    return (
        f"cannot write {path}: it is a symbolic link (to {os.readlink(path)}{folder}), and "
        "servelab writes no file through a link: remove the link, or name the file itself"
    )


def block_refusal(path: Path) -> str | None:
    """Why ``path`` is not written when it leads (itself, or through a link) to a block device: a
    disk, a partition, a loop device over a disk image holds something, and streaming into it
    overwrites that; it is refused, ``--force`` or not (no servelab output belongs on a disk).
    None for anything else (a character device, ``/dev/null``, a tty, a FIFO: streamed into)."""
    try:
        end = path.stat()
    except OSError:  # nothing there, a dangling link: no device
        return None
    if not stat.S_ISBLK(end.st_mode):
        return None
    return (
        f"cannot write {path}: it is a block device (a disk, a partition or a loop device: what "
        "it holds would be overwritten), and servelab writes none, --force or not: name a file"
    )


def write_refusal(path: Path, follow_links: bool = False) -> str | None:
    """Why the writer does not write ``path`` at all: a link it does not follow
    (:func:`link_refusal`; ``follow_links``: none), or a block device (:func:`block_refusal`)."""
    return (None if follow_links else link_refusal(path)) or block_refusal(path)


#: The names of a process's open descriptors: written to the descriptor itself.
_DESCRIPTOR = re.compile(
    r"/dev/(?:fd/(?P<fd>\d+)|(?P<std>stdout|stderr))|/proc/self/fd/(?P<own>\d+)"
)


def descriptor(path: Path) -> int | None:
    """The descriptor ``path`` names (``/dev/stdout``: 1, ``/dev/fd/5``: 5), else None."""
    named = _DESCRIPTOR.fullmatch(str(path))
    if named is None:
        return None
    if named.group("std"):
        return 1 if named.group("std") == "stdout" else 2
    return int(named.group("fd") or named.group("own"))


def linked_folder(out_dir: Path, rel: str) -> str | None:
    """Why ``out_dir/rel`` is not written when a folder of ``rel`` under ``out_dir`` is a
    symbolic link (``DIR/cases -> /etc``); None when none is."""
    folder = out_dir
    for part in Path(rel).parts[:-1]:
        folder = folder / part
        if folder.is_symlink():
            return (
                f"cannot write {out_dir / rel}: {folder} is a symbolic link, and servelab writes "
                "no file through a link: remove the link"
            )
    return None


def folder_refusal(path: Path) -> str | None:
    """Why ``path`` cannot be written where it is named: its folder is not there, is a link to
    nothing (or a loop), or is no folder; None when it is one, or when it cannot be looked at
    (the write says why)."""
    if not os.path.lexists(path.parent):
        return f"cannot write {path}: no directory {path.parent} (create it first)"
    return _no_folder(path, path.parent)


def folders_refusal(path: Path) -> str | None:
    """Why the folders of ``path``, which its writer makes (``parents=True``: a csv export's),
    cannot be made: the nearest one that is there is no folder (a file, a FIFO, ``/dev/null``),
    or is a link to nothing (or a loop); None when it is a folder, or cannot be looked at."""
    made = _made(path) if ".." in path.parts else path
    return _nearest_refusal(path, path) or _nearest_refusal(path, made)


def _made(path: Path) -> Path:
    """``path`` as the system makes its folders: a missing NEW in ``NEW/../FILE/OUT`` is made a
    folder, so its ``..`` is the folder it is in (read as text, FILE went unseen)."""
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):  # a NUL in it: the write's words
        return path


def _nearest_refusal(path: Path, walked: Path) -> str | None:
    there = next((folder for folder in walked.parents if os.path.lexists(folder)), None)
    return None if there is None else _no_folder(path, there)


def _no_folder(path: Path, folder: Path) -> str | None:
    """Why ``folder``, which is there (a link, maybe), holds no ``path``: None when it is a folder
    (a link to one too) or cannot be looked at (unreadable, too long, a NUL: the write's words)."""
    try:
        found = os.stat(folder)  # follows links: a link to a folder is one
    except (FileNotFoundError, NotADirectoryError):
        return f"cannot write {path}: no directory {folder} (a link to nothing)"
    except OSError as exc:  # a link loop: no folder
        looped = exc.errno == errno.ELOOP
        return f"cannot write {path}: no directory {folder} (a link loop)" if looped else None
    except ValueError:
        return None
    if not stat.S_ISDIR(found.st_mode):
        return f"cannot write {path}: {folder} is not a directory"
    return None


#: The writer's temporary file beside the file it writes (``.NAME.`` + 8 random characters +
#: this suffix, :class:`servelab.io.files.AtomicFile`), renamed over it once whole.
PARTIAL = ".partial"
_TEMP_EXTRA = len("..") + 8 + len(PARTIAL)
#: Linux's longest path a call takes, its NUL included.
_PATH_MAX = 4096


def name_refusal(path: Path) -> str | None:
    """Why ``path`` cannot be written whole: its name, with what its temporary file adds, is
    longer than its folder's file names may be (the system's "File name too long", exit 1 after
    the work); None when it fits, or is streamed into (a FIFO or a device that is there)."""
    name = len(os.fsencode(path.name))
    folder = next((f for f in path.parents if os.path.lexists(f)), Path("."))
    try:
        most = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        most = 255
    longest = max((len(os.fsencode(part)) for part in path.parts[:-1]), default=0)
    if longest > most:  # a folder's name no file system here takes: "File name too long"
        return f"cannot write {path}: a folder's name in it is {longest} bytes, over {most}"
    whole = len(os.fsencode(os.path.abspath(path))) + _TEMP_EXTRA
    if whole >= _PATH_MAX:
        return f"cannot write {path}: its path is {whole} bytes, over {_PATH_MAX - 1}"
    if name + _TEMP_EXTRA <= most or descriptor(path) is not None:
        return None
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None  # streamed into: no temporary file
    except (OSError, ValueError):
        pass
    return (f"cannot write {path}: its name is {name} bytes, and a file is written whole "
            f"through a temporary file beside it whose name is {_TEMP_EXTRA} bytes longer: "
            f"{folder} takes names of at most {most} bytes (name the file in at most "
            f"{most - _TEMP_EXTRA})")  # fmt: skip


def check_overwrite(
    path: Path, force: bool, option: str = "--force", *, makes_folder: bool = False
) -> None:
    """The one rule of every writer of a user's file: an existing regular file that holds
    anything is overwritten only with ``option`` (:class:`~servelab.errors.OptionError`, exit 2,
    the file untouched); an empty one destroys nothing, a FIFO or a character device is streamed
    into, never "overwritten", and a link to a regular file, a folder or nothing is refused,
    ``option`` or not (:func:`link_refusal`), before any work; so are a folder itself, a block
    device (:func:`block_refusal`: it holds a disk's bytes) and a folder that is not there
    (:func:`folder_refusal`), unless the writer makes it (``makes_folder``: an export's; then
    the nearest folder that is there must be one, :func:`folders_refusal`), and a name too long
    for its folder (:func:`name_refusal`)."""
    refused = name_refusal(path) or link_refusal(path)  # (a name too long: no lstat of it)
    refused = refused or (None if descriptor(path) is not None else block_refusal(path))
    if refused is None:
        refused = folders_refusal(path) if makes_folder else folder_refusal(path)
    if refused is not None:
        raise OptionError(refused)
    found = existing(path)
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise OptionError(f"cannot write {path}: it is a directory: remove it, or name a file")
    if found is not None and stat.S_ISREG(found.st_mode) and found.st_size and not force:
        raise OptionError(f"{path} exists: give {option} to overwrite it, or another path")


def unwritten(path: Path, exc: OSError) -> str:
    """Why ``path`` was not written: the system's words, and, when the temporary file beside it
    (``.NAME.*``, renamed over it once whole) could not be made, that its folder takes none
    (``/proc/self/mem``: "No such file or directory" alone named a file that is there)."""
    why = exc.strerror or str(exc)
    made = Path(str(exc.filename or ""))
    beside = made.parent in (path.parent, Path(os.path.realpath(path.parent)))
    if beside and made.name.startswith(f".{path.name}."):
        return (f"cannot write {path}: a file is written whole through a temporary file beside "
                f"it, and its folder {path.parent} takes no new file ({why})")  # fmt: skip
    return f"cannot write {path}: {why}"


def unused_stem(directory: Path, stem: str, suffixes: Iterable[str]) -> str:
    """``stem``, or ``stem-2``, ``stem-3``... the first for which no file ``directory/STEM+S`` of
    ``suffixes`` holds anything: a report written at the end of a long run (``ab-run.md`` of a
    run without a ledger) never replaces an earlier one, and never fails for it either."""
    for n in range(1, 10_000):
        name = stem if n == 1 else f"{stem}-{n}"
        paths = [directory / f"{name}{suffix}" for suffix in suffixes]
        taken = [existing(p) for p in paths if not p.is_symlink()]
        linked = any(p.is_symlink() for p in paths)  # never written through: taken
        if not linked and not any(f and stat.S_ISREG(f.st_mode) and f.st_size for f in taken):
            return name
    raise HostError(f"cannot write {directory}/{stem}*: 10,000 earlier ones are there")
