"""``servelab trace generate``: a seeded sample trace in the Mooncake format, for ``bench --trace``
and ``ab --trace`` (agent sessions whose history grows turn by turn, or a long-tail chat mix).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import orjson
from click.core import ParameterSource

from servelab.cli.boundary import json_option, print_json
from servelab.cli.common import notice
from servelab.cli.options import FORCE_HELP, SEED
from servelab.cli.sharedoption import Parsed
from servelab.core.ledger.codec import encode
from servelab.core.load.trace import DEFAULT_BLOCK_SIZE
from servelab.core.load.tracegen import (
    AgenticShape,
    Capped,
    ChatShape,
    TraceEntry,
    agentic_trace,
    chat_trace,
    check_arrivals,
    check_block_size,
    check_hash_ids,
    check_requests,
    check_resolution,
)
from servelab.core.options import parse_block_size, parse_positive, parse_rate
from servelab.io.files import write_stream, write_to
from servelab.io.overwrite import check_overwrite

__all__ = [
    "trace_group",
]

_AGENTIC, _CHAT = AgenticShape(), ChatShape()


def _lines(entries: Iterator[TraceEntry], counted: list[int]) -> Iterator[bytes]:
    for entry in entries:
        counted[0] += 1
        yield orjson.dumps(encode(entry)) + b"\n"


@click.group("trace")
def trace_group() -> None:
    """Sample traces for bench --trace and ab --trace."""


class _File(click.Path):
    """``trace generate``'s FILE: an empty name is refused as the argument's (``Path("")`` is
    ``.``, the current folder, which the writer then refused with exit 1)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == "":
            self.fail("an empty name names no file", param, ctx)
        return super().convert(value, param, ctx)


def _given(name: str) -> bool:
    """Whether the running command's option ``name`` was given (not left at its default)."""
    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, ParameterSource.DEFAULT)


@trace_group.command("generate")
@click.argument("out", metavar="FILE", type=_File(dir_okay=False, path_type=Path))
@click.option("--kind", type=click.Choice(["agentic", "chat"]), default="agentic",
              show_default=True, help="Agent sessions, or a long-tail chat mix.")  # fmt: skip
@click.option("--sessions", type=Parsed("N", parse_positive), default=str(_AGENTIC.sessions),
              show_default=True, help="agentic: agent sessions in the trace.")  # fmt: skip
@click.option("--turns", type=(int, int), default=_AGENTIC.turns, show_default=True,
              help="agentic: turns per session, from MIN to MAX.")  # fmt: skip
@click.option("--requests", type=Parsed("N", parse_positive), default=str(_CHAT.requests),
              show_default=True,
              help="chat: requests in the trace (agentic: refused, exit 2).")  # fmt: skip
@click.option("--rate", type=Parsed("PER_SECOND", parse_rate), default=None,
              help=f"Arrivals per second: sessions (agentic, default {_AGENTIC.rate:g}) or "
              f"requests (chat, default {_CHAT.rate:g}).")  # fmt: skip
@click.option("--output-tokens", type=Parsed("TOKENS", parse_positive), default=None,
              help=f"Median answer length (default: agentic {_AGENTIC.output_tokens:g}, chat "
              f"{_CHAT.output_tokens:g}).")  # fmt: skip
@click.option("--block-size", type=Parsed("TOKENS", parse_block_size),
              default=str(DEFAULT_BLOCK_SIZE), show_default=True,
              help="Tokens per hash id (give bench --trace-block-size the same).")  # fmt: skip
@click.option("--resolution-ms", type=Parsed("MS", parse_positive), default="1",
              show_default=True, help="Record arrivals at this resolution: 1000 puts them on "
              "whole seconds, as Mooncake's conversation trace records most of its own, so the "
              "arrivals of one second start at one instant (bursts).")  # fmt: skip
