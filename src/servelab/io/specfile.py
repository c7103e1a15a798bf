"""Finding and loading the deployment spec from disk (the I/O half of
:mod:`servelab.core.deploy.spec`).

Resolution: an explicit ``-f PATH``; else ``./servelab.toml``; else the embedded default. Loading
writes nothing: the commands that use the embedded default's env files (up, restart, knob, verify,
A/B, case revert/restore, soak) create them first with :func:`materialize_default_env`, under the
state directory, never overwriting one (the user edits them).
Relative paths in a spec (``state_dir``, ``env_file``) are relative to the spec file's directory,
or to the working directory for the embedded default, and normalised.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from servelab.core.deploy.defaultspec import DEFAULT_ENV_FILES, DEFAULT_SPEC_TOML
from servelab.core.deploy.spec import DeploymentSpec, parse_spec
from servelab.errors import SpecError
from servelab.io.files import write_atomic

__all__ = ["LoadedSpec", "load_spec", "materialize_default_env"]

SPEC_FILENAME = "servelab.toml"
EMBEDDED = "<embedded default>"


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec with where it came from and the directory its relative paths start at."""

    spec: DeploymentSpec
    source: str
    base_dir: Path

    @property
    def embedded(self) -> bool:
        return self.source == EMBEDDED

    @property
    def spec_args(self) -> tuple[str, ...]:
        """What a command line names this spec with: ``("-f", PATH)``, or nothing for the
        embedded default (a hint a newcomer pastes acts on this deployment, not the default)."""
        return () if self.embedded else ("-f", self.source)

    def path(self, relative: str) -> Path:
        """A spec path (``env_file``, ``state_dir``) resolved against the spec's directory, and
        normalised (``examples/../.servelab`` is ``.servelab``; lexically, so a remote host's path
        is never looked up here)."""
        candidate = Path(relative).expanduser()
        joined = candidate if candidate.is_absolute() else self.base_dir / candidate
        return Path(os.path.normpath(joined))

    @property
    def state_dir(self) -> Path:
        return self.path(self.spec.state_dir)

    def state_dir_on(self, local: bool) -> str:
        """The state directory on a service's host: locally the spec's; over SSH (``local``
        False) the spec's when absolute, else ``.servelab/<spec name>`` under the login
        directory."""
        if local:
            return str(self.state_dir)
        configured = PurePosixPath(self.spec.state_dir)
        return str(configured) if configured.is_absolute() else f".servelab/{self.spec.name}"

    def env_file(self, service: str) -> Path | None:
        env_file = self.spec.service(service).env_file
        return None if env_file is None else self.path(env_file)


#: The largest spec read (a spec is a few KB; a larger file is not one).
MAX_SPEC_BYTES = 4 << 20


def _read_bounded(path: Path) -> bytes:
    """The spec file's bytes: a regular file (a link's target) of at most :data:`MAX_SPEC_BYTES`;
    a FIFO, a device (``/dev/zero``) or a pipe (``/dev/stdin``) is refused before it is opened,
    so nothing waits on a writer or reads without end."""
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO or pipe" if stat.S_ISFIFO(mode) \
            else "a device"  # fmt: skip
        raise SpecError(f"not a regular file ({kind}): give the spec as a file", source=str(path))
    with path.open("rb") as spec:
        data = spec.read(MAX_SPEC_BYTES + 1)
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(f"larger than {MAX_SPEC_BYTES:,} bytes: not a spec", source=str(path))
    return data


def load_spec(path: Path | None = None, *, cwd: Path | None = None) -> LoadedSpec:
    """Load the spec at ``path``, or ``./servelab.toml``, or the embedded default."""
    cwd = cwd or Path.cwd()
    if path is None and (cwd / SPEC_FILENAME).is_file():
        path = cwd / SPEC_FILENAME
    if path is None:
        return LoadedSpec(parse_spec(DEFAULT_SPEC_TOML, source=EMBEDDED), EMBEDDED, cwd)
    try:
        text = _read_bounded(path).decode("utf-8-sig")  # a BOM (Windows editors) is not the spec's
    except OSError as exc:
        raise SpecError(f"cannot read: {exc.strerror}", source=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise SpecError(f"not UTF-8 text: byte {exc.start} is {exc.object[exc.start]:#04x}",
                        source=str(path)) from exc  # fmt: skip
    loaded = LoadedSpec(parse_spec(text, source=str(path)), str(path), path.resolve().parent)
    _check_local_env_dirs(loaded)
    _check_state_dir(loaded)
    return loaded


def _check_state_dir(loaded: LoadedSpec) -> None:
    """A ``state_dir`` that exists as something other than a directory (a file, a FIFO) is the
    spec's fault, said at its key: each command that writes there failed with its own
    "File exists" (the lock, the ledger)."""
    state = loaded.state_dir
    if state.exists() and not state.is_dir():
        raise SpecError(
            f"{state} exists and is not a directory", source=loaded.source, path="state_dir"
        )


def _check_local_env_dirs(loaded: LoadedSpec) -> None:
    for name, svc in loaded.spec.services.items():
        if svc.env_file is None or not loaded.spec.hosts[svc.host].is_local:
            continue
        directory = loaded.path(svc.env_file).parent
        if not directory.is_dir():
            raise SpecError(
                f"directory {directory} does not exist",
                source=loaded.source,
                path=f"services.{name}.env_file",
            )


def materialize_default_env(loaded: LoadedSpec) -> list[Path]:
    """Create the embedded default's missing env files; returns the ones written.

    A spec read from a file is left alone (its env files are the user's); an existing env file is
    never overwritten.
    """
    if not loaded.embedded:
        return []
    written = []
    for name in loaded.spec.services:
        env_path = loaded.env_file(name)
        if env_path is None or env_path.exists():
            continue
        write_atomic(env_path, DEFAULT_ENV_FILES.get(name, "").encode(), parents=True)
        written.append(env_path)
    return written
