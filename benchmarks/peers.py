"""servelab's load generator against aiperf, on the same streaming truth server, in one run.

The truth server (``benchmarks/peers/truth_server.py``: 128-word prompts, 64 tokens, first token
50 ms after arrival, then one every 20 ms on an absolute schedule, its own write times recorded)
is pinned to CPU 0; each client to CPU 1. aiperf is installed by this script into its own venv under
``.servelab/bench-venvs/aiperf`` (pip, PyPI) and given a tiny word-level tokenizer made offline
(``tokenizers``: tokenizer.json + tokenizer_config.json), so nothing is downloaded at run time.

Per client and concurrency it prints: delivered output tok/s as % of ideal (ideal = N·64 tokens over
ceil(N/C) waves of one request's server-side duration), client CPU ms per token (the client's whole
process tree, sampled from /proc, over the server's busy window ÷ tokens the server wrote), per-gap
p99 and TTFT p99 as the client saw them against the server's truth.

Usage: .venv/bin/python benchmarks/peers.py [--conc 64,256] [--clients servelab,aiperf]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENVS = REPO / ".servelab" / "bench-venvs"
AIPERF_VENV = VENVS / "aiperf"
TOKENIZER_DIR = VENVS / "word-tokenizer"
TRUTH = Path(__file__).resolve().parent / "peers" / "truth_server.py"
PREFILL_MS, GAP_MS, ISL, OSL = 50.0, 20.0, 128, 64
REQUESTS = {64: 960, 256: 1280}
SERVER_CPU, CLIENT_CPU = 0, 1
TICKS = os.sysconf("SC_CLK_TCK")


def _log(msg: str) -> None:
    sys.stderr.write(f"[peers] {msg}\n")
    sys.stderr.flush()


def ensure_aiperf() -> Path:
    """The aiperf executable, installing it into its own venv on first use."""
    exe = AIPERF_VENV / "bin" / "aiperf"
    if not exe.exists():
        _log(f"installing aiperf into {AIPERF_VENV} (pip, once)")
        subprocess.run([sys.executable, "-m", "venv", str(AIPERF_VENV)], check=True)
        log = VENVS / "aiperf-install.log"
        with log.open("w") as out:
            subprocess.run(
                [str(AIPERF_VENV / "bin" / "pip"), "install", "aiperf", "tokenizers"],
                stdout=out,
                stderr=subprocess.STDOUT,
                check=True,
            )
    return exe


TOKENIZER_SCRIPT = r"""
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
words = sys.argv[2].split(",")
vocab = {"[UNK]": 0, "[PAD]": 1, "<s>": 2, "</s>": 3}
for w in words:
    vocab.setdefault(w, len(vocab))
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.decoder = decoders.WordPiece(prefix="##")
tok.save(str(out / "tokenizer.json"))
(out / "tokenizer_config.json").write_text(json.dumps({
    "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "pad_token": "[PAD]",
    "bos_token": "<s>", "eos_token": "</s>", "model_max_length": 1000000}))
(out / "special_tokens_map.json").write_text(json.dumps({"unk_token": "[UNK]",
    "pad_token": "[PAD]", "bos_token": "<s>", "eos_token": "</s>"}))
