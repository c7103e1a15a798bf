"""Secrets in prose and in scripts' traces (issue 38, the nineteenth pass, H1): a start script run
with ``sh -x`` printed ``+ docker login -u bob -p X registry`` into the log tail ``up`` and the
ledger quote, and prose that says a secret within a clause (``Password for user admin: X``,
``password changed to X``, ``the key is X``) or a client's own option for it (``redis-cli -a X``,
``htpasswd -b f bob X``), userinfo without a scheme (``bob:X@host``) and a word shaped like a
generated secret standing alone were kept. One policy: :func:`~servelab.core.redaction.redact`."""

from __future__ import annotations

import pytest

from servelab.core.redaction import REDACTED, redact

X = "Jw4nRt7yUi2o"
#: The same forms with a secret that is not a generated-looking word (a person's password): the
#: class rules mask it, not the rule for a word shaped like a generated secret standing alone.
WEAK = "hunter2x9"


@pytest.mark.parametrize(
    ("form", "kept"),
    [("+ docker login -u bob -p {} registry.x", "+ docker login -u bob -p *** registry.x"),
     ("Password for user admin: {}", "Password for user admin: ***"),
     ("password changed to {}", "password changed to ***"),
     ("login failed for admin/{}", "login failed for admin/***"),
     ("password \u21d2 {}", "password \u21d2 ***"),
     ("the key is {}", "the key is ***"),
     ("redis-cli -a {}", "redis-cli -a ***"),
     ("redis-cli -h db -p 6379 -a {} ping", "redis-cli -h db -p 6379 -a *** ping"),
     ("htpasswd -b f bob {}", "htpasswd -b f bob ***"),
     ("htpasswd -nb bob {}", "htpasswd -nb bob ***"),
     ("Incorrect API key provided: {}.", "Incorrect API key provided: ***."),
     ("set password to {}", "set password to ***"),
     ("the secret key is {}", "the secret key is ***"),
     ("password for bob is {}", "password for bob is ***"),
     ("pass {}", "pass ***"),
     ("psw={}", "psw=***"),
     ("Login: bob / {}", "Login: bob / ***"),
     ("bob:{}@host", "bob:***@host"),
     ("git clone bob:{}@git.example:2222/repo", "git clone bob:***@git.example:2222/repo"),
     ("password;{}", "password;***"),
     ("password, {}", "password, ***"),
     ("my password is {}", "my password is ***"),
     ("mosquitto_pub -h broker -u bob -P {} -t t", "mosquitto_pub -h broker -u bob -P *** -t t"),
     ("+ docker login -u bob -p '{}' r.example", "+ docker login -u bob -p '***' r.example"),
     ("mysql -u root -p {} app", "mysql -u root -p *** app"),
     ("password \u27f6 {}", "password \u27f6 ***"),
     ("password ==> {}", "password ==> ***")],
    ids=["docker-login-trace", "password-for-user", "changed-to", "login-failed-slash",
         "double-arrow", "the-key-is", "redis-cli-a", "redis-cli-a-later", "htpasswd-b",
         "htpasswd-nb", "openai-wording", "set-to", "secret-key-is", "password-for-is", "pass",
         "psw", "login-slash", "userinfo-no-scheme", "userinfo-git", "semicolon", "comma",
         "my-password-is", "mosquitto-P", "docker-login-quoted", "mysql-p-space", "long-arrow",
         "ascii-arrow"],
)  # fmt: skip
@pytest.mark.parametrize("secret", [X, WEAK])
def test_a_nineteenth_pass_form_is_masked(form: str, kept: str, secret: str) -> None:
    said = redact(form.format(secret))
    assert secret not in said and said == kept, said


