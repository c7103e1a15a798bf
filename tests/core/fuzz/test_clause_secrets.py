"""The fuzz tier over a secret said in a clause or typed on a command line (issue 38, the
nineteenth pass): after a secret-looking word and a few words then a link (``Password for user
admin: X``, ``password changed to X``, ``the key is X``), right after such a word with any
separator (``password ⇒ X``, ``pass X``, ``password;X``), or as a client's password option
(``docker login -p X``, ``redis-cli -a X``, ``htpasswd -b f u X``, ``bob:X@host``), a planted
random secret never survives, whatever text comes before it on the lines above."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from servelab.core.redaction import redact
from tests.core.fuzz.support import texts

words = st.sampled_from(
    ["password", "Password", "passwd", "passphrase", "secret", "the secret key", "token",
     "api key", "API key", "key", "credentials", "psw", "pwd", "login", "Login", "PASSWORD"]
)  # fmt: skip
middles = st.sampled_from(
    ["", "for user admin", "for bob", "changed", "provided", "was reset and", "of the db",
     "for admin on host-3"]
)  # fmt: skip
links = st.sampled_from(
    ["is", "was", "to", ":", "/", "->", "=>", "==>", "\u21d2", "\u2192", "\u27f6", "-", "as",
     "\u2014"]
)  # fmt: skip
#: Shaped like a secret: letters and digits mixed, the characters keys are made of.
secrets = st.from_regex(r"[A-Za-z]{2,8}[0-9][A-Za-z0-9_+/~-]{4,40}", fullmatch=True)
#: The same without what ends a URL's user information or a path (``:``, ``/``, ``@``).
plain = st.from_regex(r"[A-Za-z]{2,8}[0-9][A-Za-z0-9_+~]{4,40}", fullmatch=True)
quotes = st.sampled_from(["", '"', "'", "`"])
tails = st.sampled_from(["", ".", " was rotated", ", then", ")", "\n", " and more", "!"])


@given(noise=texts, word=words, middle=middles, link=links, quote=quotes, secret=secrets,
       tail=tails)  # fmt: skip
def test_a_secret_after_a_link_in_a_secret_words_clause_never_survives(
    noise: str, word: str, middle: str, link: str, quote: str, secret: str, tail: str
) -> None:
    said = f"{word} {middle} {link} {quote}{secret}{quote}".replace("  ", " ")
    text = f"{noise.replace(chr(10), ' ')}\n{said}{tail}"
    assert secret not in redact(text), repr(text)


immediate = st.sampled_from(
    ["pass ", "password;", "password, ", "password \u21d2 ", "token: ", "secret ==> ",
     "Passwd - ", "api_key \u2192 ", "pwd\t"]
)  # fmt: skip


@given(noise=texts, head=immediate, secret=secrets, tail=tails)
def test_a_secret_right_after_a_secret_word_never_survives(
    noise: str, head: str, secret: str, tail: str
) -> None:
    text = f"{noise.replace(chr(10), ' ')}\n{head}{secret}{tail}"
    assert secret not in redact(text), repr(text)


commands = st.sampled_from(
    ["+ docker login -u bob -p {}", "podman login --username bob -p '{}' quay.io",
     "redis-cli -h db -p 6379 -a {} ping", "htpasswd -b /etc/nginx/htpasswd bob {}",
     "htpasswd -nbB bob {}", "git clone bob:{}@git.example/repo", "mysql -u root -p {} app",
     "mosquitto_sub -h b -u bob -P {} -t x", "helm registry login r.example -u bob -p {}",
     "+ curl -u bob:{} https://h/", "docker login --password {} r.example"]
)  # fmt: skip


@given(noise=texts, command=commands, secret=plain, tail=tails)
def test_a_password_on_a_command_line_never_survives(
    noise: str, command: str, secret: str, tail: str
) -> None:
    text = f"{noise.replace(chr(10), ' ')}\n{command.format(secret)}{tail}"
    assert secret not in redact(text), repr(text)
