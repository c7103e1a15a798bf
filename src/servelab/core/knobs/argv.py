"""A server's command line, read and edited the way its engine's parser reads it (pure).

The engines parse their arguments with argparse (SGLang's ``ServerArgs``, vLLM's
``FlexibleArgumentParser``; ``../shared/notes/engine-contracts.md`` §2). What that means here:

- ``--x=1`` and ``--x 1`` are the same; a repeated argument ends with its last value;
- a boolean flag takes no value: present is ``on``; absent is ``off`` for SGLang (``store_true``),
  and the engine's default for vLLM, where ``--no-x`` is ``off``;
- vLLM reads ``--max_num_seqs`` as ``--max-num-seqs``; SGLang only knows the dashed form;
- words before the first ``--`` option (the program, ``serve``, vLLM's positional model) are not
  arguments;
- argparse's ``allow_abbrev`` is on in both: a unique prefix of a flag IS that flag
  (``--max-running 48`` is ``--max-running-requests 48``). Where the parser's flags are known
  (``flags``: a simulated worker's), such a word is read, and edited, as the flag it stands for;
  where they are not, it cannot be told from another flag, so it is read as written and
  :func:`abbreviations` names the words that may stand for a knob (its read is uncertain).

:func:`arg_values` reads a whole command line (``/proc/PID/cmdline``, or the words of an
``args_env`` variable); :func:`knob_value` reads one knob out of it; :func:`set_words` edits the
words so that the engine will read the knob's new value, keeping every other word as it was.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from servelab.core.engines import Engine
from servelab.core.knob import OFF, ON, Knob, KnobKind, json_scalar
from servelab.core.ledger.codec import JsonObject
from servelab.errors import KnobError

__all__ = [
    "EXACT_ONLY",
    "abbreviations",
    "arg_values",
    "canonical_arg",
    "expand_arg",
    "json_get",
    "json_key_set",
    "knob_value",
    "set_words",
]


def canonical_arg(arg: str, engine: Engine) -> str:
    """``arg`` as its engine's parser names it (vLLM: underscores read as dashes)."""
    return "--" + arg[2:].replace("_", "-") if engine.underscores else arg


#: Flags both engines look for as the exact word before argparse runs (``--config``: its file is
#: merged only when written in full), so an abbreviation of one is never read as it.
EXACT_ONLY = frozenset({"--config"})


def expand_arg(arg: str, flags: Collection[str] | None) -> str:
    """``arg`` (canonical) as a parser with ``flags`` reads it: a unique prefix of one of its
    flags is that flag (argparse's ``allow_abbrev``); an exact flag, an ambiguous or unknown
    prefix, a prefix of ``--config`` (:data:`EXACT_ONLY`), or any word when ``flags`` is None
    (not known) stays as it is."""
    if flags is None or arg in flags or not arg.startswith("--") or len(arg) <= 2:
        return arg
    matches = [flag for flag in flags if flag.startswith(arg)]
    return matches[0] if len(matches) == 1 and matches[0] not in EXACT_ONLY else arg


def abbreviations(names: Iterable[str], knob: Knob, engine: Engine) -> list[str]:
    """The argument names among ``names`` (canonical, as :func:`arg_values` gives them) that are
    a strict prefix of the knob's flag: where the parser's flags are not known, each may be the
    knob abbreviated (argparse reads a unique prefix as the flag) or another flag; the knob's
    value is then uncertain."""
    assert knob.arg is not None, "an env knob is not an argument"
    arg = canonical_arg(knob.arg, engine)
    return sorted({n for n in names if len(n) > 2 and n != arg and arg.startswith(n)})


def _is_boolean(arg: str, engine: Engine) -> bool:
    return arg in engine.boolean_flags or arg.startswith(("--enable-", "--disable-"))


def _negated(arg: str, engine: Engine) -> str | None:
    """``--x`` for vLLM's ``--no-x`` of a boolean ``--x``; None otherwise."""
    if not engine.negatable_flags or not arg.startswith("--no-"):
        return None
    base = "--" + arg[5:]
    return base if _is_boolean(base, engine) else None


def _takes_value(arg: str, following: str | None, engine: Engine) -> bool:
    if _is_boolean(arg, engine) or _negated(arg, engine) is not None:
        return False
    return following is not None and not following.startswith("--")


def _options(
    words: Sequence[str], engine: Engine, flags: Collection[str] | None = None
) -> list[tuple[int, int, str, str | None]]:
    """Every option: (first index, word count, canonical name, value; None for a bare flag); a
    unique prefix of one of ``flags`` (when known) named as that flag."""
    found: list[tuple[int, int, str, str | None]] = []
    i = next((k for k, word in enumerate(words) if word.startswith("--")), len(words))
    while i < len(words):
        word = words[i]
        if not word.startswith("--") or word == "--":
            i += 1
            continue
        name, eq, value = word.partition("=")
        name = expand_arg(canonical_arg(name, engine), flags)
        if eq:
            found.append((i, 1, name, value))
            i += 1
        elif _takes_value(name, words[i + 1] if i + 1 < len(words) else None, engine):
            found.append((i, 2, name, words[i + 1]))
            i += 2
        else:
            found.append((i, 1, name, None))
            i += 1
    return found


