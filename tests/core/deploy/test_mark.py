"""A process's mark, the one parser and formatter (core/deploy/mark.py): every mark the formatter
writes parses back to itself, any text parses without raising, and the edge cases the grammar
names (a name holding '/', '@' or '#', an IPv6 address, an older mark without its place or
address, empty parts, a '#' before any '@')."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servelab.core.deploy.mark import Mark
from servelab.core.deploy.whose import Whose, others_of
from servelab.io.hosts.ownrecord import made_by, named_deployment, same_deployment
from servelab.io.hosts.processes import service_mark

_ANY = st.text(max_size=40)
_MARKISH = st.text(alphabet="/@#:[]ab1\x00\ufeff", max_size=40)
_NAME = st.text(min_size=1, max_size=20)
_SERVICE = st.text(max_size=12).filter(lambda s: not set(s) & set("/@#"))
_ADDRESS = st.text(max_size=20).filter(lambda s: not set(s) & set("/#"))
_PLACE = st.text(max_size=20).filter(lambda s: "/" not in s)


@given(_NAME, _SERVICE, st.one_of(st.none(), _ADDRESS), st.one_of(st.none(), _PLACE))
def test_every_formatted_mark_parses_back(
    name: str, service: str, address: str | None, place: str | None
) -> None:
    mark = Mark(name, service, address, place)
    assert Mark.parse(str(mark)) == mark
    assert str(Mark.parse(str(mark))) == str(mark)


@given(_NAME, _SERVICE, st.one_of(st.none(), _ADDRESS), st.one_of(st.none(), _PLACE))
def test_service_mark_is_the_formatter(
    name: str, service: str, address: str | None, place: str | None
) -> None:
    text = service_mark(name, service, address, place)
    assert Mark.parse(text) == Mark(name, service, address, None if address is None else place)


@given(st.one_of(_ANY, _MARKISH, st.binary(max_size=40).map(lambda b: b.decode("latin-1"))))
def test_any_text_parses_without_raising_and_losslessly(text: str) -> None:
    mark = Mark.parse(text)
    assert mark is None or str(mark) == text
    assert (mark is None) == (not text.rpartition("/")[0])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("test-pd/decode@local:9#0123456789abcdef",
         Mark("test-pd", "decode", "local:9", "0123456789abcdef")),
        ("test-pd/decode@local:9", Mark("test-pd", "decode", "local:9")),  # older: no place
        ("test-pd/decode", Mark("test-pd", "decode")),  # older still: no address
        ("a/b/decode@local:9#p", Mark("a/b", "decode", "local:9", "p")),  # '/' in the name
        ("a@b#c/decode@local:9", Mark("a@b#c", "decode", "local:9")),  # '@', '#' in the name
        ("n/decode@[::1]:8000#p", Mark("n", "decode", "[::1]:8000", "p")),  # IPv6
        ("n/decode@user@h:1", Mark("n", "decode", "user@h:1")),  # '@' in the address
        ("n/decode@h:1#p#q", Mark("n", "decode", "h:1", "p#q")),  # '#' in the place
        ("n/", Mark("n", "")),  # a name alone: the deployment's mark of no service
        ("n/s@", Mark("n", "s", "")),  # an empty address is not none
        ("n/s@#", Mark("n", "s", "", "")),
        ("n/s#x@h:1", Mark("n", "s", None, "x@h:1")),  # '#' first: no address
        ("\x1b[2J/s@h:1", Mark("\x1b[2J", "s", "h:1")),
    ],
)  # fmt: skip
def test_the_grammars_edge_cases(text: str, expected: Mark) -> None:
    assert Mark.parse(text) == expected
    assert str(expected) == text


@pytest.mark.parametrize("text", ["", "/", "/decode@local:9#p", "decode@local:9", "servelab", "@#"])
def test_a_text_naming_no_deployment_is_no_mark(text: str) -> None:
    assert Mark.parse(text) is None


@pytest.mark.parametrize(
    ("parts", "bad"),
    [(("", "s"), "name"), (("n", "a/b"), "service"), (("n", "a@b"), "service"),
     (("n", "a#b"), "service"), (("n", "s", "h#1"), "address"), (("n", "s", "h/1"), "address"),
     (("n", "s", "h:1", "p/q"), "place")],
)  # fmt: skip
def test_parts_that_cannot_be_written_back_are_refused(parts: tuple[str, ...], bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        Mark(*parts)


def test_huge_and_hostile_marks_parse() -> None:
    huge = "n" * 1_000_000 + "/" + "s" * 1_000_000 + "@" + "h" * 1_000_000 + "#" + "\x00" * 10
    mark = Mark.parse(huge)
    assert mark is not None and str(mark) == huge and mark.place == "\x00" * 10
    assert Mark.parse("\ufeffn/s@h:1") == Mark("\ufeffn", "s", "h:1")  # a BOM is the name's


OURS = "n/s@h:1#0123456789abcdef"


def test_a_hash_before_any_at_names_no_address() -> None:
    """The two parsers disagreed here: ``whose._parts`` read no address, ``ownrecord._address``
    the text after the '@' (``named_deployment`` said ``n@h:1 (another state folder)`` for
    ``n/s#p@h:1``). The stricter is kept: what follows a '#' is the place, never an address."""
    found = "n/s#p@h:1"
    assert Mark.parse(found) == Mark("n", "s", None, "p@h:1")
    assert named_deployment(found, OURS) == "n"
    assert others_of(found, OURS).address is None
    assert others_of(found, OURS).whose is Whose.ADDRESS
    assert not same_deployment(found, OURS) and not made_by(found, OURS)


def test_a_place_without_an_address_is_no_older_mark_of_ours() -> None:
    """A recorded value ``n/s#p`` (no address, a place: servelab never wrote one) is not the
    deployment of an older mark ``n/s``, either way round."""
    assert not same_deployment("n/s", "n/s#p") and not same_deployment("n/s#p", "n/s")
    assert not made_by("n/s#p", "n/s") and not made_by("n/s", "n/s#p")
    assert same_deployment("n/s", "n/s@h:1#p") and made_by("n/s", OURS)