(out / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": len(vocab)}))
"""


def ensure_tokenizer() -> Path:
    """A word-level tokenizer directory over servelab's and the truth server's words (offline)."""
    if not (TOKENIZER_DIR / "tokenizer.json").exists():
        sys.path.insert(0, str(REPO / "src"))
        from servelab.core.workload import WORDS

        words = ",".join(sorted(set(WORDS)))
        subprocess.run(
            [
                str(AIPERF_VENV / "bin" / "python"),
                "-c",
                TOKENIZER_SCRIPT,
                str(TOKENIZER_DIR),
                words,
            ],
            check=True,
        )
    return TOKENIZER_DIR


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pin(cpu: int):
    return lambda: os.sched_setaffinity(0, {cpu})


def _get(url: str, method: str = "GET") -> dict:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def truth(url: str, *, reset: bool = False) -> dict:
    """The truth server's record (``reset``: forget it first and return the acknowledgement)."""
    return _get(url + "/truth/reset", "POST") if reset else _get(url + "/truth")


def start_truth(port: int, gap_ms: float, prefill_ms: float, cpu: int) -> subprocess.Popen:
    """The truth server on ``port``, pinned to ``cpu``, once it answers."""
    cmd = [sys.executable, str(TRUTH), "--port", str(port), "--gap-ms", str(gap_ms)]
    server = subprocess.Popen([*cmd, "--prefill-ms", str(prefill_ms)], preexec_fn=_pin(cpu))
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            _get(url + "/v1/models")
            return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("the truth server did not start")


def _tree_cpu_s(root: int) -> tuple[float, int]:
    """CPU seconds (user+sys, plus reaped children) of ``root`` and its descendants; their count."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = sum(int(x) for x in fields[11:15]) / TICKS
    total, todo, count = 0.0, [root], 0
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        count += pid in cpu
        todo += [child for child, parent in parents.items() if parent == pid]
    return total, count


class CpuSampler(threading.Thread):
    """Samples a process tree's CPU every 0.2 s with perf_counter_ns stamps."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.samples, self.done = pid, [], threading.Event()
        self.max_procs = 0

    def run(self) -> None:
        while not self.done.is_set():
            cpu, procs = _tree_cpu_s(self.pid)
            self.samples.append((time.perf_counter_ns(), cpu))
            self.max_procs = max(self.max_procs, procs)
            self.done.wait(0.2)

    def between(self, start_ns: int, end_ns: int) -> float:
        """CPU seconds used between two instants (nearest samples outside the window)."""
        before = [c for t, c in self.samples if t <= start_ns] or [self.samples[0][1]]
        after = [c for t, c in self.samples if t >= end_ns] or [self.samples[-1][1]]
        return after[0] - before[-1]


def run_client(cmd: list[str], env: dict[str, str] | None = None) -> tuple[str, CpuSampler, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_pin(CLIENT_CPU),
        env=env,
        cwd=REPO,
    )
    sampler = CpuSampler(proc.pid)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=900)
    finally:
        sampler.done.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited {proc.returncode}: {err[-2000:]}")
    return out, sampler, time.perf_counter() - start


def servelab_cmd(url: str, conc: int, n: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "servelab",
        "bench",
        "--url",
        url,
        "--concurrency",
        str(conc),
        "--requests",
        str(n),
        "--warmup",
        str(conc),
        "--ramp",  # all users start together, as aiperf's do: the ideal below counts waves
        "0",
        "--input-len",
        str(ISL),
        "--output-len",
        str(OSL),
        "--model",
        "truth",
        "--json",
        "--no-ledger",
    ]


def run_servelab(url: str, conc: int, n: int) -> dict:
    out, sampler, wall = run_client(servelab_cmd(url, conc, n))
    level = json.loads(out)["levels"][0]
    return {
        "tput": level["output_throughput"]["mean"],
        "gap_p99": level["gap_ms"]["p99"],
        "ttft_p99": level["ttft_ms"]["p99"],
        "self_cpu": level["client"]["cpu_ms_per_token"],
        "sampler": sampler,
        "wall": wall,
        "failed": level["failed"],
    }