@pytest.mark.parametrize(
    "text",
    ["WARNING! Using --password via the CLI is insecure. Use --password-stdin.",
     "--token is required", "pass the request to decode", "the password is strong enough",
     "password reset for user42", "login failed for admin", "Login succeeded",
     "the key is missing", "key rotated to v2.1", "token usage: 0.00, #running-req: 0",
     "Token indices sequence length is longer than the specified maximum sequence length "
     "for this model (5000 > 4096).", "ssh -p 22 host", "ssh -p 2222 user@host",
     "docker run -p 8080:80 img", "mkdir -p /var/lib/servelab/run", "cp -p a.txt b.txt",
     "pytest -p no:cacheprovider", "redis-cli -p 6379 ping", "htpasswd -c f bob",
     "nginx:1.25@sha256:0123abcdef", "image: nginx:latest@sha256:abcdef0123",
     "git@github.com:org/repo.git", "10:30@office", "pass rate 98%", "the key to the cache",
     "Issue 38, fifteenth pass (M1/M2): DEL", "the seventh pass, H5/H6/M7/M10, through the CLI",
     "that first token \u2192 the client's first content byte (the way back: the decode \u2192",
     "systemctl show -p NeedDaemonReload --value x.service",
     "(`HF_TOKEN hf_...` without its `=`): `error: env/decode.env:3: not a NAME=VALUE line",
     "The pass key is 123456.", "mailto:bob@example.com"],
)  # fmt: skip
def test_prose_and_commands_without_a_secret_stay(text: str) -> None:
    """No over-masking: docker's own warning (a secret flag then prose: ``via`` is no secret),
    prose after a secret word with no secret-shaped word, ports after ``-p``, paths, a digest
    after an image's tag, an scp-like git address."""
    assert redact(text) == text


@pytest.mark.parametrize(
    "word",
    [X, "aZ3kP9qLm2Xw", "Tq5Wn8Yx3V0pLk7Hr2", "eyJhbGciOiJIUzI1NiJ9x", "b7Rk2MwQ9zPx4Ls8"],
)
def test_a_word_shaped_like_a_generated_secret_is_masked_wherever_it_stands(word: str) -> None:
    """Free text (a log tail, a note, a title, a server's error): a run of 10 or more letters
    and digits, upper and lower case and digits, with no words in it, is masked on its own."""
    said = redact(f"starting up with {word} in the environment")
    assert word not in said and said == f"starting up with {REDACTED} in the environment"


@pytest.mark.parametrize(
    "text",
    ["architectures: Qwen2ForCausalLM", "loaded DeepseekV3ForCausalLM", "GPT2LMHeadModel",
     "Wav2Vec2ForCTC", "Gemma3ForConditionalGeneration", "Qwen2.5-7B-Instruct",
     "meta-llama/Llama-3.1-8B-Instruct", "E2EOptions", "ProbingE2E", "HttpVersion11",
     "0xFFFFFFFF", "commit 3f2a9c0d1e4b5a6978d0c1b2a3f4e5d6c7b8a9f0", "id 8f3a2b1c9d4e5f60",
     "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
     "NVIDIA-H100-80GB-HBM3", "RTX4090", "v0.4.6.post1-cu124", "Qwen2MoeForCausalLM",
     "Phi3ForCausalLM", "Float8E4M3FN", "LlamaForCausalLM", "bfloat16", "torch.float16"],
)  # fmt: skip
def test_names_ids_hashes_and_versions_are_not_generated_secrets(text: str) -> None:
    assert redact(text) == text


def test_a_pairs_value_is_the_key_rules() -> None:
    """A word shaped like a generated secret that is a pair's value is judged by its key: an
    ordinary header's id stays (the header fuzz tier's ``X-Request-Id: ...``), a secret key's
    value is masked, the same word standing alone is masked."""
    assert redact(f"X-Request-Id: {X}") == f"X-Request-Id: {X}"
    assert redact(f'{{"id": "{X}"}}') == f'{{"id": "{X}"}}'
    assert redact(f"X-Api-Key: {X}") == "X-Api-Key: ***"
    assert redact(f"psw={X}") == "psw=***"
    assert redact(f"+ echo {X}") == "+ echo ***"


def test_hostile_clauses_take_linear_time() -> None:
    import time

    # a quarter of a megabyte each: a quadratic clause (a regex retrying from every position)
    # takes minutes at this size, a linear one well under a second
    for text in ["password for " * 25_000, "key is " * 37_500, "-p " * 75_000,
                 "htpasswd -b " * 25_000, "a:b@" * 50_000, "Jw4nRt7yUi2o" * 20_000,
                 "login " + "x " * 125_000, "redis-cli -a " * 20_000]:  # fmt: skip
        started = time.perf_counter()
        redact(text)
        assert time.perf_counter() - started < 10, text[:30]
