"""``servelab init``'s outputs: the spec's TOML for a running deployment, and what could not be
found, in words (:class:`~servelab.core.init.contract.InitResult` in, text out).

The spec is TOML that :func:`~servelab.core.deploy.spec.parse_spec` reads; every gap is said twice:
as a comment above the service it concerns, and in the note printed to the user.
"""

from __future__ import annotations

import json
import shlex
from typing import assert_never

from servelab.core.deploy.routers import ROUTERS
from servelab.core.init.contract import ANSWER_BYTES, FoundService, Gap, GapCode, InitResult
from servelab.core.redaction import redact

__all__ = ["gap_words", "init_note", "spec_toml"]


def gap_words(gap: Gap) -> str:
    """One gap in a sentence."""
    detail = gap.detail
    match gap.code:
        case GapCode.ROUTER_KIND_GUESSED:
            return f"the router's worker list does not tell its kind: {detail} is a guess"
        case GapCode.NO_MODEL:
            return f"no model listed at {detail}: traffic needs one (verify stops there)"
        case GapCode.ANSWER_TOO_LARGE:
            who = f"worker {gap.service}" if gap.service else "the router"
            return (
                f"{who}'s {detail} answer is over {ANSWER_BYTES >> 20} MiB: not read "
                "(a real one is under 64 KiB)"
            )
        case GapCode.NO_SERVER_INFO:
            return f"no server info at {detail} (vLLM: only with VLLM_SERVER_DEV_MODE=1)"
        case GapCode.NO_ENGINE_VERSION:
            return "its engine version could not be read"
        case GapCode.HOST_NOT_REACHED:
            return f"its host {detail} is not reached (give --ssh USER@HOST): start is a stub"
        case GapCode.NO_PROCESS:
            return f"no process found listening ({detail}): start is a stub"
        case GapCode.ARGV_REWRITTEN:
            return f"its process rewrote its command line ({detail!r}): its arguments are unknown"
        case GapCode.ENV_NOT_COPIED:
            return "not a systemd unit: its environment is not copied (give env_file if it has one)"
        case GapCode.ROUTER_START_GUESSED:
            return (
                'start = "router" is servelab\'s own launch of this router kind, built from '
                "the workers; its running arguments (policy, timeouts) are unknown"
            )
        case GapCode.NO_ROUTER_METRICS_PORT:
            return "its Prometheus port was not found: prometheus_port is the default"
        case GapCode.NO_BOOTSTRAP_PORT:
            return "the router lists no bootstrap port for it (vLLM: the engine's side channel)"
        case GapCode.NO_EXEC_START:
            return f"the unit {detail}'s ExecStart could not be read"
        case GapCode.SECRET_MASKED:
            return (
                "a secret in its command line is written as *** here: move it to an env file "
                "(env_file) and name the variable there"
            )
        case GapCode.BAD_WORKER:
            return f"the router lists a worker that is not one ({detail}): left out"
        case _:
            assert_never(gap.code)


def _q(value: str) -> str:
    return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's


def _list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(_q(v) for v in values) + "]"


def _stub(name: str) -> str:
    return f"echo 'servelab init could not read how {name} starts: edit its start' >&2; exit 1"


def _start_lines(svc: FoundService, result: InitResult) -> list[str]:
    fact = svc.start
    if fact.unit is not None:
        lines = [
            f"unit = {_q(fact.unit)}",
            f"start = {_q('sudo systemctl restart ' + shlex.quote(fact.unit))}",
            f"stop = {_q('sudo systemctl stop ' + shlex.quote(fact.unit))}",
        ]
        if fact.exec_start:
            lines.insert(0, f"# ExecStart: {fact.exec_start}")
        if fact.env_file:
            lines.append(f"env_file = {_q(fact.env_file)}")
        if fact.args_env:
            lines.append(f"args_env = {_q(fact.args_env)}")
        return lines
    if fact.argv:
        return [f"start = {_q(shlex.join(fact.argv))}"]
    if svc.role == "router" and fact.pid is not None:
        return ['start = "router"']
    return [f"start = {_q(_stub(svc.name))}"]


def _service(svc: FoundService, result: InitResult) -> list[str]:
    gaps = [g for g in result.gaps if g.service == svc.name]
    lines = [f"# {svc.name}: {gap_words(g)}" for g in gaps]
    if svc.model_path or svc.version:
        lines.append(
            f"# engine reports: model {svc.model_path or '?'}, version {svc.version or '?'}"
        )
    lines += [f"[services.{svc.name}]", f"role = {_q(svc.role)}"]
    if svc.host != "local":
        lines.append(f"host = {_q(svc.host)}")
    lines.append(f"url = {_q(svc.url)}")
    lines += _start_lines(svc, result)
    if svc.bootstrap_port is not None:
        lines.append(f"bootstrap_port = {svc.bootstrap_port}")
    if svc.depends_on:
        lines.append(f"depends_on = {_list(svc.depends_on)}")
    if svc.role == "router":
        lines += ["", f"[services.{svc.name}.router]", f"kind = {_q(result.router_kind)}"]
        if result.prometheus_port is not None:
            lines.append(f"prometheus_port = {result.prometheus_port}")
    return [*lines, ""]


def _hosts(result: InitResult) -> list[str]:
    lines = []
    for host in result.hosts:
        lines.append(f"[hosts.{host.name}]")
        if host.ssh is not None:
            lines += [f"ssh = {_q(host.ssh)}", f"port = {host.port}"]
            if host.identity_file:
                lines.append(f"identity_file = {_q(host.identity_file)}")
        lines.append("")
    return lines


def spec_toml(result: InitResult, router_url: str) -> str:
    """The spec of the deployment ``init`` read, as TOML (comments say what it could not find)."""
    router = ROUTERS[result.router_kind]
    shown = "".join(c if c.isprintable() else " " for c in redact(router_url))  # one line
    head = [
        f"# Written by `servelab init --router {shown}`: {router.kind} "
        f"(tested: {router.version}), {result.engine} workers, model "
        f"{result.model or '(none listed)'}.",
        "# Edit what the comments say was not found; then `servelab verify -f THIS_FILE`.",
    ]
    head += [f"# {gap_words(g)}" for g in result.gaps if g.service is None]
    lines = [
        *head,
        f"name = {_q(result.name)}",
        f"engine = {_q(result.engine)}",
        'state_dir = ".servelab"',
        "",
        *_hosts(result),
    ]
    for svc in result.services:
        lines += _service(svc, result)
    return "\n".join(lines).rstrip("\n") + "\n"


def init_note(result: InitResult, written: str) -> str:
    """What ``init`` found and wrote, then what it could not find (one line each)."""
    roles = [s.role for s in result.services]
    lines = [
        f"{written}: {result.router_kind} router, {result.engine}, "
        f"{roles.count('prefill')} prefill and {roles.count('decode')} decode workers, "
        f"model {result.model or '(none listed)'}"
    ]
    if result.gaps:
        lines.append("not found (edit the spec there):")
        lines += [f"  {g.service or 'deployment'}: {gap_words(g)}" for g in result.gaps]
    return "\n".join(lines) + "\n"