def arg_values(
    words: Sequence[str], engine: Engine, flags: Collection[str] | None = None
) -> dict[str, str]:
    """Each argument's final value (the last occurrence wins); a bare flag reads ``on`` and
    vLLM's ``--no-x`` reads ``--x`` ``off``; with the parser's ``flags``, an abbreviation reads
    as the flag it stands for."""
    values: dict[str, str] = {}
    for _, _, name, value in _options(words, engine, flags):
        base = _negated(name, engine)
        if base is not None:
            values[base] = OFF
        else:
            values[name] = ON if value is None else value
    return values


def json_get(document: Any, keys: Sequence[str]) -> tuple[bool, Any]:
    """(found, value) of the key path in a decoded JSON object."""
    node = document
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def _json_set(document: JsonObject, keys: Sequence[str], value: object | None) -> JsonObject:
    """A copy of the JSON object with the key path set to ``value`` (None: the key removed)."""
    root = dict(document)
    node = root
    for key in keys[:-1]:
        child = node.get(key)
        node[key] = dict(child) if isinstance(child, dict) else {}
        node = node[key]
    if value is None:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = value
    return root


def json_key_set(text: str | None, knob: Knob, value: str | None) -> str | None:
    """The JSON text of the knob's JSON-valued argument (``text``; None: absent) with the knob's
    key set to ``value`` (None: the key removed), compact; None when no key is left. Text that is
    not a JSON object is refused (:class:`~servelab.errors.KnobError`)."""
    current = {} if text is None else _json_object(text, knob)
    scalar = None if value is None else json_scalar(value)
    document = _json_set(current, knob.keys, scalar)
    return json.dumps(document, separators=(",", ":")) if document else None


def _json_text(value: Any) -> str:
    """A JSON value as a knob's string: a string as itself, anything else as its JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _json_object(text: str, knob: Knob) -> JsonObject:
    try:
        document = json.loads(text)
    except ValueError:
        raise KnobError(f"{knob.arg} does not hold JSON, so {knob.name} cannot be read") from None
    if not isinstance(document, dict):
        raise KnobError(f"{knob.arg} holds JSON that is not an object: {knob.name} has no key")
    return document


def knob_value(values: Mapping[str, str], knob: Knob, engine: Engine) -> str | None:
    """The knob's value among ``values`` (:func:`arg_values`); None when the engine's default
    applies (a flag that is absent reads ``off`` where absent means off)."""
    assert knob.arg is not None, "an env knob is not an argument"
    raw = values.get(canonical_arg(knob.arg, engine))
    if knob.kind is KnobKind.FLAG:
        if raw is None:
            return None if engine.negatable_flags else OFF
        return knob.normalize(raw)
    if knob.kind is KnobKind.JSON_KEY:
        if raw is None:
            return None
        found, value = json_get(_json_object(raw, knob), knob.keys)
        return _json_text(value) if found and value is not None else None
    return raw


def _occurrences(
    words: Sequence[str], knob: Knob, engine: Engine, flags: Collection[str] | None
) -> list[tuple[int, int, str]]:
    assert knob.arg is not None
    arg = canonical_arg(knob.arg, engine)
    spans = []
    for start, count, name, _ in _options(words, engine, flags):
        if name == arg or _negated(name, engine) == arg:
            spans.append((start, count, words[start]))
    return spans


def _new_words(
    words: Sequence[str],
    knob: Knob,
    value: str | None,
    engine: Engine,
    flags: Collection[str] | None,
) -> list[str]:
    """The words that give the knob ``value`` (none: the engine's default or off)."""
    assert knob.arg is not None
    if knob.kind is KnobKind.FLAG:
        if value == ON:
            return [knob.arg]
        return [f"--no-{knob.arg[2:]}"] if value == OFF and engine.negatable_flags else []
    if knob.kind is KnobKind.JSON_KEY:
        raw = arg_values(words, engine, flags).get(canonical_arg(knob.arg, engine))
        text = json_key_set(raw, knob, value)
        return [] if text is None else [knob.arg, text]
    return [] if value is None else [knob.arg, value]


def set_words(
    words: Sequence[str],
    knob: Knob,
    value: str | None,
    engine: Engine,
    flags: Collection[str] | None = None,
) -> list[str]:
    """``words`` edited so that the engine reads ``value`` for the knob (None: unset it).

    Every occurrence of the argument goes (with the parser's ``flags``, its abbreviations too,
    so the engine gets one value); the new one takes the place of the last (or comes last), in
    the form the last one used (``--x=v`` or ``--x v``).
    """
    value = knob.normalize(value)
    spans = _occurrences(words, knob, engine, flags)
    new = _new_words(words, knob, value, engine, flags)
    if spans and len(new) == 2 and "=" in spans[-1][2]:
        new = [f"{new[0]}={new[1]}"]
    at = spans[-1][0] if spans else len(words)
    drop = {i for start, count, _ in spans for i in range(start, start + count)}
    head = [w for i, w in enumerate(words[:at]) if i not in drop]
    tail = [w for i, w in enumerate(words[at:], start=at) if i not in drop]
    return [*head, *new, *tail]
