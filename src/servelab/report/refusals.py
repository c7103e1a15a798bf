"""The words of a refusal to act on another deployment's things (issue 38; the types in
:mod:`servelab.core.deploy.refusals`): ``ab``/``tune --resume``, ``case restore``/``revert``/
``bisect --resume``, ``up`` over another deployment's port and ``verify`` of another deployment's
processes (pure: returns str). The command
line's failure boundary prints them for :class:`~servelab.core.deploy.refusals.RunRefused`,
:class:`~servelab.core.deploy.refusals.CaseRefused` and
:class:`~servelab.core.deploy.refusals.PortRefused`."""

from __future__ import annotations

from servelab.core.deploy.mark import Mark
from servelab.core.deploy.refusals import (
    AnothersBisection,
    AnothersProcesses,
    AnothersRestore,
    AnothersRevert,
    AnothersRun,
    NotAsLeft,
    NotUp,
    PortHeld,
    Recorded,
    Refusal,
    RouterNotListing,
    RouterOnWorkerPort,
    SpecToUse,
)
from servelab.core.printable import printable
from servelab.report.othersrecord import whose_words

__all__ = ["refusal_words"]

_RUN = {"ab": "A/B", "tune": "tune"}

#: Characters of another process's mark quoted at most (the mark is that process's to set).
_MARK_CHARS = 160


def _with(deployment: str, spec: SpecToUse, command: str) -> str:
    """How to act on ``deployment``'s thing instead: ``command`` it with its spec."""
    if spec.embedded:
        return f"{command} it without -f, where no servelab.toml is (the embedded default spec)"
    if spec.path is None:
        return f"{command} it with -f the spec of {deployment}"
    return f"{command} it with -f {spec.path}"


def _resume_run_with(spec: SpecToUse) -> str:
    if spec.embedded:
        return "the embedded default spec); resume it without -f, where no servelab.toml is"
    return f"spec {spec.path}); resume it with -f {spec.path}"


def _value(value: str | None) -> str:
    return "unset" if value is None else value


def _not_as_left(r: NotAsLeft) -> str:
    """Recorded before it named its deployment, and this deployment's file says otherwise."""
    now, left = _value(r.found), _value(r.left)
    if r.what is Recorded.REVERT and r.missing:  # the case's service is not this spec's
        return (
            f"case {r.run_id}'s revert of knob:{r.service}/{r.knob} was recorded before a change "
            f"named its deployment, and this deployment has no service {r.service}: restore it "
            "with -f the spec it ran with"
        )
    if r.what is Recorded.REVERT:
        return (
            f"case {r.run_id}'s revert of knob:{r.service}/{r.knob} was recorded before a change "
            f"named its deployment, and this deployment's {r.service} {r.knob} is {now}, not "
            f"{left} as the revert left it (another deployment's case, or a value changed "
            "since): restore it with -f the spec it ran with, or give --force"
        )
    if r.what is Recorded.BISECTION:
        head = (f"case {r.case_id}'s bisection {r.run_id} was recorded before a bisection named "
                "its deployment, and")  # fmt: skip
        tail = "resume it with -f the spec it ran with, or start a new bisection"
        held, whose = f"its bad value {left}", "another deployment's bisection"
    else:
        head = f"{_RUN[r.what]} {r.run_id} was recorded before a run named its deployment, and"
        tail = "resume it with -f the spec it ran with, or start a new one"
        held, whose = f"its original {left}", "another deployment's run"
    if r.missing:
        return f"{head} this deployment has no service {r.service}: {tail}"
    return (
        f"{head} this deployment's {r.service} {r.knob} is {now}, not {held} "
        f"({whose}, or a value changed since): {tail}"
    )


#: Characters of a router's process title quoted at most (the process sets its own title).
_WORD_CHARS = 64


def _of_deployment(mark: str) -> str:
    """``<deployment>/<service>@<address>#<place>`` as words: ``service@address of deployment
    NAME`` (its state folder's place left out; control characters escaped, cut to
    :data:`_MARK_CHARS`)."""
    if len(mark) > _MARK_CHARS:
        mark = mark[:_MARK_CHARS] + "…"
    shown = printable(mark)
    parsed = Mark.parse(shown)
    return f"marked {shown}" if parsed is None else f"{parsed.served} of deployment {parsed.name}"


