"""``servelab verify [SERVICE...]``: layered verification (config, live, health, e2e).

Exit 0 only if every check passes, 1 otherwise, 2 on a bad spec. It holds the deployment's change
lock as it reads (:attr:`~servelab.io.lock.Hold.INSPECT`): during a restart, ``up``, ``down`` or a
rolling restart it refuses naming the holder, or waits with ``--wait``. Every verification is
recorded in the ledger (``--ledger PATH``, else ``$SERVELAB_LEDGER``, else
``<state_dir>/ledger.db``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from servelab.cli.answeropts import answer_probes_option
from servelab.cli.boundary import EXIT_FAILED, EXIT_OK, json_option, print_json, run
from servelab.cli.common import SpecAndLedger, ledger_option, progress_when, spec_option
from servelab.cli.numbers import Whole
from servelab.cli.options import wait_option
from servelab.cli.proxy import ProxyOptions, proxy_env, proxy_options
from servelab.cli.sharedoption import Parsed
from servelab.core.options import parse_positive_seconds
from servelab.core.verify.contract import VerifyReport
from servelab.io.lock import Hold
from servelab.ops.context import Operation
from servelab.ops.verify.e2e import E2EOptions
from servelab.ops.verify.verify import LAYERS, verify
from servelab.report.verify import render_verify, verify_json

__all__ = [
    "verify_command",
]


async def _verify(
    where: SpecAndLedger, services: list[str], layers: tuple[str, ...], e2e: E2EOptions
) -> VerifyReport:
    loaded = where.deployment()
    say = progress_when(sys.stderr.isatty())
    with where.ledger() as ledger:
        async with Operation(loaded, ledger=ledger, progress=say) as op:
            return await verify(op, services or None, layers=layers, e2e=e2e)


@click.command("verify")
@click.argument("services", nargs=-1)
@spec_option
@json_option
@ledger_option
@click.option(
    "--layer",
    "layers",
    multiple=True,
    type=click.Choice(LAYERS),
    help="Only these layers (repeatable). Default: all four.",
)
@click.option(
    "--e2e-timeout",
    type=Parsed("SECONDS", parse_positive_seconds),
    default="120",
    show_default=True,
    help="Seconds the e2e chat completion may take (a cold first request is slow).",
)
@click.option("--e2e-max-tokens", type=Whole(1, 4096), default=16, show_default=True)
@answer_probes_option()
@click.option(
    "--rebase-answers",
    is_flag=True,
    help="Store this verify's answers as the references anew (only when they pass the checks "
    "that need no reference).",
)
@proxy_options
@wait_option
@click.pass_context
def verify_command(
    ctx: click.Context,
    services: tuple[str, ...],
    spec_path: Path | None,
    as_json: bool,
    ledger_path: Path | None,
    layers: tuple[str, ...],
    e2e_timeout: float,
    e2e_max_tokens: int,
    answer_probes: int,
    rebase_answers: bool,
    proxy: ProxyOptions,
    wait: bool,
) -> None:
    """Verify SERVICE... (default: all) in layers; every failure comes with a reason.

    \b
    config  each declared knob in the env file vs the spec and the file's last backup
    live    the running process's environment (/proc/PID/environ) vs the env file
    health  readiness endpoints (the router's /readiness, the workers' /health)
    e2e     a streaming chat completion through the router: status, TTFT, cold/warm;
            then greedy answer probes against the ledger's references (a changed answer
            fails, and says whether it went wrong at the KV hand-off)
    """
    proxy.route("http://check")  # a bad --proxy or *_PROXY is a usage error before any work
    e2e = E2EOptions(
        timeout_s=e2e_timeout, max_tokens=e2e_max_tokens, answer_probes=answer_probes,
        rebase_answers=rebase_answers, proxy=proxy.proxy, no_proxy=proxy.bypass,
        env=proxy_env(os.environ),
    )  # fmt: skip
    chosen = tuple(layer for layer in LAYERS if layer in layers) if layers else LAYERS
    where = SpecAndLedger(spec_path, ledger_path)
    with where.exclusive(wait=wait, kind=Hold.INSPECT):  # outside the loop: a wait is a sleep
        report = run(_verify(where, list(services), chosen, e2e))
    if as_json:
        print_json(verify_json(report))
    else:
        click.echo(render_verify(report), nl=False)
    ctx.exit(EXIT_OK if report.ok else EXIT_FAILED)
