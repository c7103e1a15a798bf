"""What every fuzzed parser must do with any input: give a result or raise one typed
:class:`~servelab.errors.ServelabError` of the bad-input kind the CLI turns into one line and
exit 2 (``SpecError``, ``KnobError``, ``OptionError``, ``TraceError``, ``UrlError``), never
another exception; and the strategies that make hostile inputs (random text, a valid text
mutated, bytes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import strategies as st

from servelab.errors import (
    CaseError,
    KnobError,
    OptionError,
    ServelabError,
    SpecError,
    TraceError,
    UrlError,
)

__all__ = ["BAD_INPUT", "mutated", "result_or_error", "texts", "utf8"]

T = TypeVar("T")

#: The errors the CLI reports as bad input (one line, exit 2).
BAD_INPUT: tuple[type[ServelabError], ...] = (
    SpecError, KnobError, OptionError, TraceError, CaseError, UrlError,
)  # fmt: skip

#: Characters that break parsers: quotes, escapes, separators, controls, a BOM, surrogates' kin.
_NASTY = "\"'\\=:,;#[]{}&*!|>-\t\r\n\x00\x7f\ufeff\u2028é€😀 $`(){}<>%"
texts = st.text(alphabet=st.sampled_from(_NASTY) | st.characters(), max_size=200)


def mutated(base: str) -> st.SearchStrategy[str]:
    """``base`` with a random slice replaced by random text (most of it stays valid)."""

    @st.composite
    def _mutate(draw: st.DrawFn) -> str:
        start = draw(st.integers(0, len(base)))
        end = draw(st.integers(start, min(len(base), start + 20)))
        return base[:start] + draw(texts) + base[end:]

    return _mutate()


def result_or_error(
    parse: Callable[..., T], *args: Any, errors: tuple[type[BaseException], ...] = BAD_INPUT
) -> T | ServelabError:
    """``parse(*args)``, or the typed error it raised (anything else fails the test)."""
    try:
        return parse(*args)
    except errors as exc:
        assert isinstance(exc, ServelabError)
        assert str(exc).strip(), f"{type(exc).__name__} without words"
        assert "\n" not in str(exc).strip() or isinstance(exc, SpecError), repr(str(exc))
        return exc


def utf8(text: str) -> bytes:
    """``text``'s bytes, a lone surrogate included (as a file may hold it)."""
    return text.encode("utf-8", "surrogatepass")