def run_aiperf(url: str, conc: int, n: int, exe: Path, tokenizer: Path) -> dict:
    art = VENVS / "artifacts" / f"aiperf-c{conc}"
    shutil.rmtree(art, ignore_errors=True)
    cmd = [
        str(exe),
        "profile",
        "--model",
        "truth",
        "--url",
        url,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--concurrency",
        str(conc),
        "--request-count",
        str(n),
        "--warmup-request-count",
        str(conc),
        "--synthetic-input-tokens-mean",
        str(ISL),
        "--synthetic-input-tokens-stddev",
        "0",
        "--output-tokens-mean",
        str(OSL),
        "--output-tokens-stddev",
        "0",
        "--tokenizer",
        str(tokenizer),
        "--ui",
        "none",
        "--artifact-dir",
        str(art),
        "--wait-for-model-timeout",
        "0",
        "--random-seed",
        "0",
        "--no-server-metrics",
        "--no-gpu-telemetry",
        "--extra-inputs",
        "ignore_eos:true",
    ]
    # Not HF_HUB_OFFLINE=1: aiperf 0.13's offline path resolves every name through the hub cache
    # (snapshot_download) and rejects a local directory (HFValidationError); online, a local
    # directory is loaded by transformers directly and no request leaves the machine.
    _out, sampler, wall = run_client(cmd)
    data = json.loads((art / "profile_export_aiperf.json").read_text())
    return {
        "tput": data["output_token_throughput"]["avg"],
        "gap_p99": data["inter_chunk_latency"]["p99"],
        "ttft_p99": data["time_to_first_token"]["p99"],
        "self_cpu": None,
        "sampler": sampler,
        "wall": wall,
        "failed": int((data.get("error_request_count") or {}).get("avg", 0) or 0),
    }


def ideal_tput(conc: int, n: int) -> float:
    duration_s = (PREFILL_MS + (OSL - 1) * GAP_MS) / 1e3
    return n * OSL / (math.ceil(n / conc) * duration_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conc", default="64,256")
    parser.add_argument("--clients", default="servelab,aiperf")
    args = parser.parse_args()
    clients = args.clients.split(",")
    exe = tok = None
    if "aiperf" in clients:
        exe, tok = ensure_aiperf(), None
        tok = ensure_tokenizer()
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(TRUTH),
            "--port",
            str(port),
            "--gap-ms",
            str(GAP_MS),
            "--prefill-ms",
            str(PREFILL_MS),
        ],
        preexec_fn=_pin(SERVER_CPU),
    )
    url = f"http://127.0.0.1:{port}"
    rows = []
    try:
        for _ in range(100):
            try:
                _get(url + "/v1/models")
                break
            except OSError:
                time.sleep(0.1)
        for conc in (int(c) for c in args.conc.split(",")):
            n = REQUESTS.get(conc, conc * 5)
            for client in clients:
                _get(url + "/truth/reset", "POST")
                load = os.getloadavg()[0]
                _log(f"{client} C{conc} N{n} (load avg {load:.2f})")
                if client == "servelab":
                    res = run_servelab(url, conc, n)
                else:
                    res = run_aiperf(url, conc, n, exe, tok)  # type: ignore[arg-type]
                truth = _get(url + "/truth")
                cpu = res["sampler"].between(truth["first_arrival_ns"], truth["last_write_ns"])
                rows.append((client, conc, n, res, truth, cpu / truth["tokens"] * 1e3, load))
                _log(table(rows[-1:]).splitlines()[-1])
    finally:
        server.terminate()
        server.wait(10)
    print(table(rows))


def table(rows: list[tuple]) -> str:
    head = (
        "| client | C | N | tok/s (% of ideal) | CPU ms/token (tree; self) | per-gap p99 ms "
        "(truth) | TTFT p99 ms (truth) | failed | procs | load avg |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for client, conc, n, res, truth, cpu, load in rows:
        pct = res["tput"] / ideal_tput(conc, n) * 100
        own = f"; {res['self_cpu']:.3f}" if res["self_cpu"] is not None else ""
        lines.append(
            f"| {client} | {conc} | {n} | {res['tput']:,.0f} ({pct:.1f}%) | {cpu:.3f}{own} | "
            f"{res['gap_p99']:.1f} ({truth['gap_ms']['p99']:.1f}) | {res['ttft_p99']:.1f} "
            f"({truth['ttft_ms']['p99']:.1f}) | {res['failed']} | {res['sampler'].max_procs} | "
            f"{load:.1f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
