"""A config YAML file's bytes made into a document, bounded before any work (pure).

What an operator's ``--config`` file may hold is checked before it is parsed, and what the parser
may build is capped while it builds:

- at most :data:`MAX_CONFIG_BYTES` bytes (an engine's settings fit in a few kilobytes);
- UTF-8 text (a UTF-8 byte order mark is dropped, as Python's YAML reader drops it): a UTF-16 or
  UTF-32 byte order mark (``\\xff\\xfe``), bytes that are not UTF-8, or control characters (a
  binary file) are refused, naming the file and the line, never read as an empty file;
- no anchors and no aliases (``&a`` / ``*a``): an alias bomb (nine levels of nine aliases) would
  build billions of nodes from a few hundred bytes, so the first anchor is refused, in
  microseconds; an engine's settings never need one;
- at most :data:`MAX_DEPTH` levels of nesting.

Every refusal and every syntax error is a :class:`~servelab.errors.KnobError` naming the file and
the line, never quoting it: a malformed ``api-key: "sk-...`` line stays out of the message (and so
out of stderr, ``--json`` and the ledger).

PyYAML is imported when a file is parsed (about 10 ms of CPU a process): a simulated engine or a
command started without ``--config`` skips it.
"""

from __future__ import annotations

import codecs
import re
from typing import TYPE_CHECKING, Any

from servelab.errors import KnobError

if TYPE_CHECKING:
    import yaml

__all__ = ["MAX_CONFIG_BYTES", "MAX_DEPTH", "config_text", "load_config", "too_large", "top_keys"]

#: The largest config file read.
MAX_CONFIG_BYTES = 256 * 1024
#: The deepest nesting of mappings and lists read.
MAX_DEPTH = 32

_WIDE_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
#: Control characters no YAML text holds (tab, newline and carriage return are fine).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: A quoted fragment of a parser's message (it may hold a piece of the line).
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def too_large(source: str) -> KnobError:
    """The one refusal of a config file over :data:`MAX_CONFIG_BYTES` (bad input, exit 2), from
    its parser and from its reader alike."""
    return KnobError(f"{source}: larger than {MAX_CONFIG_BYTES:,} bytes, the most a config file "
                     "is read up to")  # fmt: skip


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def config_text(data: bytes, source: str) -> str:
    """``data`` as text, or a :class:`KnobError` naming ``source`` (and the line) when it is too
    large, not UTF-8, or binary."""
    if len(data) > MAX_CONFIG_BYTES:
        raise too_large(source)
    if data.startswith(_WIDE_BOMS):
        raise KnobError(f"{source}:1: not UTF-8 (a UTF-16 or UTF-32 byte order mark)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = _line_of(data, exc.start)
        raise KnobError(f"{source}:{line}: not UTF-8 text (byte {exc.start})") from None
    bad = _CONTROL.search(text)
    if bad is not None:
        line = text.count("\n", 0, bad.start()) + 1
        raise KnobError(f"{source}:{line}: a control character: not a YAML text file")
    return text


def _loader() -> type[yaml.SafeLoader]:
    """libyaml's loader when PyYAML was built with it (a hundred times faster), else PyYAML's
    own."""
    import yaml

    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return loader


def _refusal(source: str, event: yaml.Event, what: str) -> KnobError:
    line = event.start_mark.line + 1 if event.start_mark is not None else 0
    return KnobError(f"{source}:{line}: {what}")


def _check_events(text: str, source: str) -> None:
    """Refuse an anchor, an alias or a nesting deeper than :data:`MAX_DEPTH` as the parser
    meets it, before any node is built."""
    import yaml

    opens = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    closes = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    depth = 0
    for event in yaml.parse(text, Loader=_loader()):
        if isinstance(event, yaml.AliasEvent):
            raise _refusal(source, event, "an alias (*name): config files are read without aliases")
        if getattr(event, "anchor", None) is not None:
            raise _refusal(
                source, event, "an anchor (&name): config files are read without anchors"
            )
        depth += isinstance(event, opens) - isinstance(event, closes)
        if depth > MAX_DEPTH:
            raise _refusal(source, event, f"nested deeper than {MAX_DEPTH} levels")


def _syntax(exc: yaml.YAMLError, source: str) -> KnobError:
    mark = getattr(exc, "problem_mark", None)
    where = f"{source}:{mark.line + 1}" if mark is not None else source
    problem = getattr(exc, "problem", None) or "cannot be parsed"
    return KnobError(f"{where}: not valid YAML ({_QUOTED.sub('…', str(problem))})")


def load_config(data: bytes | str, source: str) -> Any:
    """The YAML document in ``data`` (None when empty), bounded as the module says."""
    import yaml

    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    text = config_text(raw, source)
    try:
        _check_events(text, source)
        return yaml.load(text, Loader=_loader())
    except yaml.YAMLError as exc:
        raise _syntax(exc, source) from None
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:
        if isinstance(exc, KnobError):
            raise
        raise KnobError(f"{source}: not valid YAML ({type(exc).__name__})") from None


def top_keys(data: bytes | str, source: str) -> list[tuple[str, int]]:
    """The top-level mapping's plain keys (a string each) and the line (from 0) each is written
    on, however it is written (``key: v``, a complex key ``? key`` then ``: v``, a flow mapping
    ``{key: v}``), bounded as :func:`load_config`; none when the document is no mapping."""
    import yaml

    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    text = config_text(raw, source)
    try:
        _check_events(text, source)
        root = yaml.compose(text, Loader=_loader())
    except yaml.YAMLError as exc:
        raise _syntax(exc, source) from None
    if not isinstance(root, yaml.MappingNode):
        return []
    return [(key.value, key.start_mark.line) for key, _ in root.value
            if isinstance(key, yaml.ScalarNode) and isinstance(key.value, str)]  # fmt: skip
