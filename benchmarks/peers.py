"""servelab's load generator (1 and N worker processes) against its peers, on one streaming truth
server, in one run.

The truth server (``benchmarks/peers/truth_server.py``: 128-word prompts, 64 tokens, first token
50 ms after the request reached its socket (the kernel's receive stamp), then one every
``--gap-ms`` on an absolute schedule, its own write times and their lateness recorded; uvloop,
precomputed bytes) is pinned to CPU 0; each client to the other CPUs (``--client-cpus``; one core
unless given more). Peers are installed by this script into venvs of their own under
``.servelab/bench-venvs/`` (pip, PyPI), never into the project's, and given a word-level tokenizer
made offline (``tokenizers``), so nothing is downloaded at run time:

- servelab ``bench`` as a user runs it (after the warm-up the users start spread over one median
  request, its default ramp): ``servelab``, ``servelab-wN`` (``--workers N``); with every user
  starting at once after the warm-up, as the peers do (``--ramp 0``): ``servelab-r0``,
  ``servelab-w2-r0``;
- aiperf (``aiperf profile``); guidellm (``guidellm benchmark``); SGLang's
  ``python -m sglang.bench_serving``; vLLM's ``vllm bench serve``: each where it installs and
  runs offline; the table says why not where it does not.

Per client and level, against the server's own record of the client's measured requests (the last
N to arrive, warm-up excluded): delivered output tok/s as % of what the server served in that
window; client CPU ms per token (the client's whole process tree, sampled from /proc over the
server's window, ÷ tokens written; for servelab also its own figure for the run and the decode);
TTFT p99 and per-gap p99 as the client reported them, with the server's in brackets; how late the
server wrote against its schedule and how long requests waited in its socket (p99); the connect
phase where the client reports it; processes.

Usage: .venv/bin/python benchmarks/peers.py [--conc 64,256,1024]
       [--clients servelab,servelab-r0,servelab-w2,aiperf,guidellm,sglang,vllm]
       [--gap-ms 20] [--gap-ms-1024 80]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VENVS = REPO / ".servelab" / "bench-venvs"
AIPERF_VENV = VENVS / "aiperf"
TOKENIZER_DIR = VENVS / "word-tokenizer"
TRUTH = Path(__file__).resolve().parent / "peers" / "truth_server.py"
PREFILL_MS, GAP_MS, ISL, OSL = 50.0, 20.0, 128, 64
REQUESTS = {64: 960, 256: 1280, 1024: 3072}
SERVER_CPU = 0
CLIENT_CPUS: set[int] = set()
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
        from servelab.core.load.workload import WORDS

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


def _pin(cpu: int) -> Callable[[], None]:
    return lambda: os.sched_setaffinity(0, {cpu})


def _get(url: str, method: str = "GET") -> dict[str, Any]:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as resp:
        doc: dict[str, Any] = json.loads(resp.read())
        return doc


def truth(url: str, *, reset: bool = False) -> dict[str, Any]:
    """The truth server's record (``reset``: forget it first and return the acknowledgement)."""
    return _get(url + "/truth/reset", "POST") if reset else _get(url + "/truth")


def start_truth(port: int, gap_ms: float, prefill_ms: float, cpu: int) -> subprocess.Popen[bytes]:
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
        self.pid, self.done = pid, threading.Event()
        self.samples: list[tuple[int, float]] = []
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
        preexec_fn=lambda: os.sched_setaffinity(0, CLIENT_CPUS or {1}),
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


def servelab_cmd(url: str, conc: int, n: int, workers: int, ramp0: bool = False) -> list[str]:
    """``bench`` as a user runs it: after the warm-up the users start spread over one median
    request (the ramp from the warm-up, the default); ``ramp0``: all together, as the peers do."""
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
        *(["--ramp", "0"] if ramp0 else []),
        "--input-len",
        str(ISL),
        "--output-len",
        str(OSL),
        "--model",
        "truth",
        "--workers",
        str(workers),
        "--json",
        "--no-ledger",
    ]


def run_servelab(
    url: str, conc: int, n: int, workers: int = 1, ramp0: bool = False
) -> dict[str, Any]:
    out, sampler, wall = run_client(servelab_cmd(url, conc, n, workers, ramp0))
    level = json.loads(out)["levels"][0]
    return {
        "tput": level["output_throughput"]["mean"],
        "gap_p99": level["gap_ms"]["p99"],
        "ttft_p99": level["ttft_ms"]["p99"],
        "dispatch_p99": level["dispatch_ms"]["p99"],
        "connect": level["connect_ms"],
        "self_cpu": level["client"]["cpu_ms_per_token"],
        "sampler": sampler,
        "wall": wall,
        "failed": level["failed"],
    }


