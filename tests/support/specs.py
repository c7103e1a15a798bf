"""Deployment specs for tests: the reference PD topology on free loopback ports.

``write_pd_spec`` writes ``servelab.toml`` and its env files under ``root``: simulated prefill and
decode, the real router (sglang-router 0.3.2, or the ``router_kind`` given: :data:`ROUTER_KINDS`,
what the CLI tests run each command against), optionally a simulated proxy in front of the
router. Every port is picked at run time (below the ephemeral range, see
:func:`tests.support.free_ports`), or taken from
a running :class:`~tests.support.stack.SimStack` (``PdPorts.of(stack)``) for a spec that describes
a stack the test started itself. ``pd_spec_toml`` is the spec's text alone; ``PdEnv`` the env
files alone. ``write_decode_spec`` is the one-service spec of the knob tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from tests.support import free_ports
from tests.support.stack import SimStack

__all__ = [
    "ROUTER_KINDS",
    "SECRET",
    "PdEnv",
    "PdPorts",
    "pd_spec_toml",
    "write_decode_spec",
    "write_pd_spec",
]

#: The SGLang routers the CLI tests run a command against: sglang-router 0.3.2 (a spec that names
#: no kind) and smg 1.13.0 (what SGLang PD operators run now).
ROUTER_KINDS = ("sglang-router", "smg")

#: A value tests put in an env file (``SECRET_TOKEN``) and then look for where it must not be.
SECRET = "hunter2"

Knobs = Sequence[str] | Mapping[str, str]


@dataclass(frozen=True)
class PdPorts:
    """The ports of one PD deployment (``proxy`` is 0 when there is none)."""

    prefill: int
    bootstrap: int
    decode: int
    router: int
    metrics: int
    proxy: int = 0

    @classmethod
    def free(cls, *, proxy: bool = True) -> PdPorts:
        """Ports free a moment ago (none for the proxy when ``proxy`` is False)."""
        return cls(*free_ports(6 if proxy else 5))

    @classmethod
    def of(cls, stack: SimStack) -> PdPorts:
        """The ports of a running simulated stack."""
        return cls(
            stack.prefill_port,
            stack.bootstrap_port,
            stack.decode_port,
            stack.router_port,
            stack.prometheus_port,
            stack.proxy_port or 0,
        )

    def listened(self) -> list[int]:
        """Every port of the deployment (the proxy's only when it has one)."""
        return [port for port in astuple(self) if port]


def _knobs_toml(knobs: Knobs) -> str:
    if not knobs:
        return ""
    if isinstance(knobs, Mapping):
        pins = ", ".join(f'{name} = "{value}"' for name, value in knobs.items())
        return f"knobs = {{ {pins} }}\n"
    return "knobs = [" + ", ".join(f'"{name}"' for name in knobs) + "]\n"


def _service(name: str, port: int, host: str | None, env_dir: str | None, body: str) -> str:
    """One ``[services.NAME]`` table: role, url, host, start, env file, then ``body``."""
    start = {"router": "router"}.get(name, "sim")
    text = f'\n[services.{name}]\nrole = "{name}"\nurl = "http://127.0.0.1:{port}"\n'
    text += f'host = "{host}"\n' if host is not None else ""
    text += f'start = "{start}"\n'
    if env_dir is not None and name != "proxy":
        text += f'env_file = "{env_dir}/{name}.env"\n'
    return text + body


def pd_spec_toml(
    ports: PdPorts,
    *,
    name: str = "test-pd",
    state_dir: str = "state",
    env_dir: str | None = "env",
    knobs: Knobs = (DEFAULT_KNOB,),
    host: str | None = None,
    hosts_toml: str = "",
    proxy_args: Sequence[str] | None = None,
    decode_toml: str = "",
    router_kind: str | None = None,
) -> str:
    """The spec's text: prefill, decode, router, and a proxy when ``proxy_args`` is not None.

    ``router_kind``: the router's ``kind`` (``"smg"``, ``"sglang-router"``); None names none (an
    SGLang spec then runs sglang-router 0.3.2).

    ``env_dir`` None: no service names an env file. ``knobs`` a sequence declares the decode's
    knobs, a mapping pins them. ``host`` puts every service on that host (``hosts_toml`` its table).
    ``decode_toml``: more keys of the decode's table (``args_env = "SGLANG_ARGS"``).
    """
    text = f'name = "{name}"\nstate_dir = "{state_dir}"\n{hosts_toml}'
    text += _service(
        "prefill",
        ports.prefill,
        host,
        env_dir,
        f"bootstrap_port = {ports.bootstrap}\nready_timeout_s = 60\n",
    )
    decode = _knobs_toml(knobs) + decode_toml + 'depends_on = ["prefill"]\nready_timeout_s = 60\n'
    text += _service("decode", ports.decode, host, env_dir, decode)
    kind = "" if router_kind is None else f'kind = "{router_kind}", '
    router = (
        'depends_on = ["prefill", "decode"]\nready_timeout_s = 90\n'
        f'router = {{ {kind}policy = "round_robin", prometheus_port = {ports.metrics}, '
        "health_check_interval_s = 1 }\n"
    )
    text += _service("router", ports.router, host, env_dir, router)
    if proxy_args is not None:
        args = ", ".join(f'"{a}"' for a in proxy_args)
        proxy = f'args = [{args}]\ndepends_on = ["router"]\nready_timeout_s = 30\n'
        text += _service("proxy", ports.proxy, host, None, proxy)
    return text


@dataclass(frozen=True)
class PdEnv:
    """The env files: both workers get the time scale and ``worker_env``; the decode the knob
    (unless None), ``SECRET_TOKEN={secret}`` (unless None) and ``decode_env``; the router an empty
    file."""

    knob: str | None = "512"
    time_scale: float = 0.05
    decode_env: str = ""
    worker_env: str = ""
    secret: str | None = None

    def write(self, env_dir: Path) -> None:
        """Write ``prefill.env``, ``decode.env`` and ``router.env`` into ``env_dir``."""
        env_dir.mkdir(parents=True, exist_ok=True)
        common = f"SERVELAB_SIM_TIME_SCALE={self.time_scale}\n{self.worker_env}"
        decode = f"{DEFAULT_KNOB}={self.knob}\n" if self.knob is not None else ""
        decode += f"SECRET_TOKEN={self.secret}\n" if self.secret is not None else ""
        (env_dir / "prefill.env").write_text(common)
        (env_dir / "decode.env").write_text(f"# decode\n{common}{decode}{self.decode_env}")
        (env_dir / "router.env").write_text("")


_ENV_FIELDS = frozenset(f.name for f in fields(PdEnv))


def write_pd_spec(
    root: Path, *, ports: PdPorts | None = None, env_dir: str = "env", **options: Any
) -> Path:
    """Write ``root/servelab.toml`` and its env files; return the spec's path.

    ``options`` are :class:`PdEnv`'s fields (``knob``, ``time_scale``, ``decode_env``,
    ``worker_env``, ``secret``) and :func:`pd_spec_toml`'s keywords (``name``, ``state_dir``,
    ``knobs``, ``host``, ``hosts_toml``, ``proxy_args``, ``decode_toml``, ``router_kind``).
    ``env_dir`` is relative to ``root`` or absolute; ``ports`` default to free ones.
    """
    env = {key: value for key, value in options.items() if key in _ENV_FIELDS}
    PdEnv(**env).write(root / env_dir)
    toml = {key: value for key, value in options.items() if key not in _ENV_FIELDS}
    text = pd_spec_toml(ports or PdPorts.free(), env_dir=env_dir, **toml)
    spec = root / "servelab.toml"
    spec.write_text(text, encoding="utf-8")
    return spec


def write_decode_spec(
    root: Path,
    port: int,
    *,
    role: str = "decode",
    start: str = "sim",
    knobs: Sequence[str] = (DEFAULT_KNOB,),
    env_text: str | None = None,
) -> Path:
    """A spec with one service, ``decode``, whose env file is ``env/decode.env`` (written when
    ``env_text`` is given)."""
    (root / "env").mkdir(parents=True, exist_ok=True)
    if env_text is not None:
        (root / "env" / "decode.env").write_text(env_text)
    spec = root / "servelab.toml"
    spec.write_text(
        f"""
state_dir = "state"
[services.decode]
role = "{role}"
url = "http://127.0.0.1:{port}"
start = "{start}"
env_file = "env/decode.env"
{_knobs_toml(knobs)}"""
    )
    return spec
