"""The answer checks' options: ``--answers`` (ab, tune, case) and ``--answer-probes`` (verify,
soak), declared once each (``tests/cli/test_options.py`` holds them alike everywhere)."""

from __future__ import annotations

import click

from servelab.cli.numbers import Whole
from servelab.cli.sharedoption import Decorator
from servelab.core.answers.contract import AnswersConfig, AnswersMode, AnswersUnchecked
from servelab.report.answers import unkeepable_phrase

__all__ = ["answer_probes_option", "answers_config", "answers_option", "refuse_unkeepable"]


def answers_option() -> Decorator:
    """``--answers`` as ``answers: str`` (an :class:`~servelab.core.answers.contract.AnswersMode`
    value): answer probes in every arm visit of ``ab``, ``tune`` and ``case``."""
    return click.option(
        "--answers", type=click.Choice([m.value for m in AnswersMode]),
        default=AnswersMode.GATE.value, show_default=True,
        help="Greedy answer probes mixed into every arm visit (at most 5% of its requests), "
        "checked against references from the baseline: off; check (measured and shown); gate "
        "(and a candidate that changes answers is never a win).",
    )  # fmt: skip


def answer_probes_option() -> Decorator:
    """``--answer-probes`` as ``answer_probes: int``: the greedy probes ``verify``'s e2e layer
    and ``soak`` send (verify after its e2e request; soak at C1 before its sessions and again
    under load), checked against the deployment's references in the ledger."""
    return click.option(
        "--answer-probes", type=Whole(0, 24), default=3, show_default=True,
        help="Greedy answer probes (a plain one, a tool call, a pass key in a long context), "
        "checked without a reference and against verify's references in the ledger (0: none).",
    )  # fmt: skip


def answers_config(mode: str) -> AnswersConfig | None:
    """``--answers``' config (None: off)."""
    config = AnswersConfig(AnswersMode(mode))
    return config if config.on else None


def refuse_unkeepable(
    answers: AnswersConfig | None, why: AnswersUnchecked | None, option: str
) -> None:
    """``--answers gate`` with ``option`` (``--keep better``), which can keep only a candidate
    whose answers are shown unchanged, where no probe can be sent (``why``): refused before
    anything runs. It used to run the whole A/B and keep the faster arm unchecked."""
    if answers is not None and answers.mode is AnswersMode.GATE and why is not None:
        raise click.UsageError(unkeepable_phrase(option, why))