@click.option("--force", is_flag=True, help=FORCE_HELP)
@SEED.option()
@json_option
def generate_command(
    out: Path,
    kind: str,
    sessions: int,
    turns: tuple[int, int],
    requests: int,
    rate: float | None,
    output_tokens: int | None,
    block_size: int,
    resolution_ms: int,
    force: bool,
    seed: int,
    as_json: bool,
) -> None:
    """Write a seeded sample trace to FILE (`-`: standard output): the same options and seed
    write the same file."""
    if str(out) != "-":
        check_overwrite(out, force)
    elif as_json:
        raise click.BadParameter(
            "needs a FILE: standard output holds the trace", param_hint="--json"
        )
    if turns[0] < 1 or turns[1] < turns[0]:
        raise click.BadParameter("MIN ≥ 1 and MAX ≥ MIN", param_hint="--turns")
    check_resolution(resolution_ms)
    capped = Capped()
    if kind == "agentic" and _given("requests"):  # it was silently ignored (issue 38)
        raise click.BadParameter(
            "counts a chat trace's requests; an agentic trace's come from its sessions and "
            "turns: give --sessions and --turns (or --kind chat)",
            param_hint="--requests",
        )
    if kind == "agentic":
        agentic = replace(_AGENTIC, sessions=sessions, turns=turns, block_size=block_size,
                          resolution_ms=resolution_ms)  # fmt: skip
        agentic = replace(agentic, rate=rate or agentic.rate,
                          output_tokens=output_tokens or agentic.output_tokens)  # fmt: skip
        check_arrivals(agentic.sessions, agentic.rate)
        check_requests("--sessions", agentic.sessions, agentic.turns[1])
        check_block_size(block_size, agentic.system_blocks, agentic.max_tokens)
        most = agentic.sessions * agentic.turns[1]
        check_hash_ids("--sessions", most, block_size, agentic.max_tokens)
        entries = agentic_trace(agentic, seed=seed, capped=capped)
    else:
        chat = replace(_CHAT, requests=requests, block_size=block_size, rate=rate or _CHAT.rate,
                       output_tokens=output_tokens or _CHAT.output_tokens,
                       resolution_ms=resolution_ms)  # fmt: skip
        check_arrivals(chat.requests, chat.rate)
        check_requests("--requests", chat.requests)
        check_block_size(block_size, chat.system_blocks, chat.max_input)
        check_hash_ids("--requests", chat.requests, block_size, chat.max_input)
        entries = chat_trace(chat, seed=seed, capped=capped)
    counted = [0]
    if str(out) == "-":  # standard output, as the usage says of a FILE of "-"
        write_stream(sys.stdout.fileno(), _lines(entries, counted))
    else:
        write_to(out, _lines(entries, counted))
    if as_json:
        print_json({"out": str(out), "lines": counted[0], "block_size": block_size,
                    "capped": _capped_json(capped)})  # fmt: skip
    notice("wrote", f"{'standard output' if str(out) == '-' else out}: {counted[0]} line(s), "
           f"block size {block_size}")  # fmt: skip
    if capped.any:
        notice("capped", _capped_text(capped))


def _capped_json(capped: Capped) -> dict[str, int]:
    return {"output_cap": capped.output_cap, "input_cap": capped.input_cap,
            "outputs": capped.outputs, "inputs": capped.inputs, "turns": capped.turns}  # fmt: skip


def _capped_text(capped: Capped) -> str:
    """What the caps changed, in one line (only what they did change)."""
    parts = []
    if capped.outputs:
        parts.append(f"{capped.outputs:,} answer(s) cut to {capped.output_cap:,} tokens")
    if capped.inputs:
        parts.append(f"{capped.inputs:,} prompt(s) cut to {capped.input_cap:,} tokens")
    if capped.turns:
        parts.append(f"{capped.turns:,} turn(s) left out: their session's history passed "
                     f"{capped.input_cap:,} tokens")  # fmt: skip
    return "; ".join(parts) + " (the generator's caps)"
