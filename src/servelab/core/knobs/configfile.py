"""An engine's ``--config`` YAML file, read and edited the way its engine reads it (pure).

Both engines read one YAML mapping and turn it into arguments that go BEFORE the command line's,
so the command line wins over the file and the file over the default
(``../shared/notes/engine-contracts.md`` §2):

- SGLang turns each key into ``--{key}`` exactly as written (so keys are dashed:
  ``max-running-requests: 64``); ``true`` gives the bare flag; ``false`` is dropped, so a flag
  turned off is a key removed; any other value is passed as its ``str()``: a JSON-valued
  argument must be a JSON string in the file;
- vLLM takes dashes or underscores; a ``false`` is dropped too, so a flag is turned off with
  ``no-x: true``; a mapping value is passed as its JSON;
- a key becomes a word the engine's argparse reads, so a key that is a unique prefix of a flag
  (``max-running: 48``) is that flag: with the parser's ``flags`` known, it is read and edited as
  that flag (:func:`~servelab.core.knobs.argv.expand_arg`).

:func:`config_values` gives the arguments a file holds in the form of
:func:`~servelab.core.knobs.argv.arg_values`, so one reader serves the command line and the file.
:func:`edit_config` rewrites only the lines of one top-level key (comments and every other line
stay as written, a plain value's trailing comment too) and checks that the result reads back as
asked; a value on several lines (a block mapping, a literal block) is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from servelab.core.engines import Engine
from servelab.core.knob import OFF, ON, Knob, KnobKind, same_value
from servelab.core.knobs.argv import canonical_arg, expand_arg, json_key_set, knob_value
from servelab.core.knobs.configyaml import load_config, top_keys
from servelab.core.ledger.codec import JsonObject
from servelab.errors import KnobError

__all__ = ["config_values", "dropped_arguments", "edit_config"]

_TOP_KEY = re.compile(r"(?P<q>['\"]?)(?P<key>[A-Za-z0-9][A-Za-z0-9_.-]*)(?P=q)\s*:(?P<rest>\s.*|)$")
#: A plain (unquoted) scalar's trailing comment, kept when the line is rewritten.
_COMMENT = re.compile(r"\s+#.*$")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?\Z")


def _document(text: str | bytes, source: str) -> JsonObject:
    document = load_config(text, source)
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise KnobError(f"{source}: not a mapping of argument names to values")
    return document


def _as_argument(value: Any, engine: Engine) -> str:
    if isinstance(value, dict) and engine.negatable_flags:
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, list):
        return " ".join(str(item) for item in value)
    return str(value)


def config_values(
    text: str | bytes,
    engine: Engine,
    source: str = "<config>",
    flags: Collection[str] | None = None,
) -> dict[str, str]:
    """The arguments the file gives its engine: ``{--arg: value}``, a ``true`` flag ``on``, a
    dropped ``false`` absent, vLLM's ``no-x: true`` as ``--x`` ``off``; with the parser's
    ``flags``, a key that abbreviates a flag as that flag."""
    values: dict[str, str] = {}
    for key, value in _document(text, source).items():
        arg = expand_arg(canonical_arg(f"--{key}", engine), flags)
        if value is True:
            negated = engine.negatable_flags and arg.startswith("--no-")
            values["--" + arg[5:] if negated else arg] = OFF if negated else ON
        elif value is not False and value is not None:
            values[arg] = _as_argument(value, engine)
    return values


def dropped_arguments(text: str | bytes, engine: Engine, source: str = "<config>") -> list[str]:
    """The arguments the file names with ``false`` that vLLM drops (``--x``; its
    ``load_config_file`` keeps no ``false``: a flag is turned off with ``no-x: true``), so the
    engine runs with its default, which may be on. SGLang's ``false`` is dropped too, but its
    flags are off unless given: nothing is lost."""
    if not engine.negatable_flags:
        return []
    doc = _document(text, source)
    return [canonical_arg(f"--{key}", engine) for key, value in doc.items() if value is False]


def _matches(key: str, knob: Knob, engine: Engine, flags: Collection[str] | None) -> bool:
    assert knob.arg is not None
    name = expand_arg(canonical_arg(f"--{key}", engine), flags)
    target = canonical_arg(knob.arg, engine)
    return name == target or (engine.negatable_flags and name == f"--no-{target[2:]}")


def _key_lines(
    lines: list[str], knob: Knob, engine: Engine, source: str, flags: Collection[str] | None
) -> list[int]:
    """The indices of the top-level lines that set the knob's argument (single-line values)."""
    found = []
    for i, line in enumerate(lines):
        m = _TOP_KEY.match(line)
        if m is None or not _matches(m.group("key"), knob, engine, flags):
            continue
        rest = m.group("rest").strip()
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if not rest or rest[0] in "|>" or following[:1] in (" ", "\t", "-"):
            raise KnobError(
                f"{source}:{i + 1}: {m.group('key')} has a value on several lines; "
                "servelab edits single-line values only: edit this one by hand"
            )
        found.append(i)
    return found


