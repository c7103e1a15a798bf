"""A ``--json`` document typed end to end: a contract's encoding plus its words (pure).

A command's ``--json`` document is the encoded contract plus words (issue 31): :class:`Worded`
holds the contract (any type the codec encodes, through ``kind`` when its encoding is not its own
class's: a check's flat shape) and two dataclasses of words: ``head``, whose keys come before the
contract's, and ``words``, whose keys come after; a word named as a key of the contract takes
that key's place (a verification with its checks' reasons in place of the bare verification).
A word may itself be a :class:`Worded` (or a list of them): the codec encodes it the same way, so
a builder in report/ composes typed values and never edits a dict.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from servelab.core.ledger.codec import JsonObject, encode
from servelab.report.jsontext import json_text

__all__ = ["Worded", "document_text"]

C = TypeVar("C")
W = TypeVar("W")


class Worded(Generic[C, W]):
    """``contract``'s encoding (as ``kind``, default its own class) with ``head``'s words before
    its keys and ``words``' after (each a dataclass of words, or None: none), without the keys
    named in ``omit`` (a part the document leaves out when it is empty). Not a dataclass
    itself: the codec encodes it whole, never field by field."""

    __slots__ = ("contract", "head", "kind", "omit", "words")

    def __init__(
        self, contract: C, words: W | None = None, *, head: object | None = None,
        kind: object | None = None, omit: tuple[str, ...] = (),
    ) -> None:  # fmt: skip
        self.contract, self.words, self.head, self.kind = contract, words, head, kind
        self.omit = omit

    def _encoded(self) -> JsonObject:
        """The document as JSON-ready values (what the codec's :func:`encode` gives for it): the
        one place a contract and its words merge."""
        body = encode(self.contract, self.kind)
        head = {} if self.head is None else encode(self.head)
        tail = {} if self.words is None else encode(self.words)
        merged = {**head, **body, **tail}
        return {key: value for key, value in merged.items() if key not in self.omit}

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        """The codec encodes a worded value (alone or inside a dataclass of words) as the merge
        of its contract's encoding and its words'."""
        return core_schema.any_schema(
            serialization=core_schema.plain_serializer_function_ser_schema(cls._encoded)
        )


def document_text(document: Worded[C, W]) -> str:
    """The text a command prints for ``document`` (:func:`~servelab.report.jsontext.json_text`)."""
    return json_text(encode(document))