def _aiperf_cmd(exe: Path, url: str, conc: int, n: int, tokenizer: Path, art: Path) -> list[str]:
    return [
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


def run_aiperf(url: str, conc: int, n: int) -> dict[str, Any]:
    exe, tokenizer = ensure_aiperf(), ensure_tokenizer()
    art = VENVS / "artifacts" / f"aiperf-c{conc}"
    shutil.rmtree(art, ignore_errors=True)
    # Not HF_HUB_OFFLINE=1: aiperf 0.13's offline path resolves every name through the hub cache
    # (snapshot_download) and rejects a local directory (HFValidationError); online, a local
    # directory is loaded by transformers directly and no request leaves the machine.
    _out, sampler, wall = run_client(_aiperf_cmd(exe, url, conc, n, tokenizer, art))
    data = json.loads((art / "profile_export_aiperf.json").read_text())
    return {
        "tput": data["output_token_throughput"]["avg"],
        "gap_p99": data["inter_chunk_latency"]["p99"],
        "ttft_p99": data["time_to_first_token"]["p99"],
        "connect": None,
        "self_cpu": None,
        "sampler": sampler,
        "wall": wall,
        "failed": int((data.get("error_request_count") or {}).get("avg", 0) or 0),
    }


def ensure_venv(name: str, packages: list[str], then: list[str] | None = None) -> Path:
    """A peer's own venv under VENVS (pip from PyPI, once; ``then``: a second install after
    ``packages``); its bin directory."""
    venv = VENVS / name
    marker = venv / ".installed"
    if not marker.exists():
        _log(f"installing {' '.join(packages + (then or []))} into {venv} (pip, once)")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        with (VENVS / f"{name}-install.log").open("w") as out:
            for batch in (packages, then or []):
                if batch:
                    subprocess.run(
                        [str(venv / "bin" / "pip"), "install", *batch],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        check=True,
                    )
        marker.touch()
    return venv / "bin"


def run_guidellm(url: str, conc: int, n: int) -> dict[str, Any]:
    bin_dir = ensure_venv("guidellm", ["guidellm", "tokenizers"])
    out_file = VENVS / "artifacts" / f"guidellm-c{conc}.json"
    out_file.parent.mkdir(parents=True, exist_ok=True)
    cmd = [str(bin_dir / "guidellm"), "run", "--disable-console-interactive"]
    cmd += ["--backend", f"kind=openai_http,target={url},model=truth"]
    cmd += ["--profile", f"kind=concurrent,streams={conc}"]
    cmd += ["--constraint", f"kind=max_requests,count={n}"]
    cmd += ["--tokenizer", f"kind=huggingface_auto,model={ensure_tokenizer()}"]
    cmd += ["--data", f"kind=synthetic_text,prompt_tokens={ISL},output_tokens={OSL}"]
    cmd += ["--output", f"kind=json,path={out_file}"]
    _out, sampler, wall = run_client(cmd, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    bench = json.loads(out_file.read_text())["benchmarks"][0]
    metrics = bench["metrics"]

    def p99(name: str) -> float:
        return float(metrics[name]["successful"]["percentiles"]["p99"])

    tokens = metrics["output_token_count"]["successful"]["total_sum"]
    return {
        "tput": tokens / bench["duration"],
        "gap_p99": p99("inter_token_latency_ms"),
        "ttft_p99": p99("time_to_first_token_ms"),
        "connect": None,
        "self_cpu": None,
        "sampler": sampler,
        "wall": wall,
        "failed": int(metrics["request_totals"]["errored"]),
    }


def _serving_result(
    doc: dict[str, Any], n: int, sampler: CpuSampler, wall: float
) -> dict[str, Any]:
    """A row from the result file SGLang's ``bench_serving`` and vLLM's ``bench serve`` share
    (the former grew from the latter)."""
    return {
        "tput": doc["output_throughput"],
        "gap_p99": doc["p99_itl_ms"],
        "ttft_p99": doc["p99_ttft_ms"],
        "connect": None,
        "self_cpu": None,
        "sampler": sampler,
        "wall": wall,
        "failed": n - int(doc["completed"]),
    }


#: What ``python -m sglang.bench_serving`` imports, found by running it (sglang installed with
#: ``--no-deps``: its own requirements pin a GPU stack this client does not use); torchvision
#: brings torch's CUDA build, about 6 GB in all (the full ``pip install sglang``: 11 GB).
SGLANG_BENCH_DEPS = [
    "aiohttp", "numpy", "requests", "tqdm", "transformers", "pybase64", "pillow", "tokenizers",
    "orjson", "psutil", "torch", "torchvision", "starlette", "msgspec", "pyzmq", "IPython",
    "datasets", "apache-tvm-ffi", "sentencepiece", "compressed-tensors", "gguf",
]  # fmt: skip


def run_sglang(url: str, conc: int, n: int) -> dict[str, Any]:
    if not (VENVS / "sglang" / ".installed").exists() and not os.environ.get(
        "PEERS_INSTALL_SGLANG"
    ):
        raise RuntimeError(
            "not installed here: its client needs torch and CUDA wheels (about 6 GB); set "
            "PEERS_INSTALL_SGLANG=1 to let this script install it"
        )
    bin_dir = ensure_venv("sglang", ["--no-deps", "sglang"], then=SGLANG_BENCH_DEPS)
    out_file = VENVS / "artifacts" / f"sglang-c{conc}.jsonl"
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.unlink(missing_ok=True)
    cmd = [str(bin_dir / "python"), "-m", "sglang.bench_serving", "--backend", "sglang-oai-chat"]
    cmd += ["--base-url", url, "--model", "truth", "--tokenizer", str(ensure_tokenizer())]
    cmd += ["--dataset-name", "random-ids", "--random-input-len", str(ISL)]
    cmd += ["--random-output-len", str(OSL), "--random-range-ratio", "1", "--num-prompts", str(n)]
    cmd += ["--max-concurrency", str(conc), "--output-file", str(out_file), "--disable-tqdm"]
    cmd += ["--warmup-requests", "1", "--seed", "0"]
    _out, sampler, wall = run_client(cmd, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    doc = json.loads(out_file.read_text().splitlines()[-1])
    return _serving_result(doc, n, sampler, wall)


#: What ``vllm bench serve`` imports beyond SGLang's client venv, found by running it (vllm
#: installed with ``--no-deps``; torch and the rest come from the SGLang client's venv, read
#: through a ``.pth`` file, so the 6 GB are not installed twice).
VLLM_BENCH_DEPS = [
    "cbor2", "openai-harmony", "openai", "cloudpickle", "cachetools", "uvloop", "py-cpuinfo",
    "fastapi", "prometheus-client", "partial-json-parser", "uvicorn", "xgrammar", "llguidance",
    "watchfiles",
]  # fmt: skip


def ensure_vllm() -> Path:
    """The Python of vLLM's own venv over the SGLang client's packages (installed once)."""
    venv = VENVS / "vllm"
    if not (venv / ".installed").exists():
        sglang_bin = ensure_venv("sglang", ["--no-deps", "sglang"], then=SGLANG_BENCH_DEPS)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        shared = next((sglang_bin.parent / "lib").glob("python3*/site-packages"))
        own = next((venv / "lib").glob("python3*/site-packages"))
        (own / "zz_sglang_client.pth").write_text(f"import sys; sys.path.append({str(shared)!r})\n")
    return ensure_venv("vllm", ["--no-deps", "vllm"], then=VLLM_BENCH_DEPS) / "python"


def run_vllm(url: str, conc: int, n: int) -> dict[str, Any]:
    if not (VENVS / "vllm" / ".installed").exists() and not os.environ.get("PEERS_INSTALL_SGLANG"):
        raise RuntimeError(
            "not installed here: it needs torch (SGLang's client venv, about 6 GB); set "
            "PEERS_INSTALL_SGLANG=1 to let this script install both"
        )
    python = ensure_vllm()
    art = VENVS / "artifacts"
    art.mkdir(parents=True, exist_ok=True)
    name = f"vllm-c{conc}.json"
    (art / name).unlink(missing_ok=True)
    cmd = [str(python), "-m", "vllm.entrypoints.cli.main", "bench", "serve"]
    cmd += ["--backend", "openai-chat", "--base-url", url]
    cmd += ["--endpoint", "/v1/chat/completions", "--model", "truth"]
    cmd += ["--tokenizer", str(ensure_tokenizer()), "--dataset-name", "random"]
    cmd += ["--random-input-len", str(ISL), "--random-output-len", str(OSL)]
    cmd += ["--random-range-ratio", "0", "--ignore-eos", "--num-prompts", str(n)]
    cmd += ["--max-concurrency", str(conc), "--num-warmups", str(conc), "--seed", "0"]
    cmd += ["--percentile-metrics", "ttft,itl", "--metric-percentiles", "99", "--disable-tqdm"]
    cmd += ["--save-result", "--result-dir", str(art), "--result-filename", name]
    _out, sampler, wall = run_client(cmd, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    doc = json.loads((art / name).read_text())
    return _serving_result(doc, n, sampler, wall)


#: Peers that do not run here, and why (measured when this was written; see docs/bench.md).
NOT_RUN: dict[str, str] = {}


def _servelab_workers(workers: int, url: str, conc: int, n: int) -> dict[str, Any]:
    return run_servelab(url, conc, n, workers)


def runners() -> dict[str, Callable[[str, int, int], dict[str, Any]]]:
    found: dict[str, Callable[[str, int, int], dict[str, Any]]] = {
        "servelab": lambda url, c, n: run_servelab(url, c, n, 1),
        "aiperf": run_aiperf,
    }
    for w in (2, 4, 8):
        found[f"servelab-w{w}"] = functools.partial(_servelab_workers, w)
    found["servelab-r0"] = lambda url, c, n: run_servelab(url, c, n, 1, ramp0=True)
    found["servelab-w2-r0"] = lambda url, c, n: run_servelab(url, c, n, 2, ramp0=True)
    found.update({"guidellm": run_guidellm, "sglang": run_sglang, "vllm": run_vllm})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conc", default="64,256,1024")
    parser.add_argument("--clients", default="servelab,servelab-r0,servelab-w2,aiperf")
    parser.add_argument("--gap-ms", type=float, default=GAP_MS)
    parser.add_argument(
        "--gap-ms-1024",
        type=float,
        default=80.0,
        help="the token interval at C ≥ 1024 (80 ms: 12,800 tokens/s, what the truth server "
        "holds on one core; at 40 ms it fell 42 ms behind at p99)",
    )
    parser.add_argument("--client-cpus", default="1", help="CPUs the client may use, e.g. 1")
    args = parser.parse_args()
    CLIENT_CPUS.update(int(c) for c in args.client_cpus.split(","))
    table_rows, known = [], runners()
    failed: dict[str, str] = {}
    for conc in (int(c) for c in args.conc.split(",")):
        gap = args.gap_ms if conc < 1024 else args.gap_ms_1024
        port = free_port()
        server = start_truth(port, gap, PREFILL_MS, SERVER_CPU)
        url = f"http://127.0.0.1:{port}"
        try:
            for client in args.clients.split(","):
                if client in NOT_RUN or client not in known:
                    _log(f"{client}: {NOT_RUN.get(client, 'unknown client')}")
                    continue
                n = REQUESTS.get(conc, conc * 5)
                truth(url, reset=True)
                load = os.getloadavg()[0]
                _log(f"{client} C{conc} N{n} gap {gap} ms (load avg {load:.2f})")
                try:
                    res = known[client](url, conc, n)
                except (RuntimeError, OSError, KeyError, ValueError) as exc:
                    _log(f"{client} C{conc} failed: {exc}")
                    failed.setdefault(client, str(exc)[:300])
                    continue
                served = _get(url + f"/truth?last={n}")
                cpu = res["sampler"].between(served["first_arrival_ns"], served["last_write_ns"])
                row = (client, conc, n, gap, res, served, cpu / served["tokens"] * 1e3, load)
                table_rows.append(row)
                _log(table([row]).splitlines()[-1])
        finally:
            server.terminate()
            server.wait(10)
    print(table(table_rows))
    for name, why in {**NOT_RUN, **failed}.items():
        print(f"- {name}: not run: {why}")


def _connect(res: dict[str, Any]) -> str:
    phase = res.get("connect")
    if not phase or not phase.get("n"):
        return "in TTFT"
    return f"{phase['n']} × p99 {phase['p99']:.2f}"


def table(rows: list[tuple[Any, ...]]) -> str:
    head = (
        "| client | C | N | gap ms | % of served tok/s | CPU ms/token (tree; self) | TTFT p99 ms "
        "(truth) | dispatch p99 ms | gap p99 ms (truth) | server late p99 ms | server socket wait "
        "p99 ms | connect phase ms | failed | procs | load avg |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for client, conc, n, gap, res, truth_, cpu, load in rows:
        pct = res["tput"] / truth_["served_tok_s"] * 100
        own = f"; {res['self_cpu']:.3f}" if res["self_cpu"] is not None else ""
        dispatch = res.get("dispatch_p99")
        dispatch_text = "—" if dispatch is None else f"{dispatch:.1f}"
        lines.append(
            f"| {client} | {conc} | {n} | {gap:g} | {pct:.1f}% | {cpu:.3f}{own} | "
            f"{res['ttft_p99']:.1f} ({truth_['ttft_ms']['p99']:.1f}) | {dispatch_text} | "
            f"{res['gap_p99']:.1f} "
            f"({truth_['gap_ms']['p99']:.1f}) | {truth_['late_ms']['p99']:.1f} | "
            f"{truth_['socket_wait_ms']['p99']:.1f} | {_connect(res)} "
            f"| {res['failed']} | {res['sampler'].max_procs} | {load:.1f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
