"""The embedded default deployment: the reference incident's PD topology on loopback (simulated
prefill and decode, the real router), the initial contents of its env files, and the knobs of the
reference incident it declares. :func:`servelab.core.deploy.spec.parse_spec` reads it like any
spec; used when no spec file is given."""

from __future__ import annotations

from servelab.core.engines import SGLANG_KNOB

__all__ = ["BF16_KNOB", "DEFAULT_ENV_FILES", "DEFAULT_KNOB", "DEFAULT_SPEC_TOML", "OVERLAP_KNOB"]

#: The reference deployment's decode knob (split-K GEMM target CTAs on SM120); a vLLM deployment's
#: is :data:`servelab.core.engines.VLLM_KNOB`.
DEFAULT_KNOB = SGLANG_KNOB
#: The reference incident's other change: overlap scheduling turned off while the hang was chased.
OVERLAP_KNOB = "--disable-overlap-schedule"
#: The incident's tool-call corruption: bf16 index keys under CUDA-graph capture (faster decode;
#: the simulator alters one answer in three above 16 running requests).
BF16_KNOB = "SGLANG_NSA_INDEX_KEYS_BF16"

#: The embedded default: the reference deployment's topology on loopback, simulated workers and
#: the real router, smg 1.13 (what SGLang PD operators run now; docs/spec.md says why). Env files
#: live under the state directory and are created on first use.
DEFAULT_SPEC_TOML = f"""\
name = "reference-pd-sim"
state_dir = ".servelab"

[hosts.local]

[services.prefill]
role = "prefill"
url = "http://127.0.0.1:30000"
start = "sim"
bootstrap_port = 8998
env_file = ".servelab/env/prefill.env"
ready_timeout_s = 60

[services.decode]
role = "decode"
url = "http://127.0.0.1:30002"
start = "sim"
env_file = ".servelab/env/decode.env"
args_env = "SGLANG_ARGS"
knobs = ["{DEFAULT_KNOB}", "{OVERLAP_KNOB}", "{BF16_KNOB}"]
# the SM120 kernel knob and the bf16 index keys come from a custom build: SGLang's own registry
# does not list them
reads_env = ["{DEFAULT_KNOB}", "{BF16_KNOB}"]
depends_on = ["prefill"]
ready_timeout_s = 60

[services.router]
role = "router"
url = "http://127.0.0.1:30001"
start = "router"
env_file = ".servelab/env/router.env"
depends_on = ["prefill", "decode"]
ready_timeout_s = 90
router = {{ kind = "smg", prometheus_port = 29000, health_check_interval_s = 2 }}
"""

#: Initial contents of the embedded default's env files (systemd EnvironmentFile syntax). The decode
#: holds the reference deployment's knob at the value its A/B adopted.
DEFAULT_ENV_FILES: dict[str, str] = {
    "prefill": (
        "# servelab: prefill engine environment (systemd EnvironmentFile syntax)\n"
        "SERVELAB_SIM_TIME_SCALE=0.5\n"
    ),
    "decode": (
        "# servelab: decode engine environment (systemd EnvironmentFile syntax)\n"
        "SERVELAB_SIM_TIME_SCALE=0.5\n"
        f"{DEFAULT_KNOB}=512\n"
        "# the decode's server arguments (args_env): appended to its command line; the cache\n"
        "# report puts the prefix cache's hits in every answer's usage (SGLang's own flag)\n"
        "SGLANG_ARGS=--enable-cache-report\n"
    ),
    "router": "# servelab: router environment (systemd EnvironmentFile syntax)\n",
}