def _not_up(r: NotUp) -> str:
    """Which services do not answer ready, each with its answer; that nothing was touched."""
    answers = "; ".join(f"{service}: {probe.describe()}" for service, probe in r.down)
    names = ", ".join(service for service, _ in r.down)
    up = " ".join(("servelab", "up", *r.spec_args))
    needs = (
        "the services it sends to up (the entry point and the workers behind it) and refuses "
        "before sending anything"
        if r.sends_only
        else "every service ready and refuses before starting or stopping anything"
    )
    return (
        f"the deployment is not up ({names} not ready: {answers}): {r.command} needs {needs}; "
        f"bring it up with `{up}` (or see `servelab status`)"
    )


def refusal_words(refusal: Refusal) -> str:
    """What ``refusal`` refused, why, and how to do it instead, on one line."""
    match refusal:
        case AnothersRun(kind, run_id, whose, spec):
            return f"{_RUN[kind]} {run_id} was {whose}'s ({_resume_run_with(spec)}"
        case AnothersRestore(case_id, target, whose, ours, spec):
            return (
                f"case {case_id}'s revert of {target} was {whose}'s, not this deployment's "
                f"({ours}): restoring here would write {whose}'s values into these files; "
                f"{_with(whose, spec, 'restore')}"
            )
        case AnothersRevert(case_id, target, whose, ours, spec):
            return (
                f"case {case_id} holds {whose}'s revert of {target}, not this deployment's "
                f"({ours}); {_with(whose, spec, 'revert')}, or open a case for this deployment"
            )
        case AnothersBisection(case_id, bisect_id, whose, ours, deployment, spec):
            return (
                f"case {case_id}'s bisection {bisect_id} was started on {whose}, not this "
                f"deployment ({ours}): its probes were measured there; "
                f"{_with(deployment, spec, 'resume')}"
            )
        case NotAsLeft():
            return _not_as_left(refusal)
        case NotUp():
            return _not_up(refusal)
        case PortHeld(service, port, host, pid, mark):
            return (
                f"{service}: port {port} on {host} is held by pid {pid}, {_of_deployment(mark)}: "
                "this spec's port collides with it; not started over it, not adopted (give this "
                "spec's service another port)"
            )
        case RouterNotListing(service, port, host, pid, missing):
            return (
                f"{service}: port {port} on {host} is held by pid {pid}, a router not started by "
                f"this deployment that does not list {', '.join(missing)}: this spec's router "
                "port is another router's; not started over it (give this spec another router "
                "port)"
            )
        case RouterOnWorkerPort(service, role, port, host, pid, word):
            if len(word) > _WORD_CHARS:
                word = word[:_WORD_CHARS] + "…"
            return (
                f"{service}: port {port} on {host} is held by pid {pid}, a router "
                f"({printable(word)}), not a {role} worker: this spec's {service} url points at "
                "a router (another deployment's?); not adopted as its worker, not started over it "
                f"(give {service} its own port)"
            )
        case AnothersProcesses():
            return _anothers_processes(refusal)


def _anothers_processes(refusal: AnothersProcesses) -> str:
    """``verify``, ``ab`` or ``tune`` of services another deployment's processes serve."""
    held = "; ".join(
        f"{p.service} (pid {p.pid} on {p.host}) is a process of {whose_words(p.others)}"
        for p in refusal.processes
    )
    command = refusal.command
    if command == "verify":
        would = ("verifying here would read that deployment's processes and record their verdict "
                 "as this one's (nothing recorded)")  # fmt: skip
    else:
        would = (f"{command} here would set this spec's env files and restart that deployment's "
                 "processes (nothing written, restarted or journalled)")  # fmt: skip
    return (
        f"{command} refused: {held}, not this deployment's: {would}; {command} it with -f the "
        "spec of the state folder that started them, or give this spec its own ports and bring "
        "it up"
    )
