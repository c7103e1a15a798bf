"""The refusals to act on another deployment's things are typed and worded in report/ (issue 38,
eighteenth pass): each error carries its refusal, its words come from
:func:`~servelab.report.refusals.refusal_words`, and the failure boundary prints them."""

from __future__ import annotations

import pytest

from servelab.cli.boundary import _message, exit_code
from servelab.core.deploy.refusals import (
    AnothersRun,
    CaseRefused,
    NotAsLeft,
    PortHeld,
    PortRefused,
    Recorded,
    RouterOnWorkerPort,
    RunRefused,
    SpecToUse,
)
from servelab.report.refusals import refusal_words


def test_another_deployments_mark_is_quoted_escaped_and_cut() -> None:
    """A mark is the other process's to set: its control characters escaped, cut; one without a
    deployment name was quoted raw (its escape sequences reached the terminal)."""
    raw = PortHeld("prefill", 9, "local", 7, "\x1b[2Jno-name")
    said = refusal_words(raw)
    assert "\x1b" not in said and "marked \\x1b[2Jno-name" in said, said
    long = refusal_words(PortHeld("prefill", 9, "local", 7, "d/" + "s" * 10_000))
    assert len(long) < 400 and "…" in long


def test_a_router_on_a_workers_port_is_named_escaped_and_cut() -> None:
    """The seventeenth pass, H3: the router's process title is that process's to set."""
    said = refusal_words(RouterOnWorkerPort("decode", "decode", 9, "local", 7, "sglang::router"))
    assert said == (
        "decode: port 9 on local is held by pid 7, a router (sglang::router), not a decode "
        "worker: this spec's decode url points at a router (another deployment's?); not adopted "
        "as its worker, not started over it (give decode its own port)"
    )
    odd = refusal_words(RouterOnWorkerPort("p", "prefill", 9, "local", 7, "\x1b]0;x" * 100))
    assert "\x1b" not in odd and "…" in odd and len(odd) < 400, odd


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (RunRefused(AnothersRun("ab", 3, "beta", SpecToUse("b.toml"))), 2),
        (CaseRefused(NotAsLeft(Recorded.BISECTION, 4, "decode", "K", "1", "2", case_id=1)), 2),
        (PortRefused(PortHeld("prefill", 9, "local", 7, "beta/prefill@127.0.0.1:9")), 1),
    ],
)
def test_the_boundary_prints_the_refusals_words(
    error: RunRefused | CaseRefused | PortRefused, code: int
) -> None:
    assert _message(error) == refusal_words(error.refusal)
    assert exit_code(error) == code
    assert str(error).startswith(type(error.refusal).__name__ + "(")  # its fields, not its words


def test_a_restore_of_a_service_this_deployment_lacks_says_so() -> None:
    said = refusal_words(NotAsLeft(Recorded.REVERT, 2, "gone", "K", None, "1", missing=True))
    assert said == (
        "case 2's revert of knob:gone/K was recorded before a change named its deployment, and "
        "this deployment has no service gone: restore it with -f the spec it ran with"
    )


def test_words_of_each_refusal_as_they_were() -> None:
    assert refusal_words(AnothersRun("tune", 5, "alpha@127.0.0.1:1", SpecToUse("a.toml"))) == (
        "tune 5 was alpha@127.0.0.1:1's (spec a.toml); resume it with -f a.toml"
    )
    embedded = refusal_words(AnothersRun("ab", 1, "x", SpecToUse("<embedded>", embedded=True)))
    assert embedded == (
        "A/B 1 was x's (the embedded default spec); resume it without -f, where no servelab.toml is"
    )
    assert refusal_words(NotAsLeft(Recorded.AB, 6, "decode", "K", None, "3")) == (
        "A/B 6 was recorded before a run named its deployment, and this deployment's decode K "
        "is unset, not its original 3 (another deployment's run, or a value changed since): "
        "resume it with -f the spec it ran with, or start a new one"
    )