def _check_written_plainly(
    text: str,
    at: list[int],
    knob: Knob,
    engine: Engine,
    source: str,
    flags: Collection[str] | None,
) -> None:
    """Refuse a file that sets the knob's argument with a key not on a ``key: value`` line of its
    own (a complex key ``? key`` then ``: value``, a flow mapping ``{key: value}``): the edit
    would leave it and add a second key, the engine taking whichever its reader keeps."""
    for key, line in top_keys(text, source):
        if line not in at and _matches(key, knob, engine, flags):
            raise KnobError(
                f"{source}:{line + 1}: {key} is written in a YAML form servelab does not edit "
                "(a complex key '? key', a flow mapping): edit this one by hand, or write it "
                f"as '{key}: VALUE'"
            )


def _scalar(value: str) -> str:
    return value if _NUMBER.match(value) else json.dumps(value)


def _new_lines(
    text: str,
    knob: Knob,
    value: str | None,
    engine: Engine,
    source: str,
    flags: Collection[str] | None,
) -> list[str]:
    assert knob.arg is not None
    key = knob.arg[2:]
    if knob.kind is KnobKind.FLAG:
        if value == ON:
            return [f"{key}: true"]
        return [f"no-{key}: true"] if value == OFF and engine.negatable_flags else []
    if knob.kind is KnobKind.JSON_KEY:
        raw = config_values(text, engine, source, flags).get(canonical_arg(knob.arg, engine))
        document = json_key_set(raw or None, knob, value)
        if document is None:
            return []
        quoted = document.replace("'", "''")
        return [f"{key}: '{quoted}'"]
    return [] if value is None else [f"{key}: {_scalar(value)}"]


def edit_config(
    text: str,
    knob: Knob,
    value: str | None,
    engine: Engine,
    source: str = "<config>",
    flags: Collection[str] | None = None,
) -> str:
    """``text`` with the knob set to ``value`` (None: the key removed, the engine's default);
    with the parser's ``flags``, a key abbreviating the knob's flag goes too."""
    value = knob.normalize(value)
    lines = text.splitlines()
    at = _key_lines(lines, knob, engine, source, flags)
    _check_written_plainly(text, at, knob, engine, source, flags)
    new = _new_lines(text, knob, value, engine, source, flags)
    place = at[-1] if at else len(lines)
    if at and len(new) == 1:
        rest = lines[place].split(":", 1)[1].strip()
        comment = _COMMENT.search(rest) if rest[:1] not in "'\"{[" else None
        new = [new[0] + comment.group(0)] if comment else new
    kept = [line for i, line in enumerate(lines) if i not in set(at)]
    place -= sum(1 for i in at if i < place)
    edited = "\n".join([*kept[:place], *new, *kept[place:]]) + "\n"
    got = knob_value(config_values(edited, engine, source, flags), knob, engine)
    flag_default = OFF if knob.kind is KnobKind.FLAG and not engine.negatable_flags else None
    if not same_value(got, flag_default if value is None else value):
        raise KnobError(f"{source}: the edit of {knob.name} would read back {got!r}, not {value!r}")
    return edited
