"""``servelab demo``: the reference incident, told with the real commands on the embedded default.

Every step is a real ``servelab`` command run as its own process, printed before it runs, so the
demo doubles as a tour of what a user types. The story:

1. bring-up in order (prefill → decode → router), a first chat completion through the router
   (cold), status, and a layered verify (the env knob in ``/proc/PID/environ``, the argument knob
   ``--disable-overlap-schedule`` in ``/proc/PID/cmdline`` and in the engine's ``/server_info``);
2. an A/B of the decode knob (256 against 512) at C64/C80/C96: the throughput win and the C96 < C80
   anomaly of the old value, answers unchanged (greedy probes inside every visit); and an A/B of
   overlap scheduling (on against off) at C64: its cost;
3. a faster setting that changes answers: the bf16 index keys (0 against 1) at C64, faster in the
   model but one answer in three altered above 16 running requests: the A/B does not keep it and
   exits 1, and a case records why (the A/B as its evidence);
4. multi-round agentic sessions hang behind a client-side proxy; a case is opened and the hang
   reproduced by a soak; the knob (the latest change) is reverted under suspicion with its cost
   shown; the soak still hangs; overlap scheduling is turned off while the hang is chased (its cost
   shown too); the soak still hangs and localizes the stall to the proxy; ``case test`` decides each
   suspect by experiment (each knob: the failing soak with and without the change, each arm
   co-restarted and proven live; the proxy: through it and straight to the router); the case is
   resolved with the experiments' verdicts (not typed ones), both knobs restored and verified live;
5. the docs are generated from the ledger; everything is torn down, nothing left running.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.text import Text

from servelab.cli.boundary import console, run
from servelab.cli.common import SpecAndLedger
from servelab.cli.options import REPEAT, REQUESTS
from servelab.cli.sharedoption import Default
from servelab.core.deploy.defaultspec import (
    BF16_KNOB,
    DEFAULT_KNOB,
    DEFAULT_SPEC_TOML,
    OVERLAP_KNOB,
)
from servelab.io.files import write_atomic
from servelab.io.http.client import model_id, probe

__all__ = [
    "demo_command",
    "proxy_spec_text",
]

KNOB_TARGET = f"knob:decode/{DEFAULT_KNOB}"
OVERLAP_TARGET = f"knob:decode/{OVERLAP_KNOB}"
PROXY_PORT = 30003


def proxy_spec_text(state_dir: Path, stall_after: int) -> str:
    """The embedded default plus a client-side proxy (the incident's real culprit) in front of the
    router, with absolute paths so the file can live anywhere."""
    text = DEFAULT_SPEC_TOML.replace('".servelab', f'"{state_dir}')
    return text + (
        "\n[services.proxy]\n"
        'role = "proxy"\n'
        f'url = "http://127.0.0.1:{PROXY_PORT}"\n'
        'start = "sim"\n'
        f'args = ["--stall-reused-after", "{stall_after}"]\n'
        'depends_on = ["router"]\n'
        "ready_timeout_s = 30\n"
    )


class _Story:
    """Runs the demo's commands, echoing each one, and remembers what must be torn down."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.spec_for_down: list[str] = []

    def chapter(self, title: str) -> None:
        console.rule(Text(title, style="bold"))

    def say(self, text: str) -> None:
        console.print(f"» {text}", style="cyan")

    def cmd(self, *args: str, expect: tuple[int, ...] = (0,), capture: bool = False) -> str:
        console.print(f"$ servelab {' '.join(_quote(a) for a in args)}", style="bold green")
        proc = subprocess.run(
            [sys.executable, "-m", "servelab", *args],
            cwd=self.workdir,
            stdout=subprocess.PIPE if capture else None,
            text=True,
            check=False,
        )
        if proc.returncode not in expect:
            raise click.ClickException(
                f"`servelab {' '.join(args)}` exited {proc.returncode} (expected {expect})"
            )
        return proc.stdout or ""

    def cmd_json(self, *args: str, expect: tuple[int, ...] = (0,)) -> Any:
        return json.loads(self.cmd(*args, "--json", expect=expect, capture=True))


def _quote(arg: str) -> str:
    return f'"{arg}"' if " " in arg else arg


async def _first_probe(router_url: str) -> tuple[int | None, float, str]:
    body = {
        # the model the router lists: smg routes by model (a name it does not list is a 503)
        "model": await model_id(router_url) or "default",
        "messages": [{"role": "user", "content": "Say hi in one word."}],
        "max_tokens": 8,
    }
    result = await probe(
        f"{router_url}/v1/chat/completions", timeout=120, method="POST", json_body=body
    )
    return result.status, result.elapsed_s, result.error or result.body


def _bring_up(story: _Story, router_url: str) -> None:
    story.chapter("1. Bring-up: prefill → decode → router, each gated on readiness")
    story.say(
        "the embedded default is SGLang: simulated SGLang workers behind the real smg 1.13 "
        "(sglang-router's successor, what SGLang PD operators run now; sglang-router 0.3.2 is "
        'router = { kind = "sglang-router" }, and vLLM behind vllm-router 0.1.17 runs every '
        "command but a rolling restart: examples/local-vllm.toml; the demo is SGLang only)"
    )
    story.cmd("up")
    story.spec_for_down = []
    status, elapsed, detail = run(_first_probe(router_url))
    console.print(
        Text.assemble(
            (f"router e2e probe: {status} in {elapsed:.1f} s", "bold"), " (first request: cold)"
        )
    )
    if status != 200:
        raise click.ClickException(f"the first request through the router failed: {detail}")
    story.cmd("status")
    story.chapter(
        "2. Layered verify: the files, live /proc/PID/environ and /proc/PID/cmdline, the engine's "
        "/server_info, health, e2e"
    )
    story.cmd("verify")


def _ab(story: _Story, out: Path, repeat: int, requests: int) -> None:
    story.chapter(f"3. A/B of the decode knob {DEFAULT_KNOB}: 256 against 512")
    story.say("each arm: set the knob, co-restart decode → router, prove it live, then measure")
    story.cmd(
        "ab", "--knob", f"decode:{DEFAULT_KNOB}=256,512", "--concurrency", "64,80,96",
        "--repeat", str(repeat), "--requests", str(requests), "--export", str(out / "ab"),
    )  # fmt: skip
    story.say(
        f"a server argument is a knob too: {OVERLAP_KNOB} (on: the CPU scheduling gap shows "
        "between decode steps), set in the decode's args_env, proven in its command line and in "
        "the engine's /server_info"
    )
    story.cmd(
        "ab", "--knob", f"decode:{OVERLAP_KNOB}=off,on", "--concurrency", "64",
        "--repeat", str(repeat), "--requests", str(requests), "--export", str(out / "ab"),
    )  # fmt: skip


def _answers(story: _Story, requests: int) -> None:
    story.chapter(f"4. Faster, but are the answers the same? {BF16_KNOB}: 0 against 1")
    story.say(
        "the incident's other finding: bf16 index keys under CUDA-graph capture decode faster and "
        "garble tool calls at high concurrency. Every A/B mixes greedy probes (plain, tool-call, "
        "long-context retrieval; at most 5% of its requests) into its own load and compares each "
        "arm's answers with references from the baseline"
    )
    case = story.cmd_json("case", "open", f"{BF16_KNOB}: faster decode, but the same answers?")
    cid = str(case["id"])
    doc = story.cmd_json(
        "ab", "--knob", f"decode:{BF16_KNOB}=0,1", "--concurrency", "64", "--repeat", "2",
        "--requests", str(requests), "--keep", "better", expect=(1,),
    )  # fmt: skip
    verdict = doc["answers"]["verdict"]
    said = (f"changes answers: {verdict['candidate_wrong']} of {verdict['n']} wrong against "
            f"{verdict['baseline_wrong']} of {verdict['n']} for the baseline (p = "
            f"{verdict['p']:.2g}): not kept")  # fmt: skip
    console.print(Text(said))
    story.cmd("case", "evidence", cid, "--ab", str(doc["ab_id"]))
    story.cmd("case", "evidence", cid, "--note", said)
    story.cmd("case", "resolve", cid, "--root-cause",
              "bf16 index keys alter answers above 16 running requests: not adopted")  # fmt: skip


def _incident(story: _Story, spec: Path, soak_args: list[str]) -> None:
    story.chapter("5. The incident: multi-round agentic sessions hang")
    story.say("agents reach the router through a client-side proxy (it reuses keep-alive links)")
    story.cmd("up", "-f", str(spec))
    story.spec_for_down = ["-f", str(spec)]
    case = story.cmd_json("case", "open", "Multi-round agentic sessions hang after a few rounds")
    cid = str(case["id"])
    story.say(
        "reproduce: agent sessions through the proxy, as the users run them (each round "
        "resends the history: the soak shows how much of it the prefix cache served)"
    )
    story.cmd("soak", "-f", str(spec), *soak_args, "--case", cid, expect=(1,))
    story.cmd("case", "suspect", cid, KNOB_TARGET, "--reason", "the latest change before the hang")
    story.say(
        "the knob was the latest change (tuned from 256 to 512 before the hang; the A/B above "
        "left it as it found it, so the ledger holds no change to revert: the value is said): "
        "revert it under suspicion (its cost shows first)"
    )
    story.cmd("case", "revert", cid, KNOB_TARGET, "--to", "256", "--yes", "-f", str(spec))
    story.say("soak again with the knob reverted: does the hang go away? (it does not)")
    story.cmd("soak", "-f", str(spec), *soak_args, "--case", cid, expect=(1,))
    story.say("while the hang is chased, overlap scheduling is turned off too (its cost shows)")
    story.cmd("case", "suspect", cid, OVERLAP_TARGET, "--reason",
              "the overlap scheduler might race the KV transfer")  # fmt: skip
    story.cmd("case", "revert", cid, OVERLAP_TARGET, "--to", "on", "--yes", "-f", str(spec))
    story.cmd("soak", "-f", str(spec), *soak_args, "--case", cid, expect=(1,))
    why = "fresh connections and direct-to-router replays of the stalled payload succeed"
    story.cmd("case", "suspect", cid, "component:proxy", "--reason", why)
    story.say("let an experiment decide, not a hunch: the failing soak with 512 and with 256")
    knob = _test(story, spec, cid, KNOB_TARGET)
    story.say("overlap scheduling: the failing soak with it off and on")
    overlap = _test(story, spec, cid, OVERLAP_TARGET)
    story.say("and the proxy: the same soak through it and straight to the router, bypassing it")
    proxy = _test(story, spec, cid, "component:proxy")
    story.say(
        f"the verdicts are the experiments': {KNOB_TARGET} {knob}, {OVERLAP_TARGET} {overlap}, "
        f"component:proxy {proxy}"
    )
    story.cmd(
        "case", "resolve", cid, "--root-cause",
        "the client-side proxy stops forwarding on reused keep-alive connections",
        *_verdict(KNOB_TARGET, knob), *_verdict(OVERLAP_TARGET, overlap),
        *_verdict("component:proxy", proxy),
    )  # fmt: skip
    if "exonerated" in (knob, overlap):
        story.say("the knobs were wrongly blamed: restore them, co-restart in order, prove it live")
        story.cmd("restore", cid, "-f", str(spec))
    story.cmd("case", "show", cid)


def _test(story: _Story, spec: Path, cid: str, target: str) -> str:
    """``case test`` of ``target``; its outcome (convicted, exonerated or inconclusive)."""
    doc = story.cmd_json("case", "test", cid, target, "--rounds", "2", "-f", str(spec))
    console.print(Text(doc["summary"]))
    return str(doc["outcome"])


def _verdict(target: str, outcome: str) -> list[str]:
    """The resolve flag of an experiment's outcome (none when it was inconclusive)."""
    flag = {"convicted": "--convict", "exonerated": "--exonerate"}.get(outcome)
    return [flag, target] if flag else []


@click.command("demo")
@REPEAT.option(Default("3", "the A/B's rounds, as ab's"))
@REQUESTS.option(Default("384", "per A/B run: the simulator's C96 varies about ±3% a run at 256"))
@click.option("--keep-up", is_flag=True, help="Leave the deployment running at the end.")
def demo_command(repeat: int, requests: int, keep_up: bool) -> None:
    """Tell the reference incident with real commands on the embedded simulated stack."""
    workdir = Path.cwd()
    where = SpecAndLedger()
    if not where.spec().embedded:
        raise click.UsageError("the demo runs on the embedded default: use a directory without "
                               "servelab.toml")  # fmt: skip
    loaded = where.deployment()  # its env files exist before the proxy spec names their dir
    state = loaded.state_dir.resolve()
    out = state / "demo-report"
    spec = state / "demo-with-proxy.toml"
    write_atomic(spec, proxy_spec_text(state, stall_after=3).encode(), parents=True)
    story = _Story(workdir)
    soak_args = ["--sessions", "4", "--rounds", "6", "--idle-timeout", "3", "--duration", "90"]
    started = time.monotonic()
    try:
        _bring_up(story, loaded.spec.services["router"].url)
        _ab(story, out, repeat, requests)
        _answers(story, max(requests, 400))
        _incident(story, spec, soak_args)
        story.chapter("6. Docs from the evidence")
        story.cmd("report", "--out", str(out), "--force")  # over the A/B exports in out/ab
    finally:
        if not keep_up:
            story.chapter("Tear-down")
            story.cmd("down", *(["-f", str(spec)] if spec.exists() else []), expect=(0, 1))
    minutes = (time.monotonic() - started) / 60
    console.print(
        Text.assemble(
            ("demo complete", "bold"), f" in {minutes:.1f} min; report: {out / 'index.html'}"
        )
    )
