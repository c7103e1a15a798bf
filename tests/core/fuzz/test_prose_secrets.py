"""The fuzz tier over a secret typed in prose (issue 38, the sixteenth pass): after a bare
secret-looking word (``secret X``, ``my password is X``, ``token X``, ``api key X``), with no
``:`` or ``=``, a value shaped like a secret is masked whatever text comes before it; prose after
such a word (words, numbers with their units, versions) stays as written."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from servelab.core.redaction import redact
from tests.core.fuzz.support import texts

words = st.sampled_from(
    [
        "secret",
        "Secret",
        "SECRET",
        "password",
        "passwd",
        "passphrase",
        "token",
        "Token",
        "api key",
        "api-key",
        "API_KEY",
        "passcode",
    ]
)
links = st.sampled_from(["", "is ", "was ", "IS "])
#: Shaped like a secret: letters and digits mixed, the characters keys are made of.
secrets = st.from_regex(r"[A-Za-z]{2,8}[0-9][A-Za-z0-9_+/~-]{4,40}", fullmatch=True)
leads = st.sampled_from(["", "note: ", "the ", "my ", "- ", "rotated; ", "(", "\t"])
tails = st.sampled_from(["", ".", " was rotated", ", then", ")", "\n", " and more"])


@given(noise=texts, word=words, link=links, secret=secrets, lead=leads, tail=tails)
def test_a_secret_after_a_bare_secret_word_never_survives(
    noise: str, word: str, link: str, secret: str, lead: str, tail: str
) -> None:
    text = f"{noise.replace(chr(10), ' ')}\n{lead}{word} {link}{secret}{tail}"
    assert secret not in redact(text), repr(text)


prose = st.lists(
    st.sampled_from(["the", "sauce", "is", "strong", "enough", "rotated", "reset", "for", "user",
                     "please", "garlic", "plan", "kept", "12.5ms", "4096", "0.75", "v2.1",
                     "12%", "3/4", "1,024", "10:30", "abc", "request", "tokens"]),
    min_size=1, max_size=6,
)  # fmt: skip


@given(lead=leads, word=words, link=links, after=prose)
def test_prose_after_a_secret_word_is_kept(
    lead: str, word: str, link: str, after: list[str]
) -> None:
    text = f"{lead}{word} {link}{' '.join(after)}"
    assert redact(text) == text
