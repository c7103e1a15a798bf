"""``servelab init``: write a spec for a running deployment from what it can read (the router's
worker list, each worker's server info, the processes or systemd units on its host); it says what
it could not find, and the user edits the rest.

Exit 0 when the spec is written; 2 on bad input: bad options (an existing ``-o`` file that holds
anything without ``--force``, ``-o -`` with ``--json``) and whatever the router answers that init
cannot use (:class:`~servelab.errors.WorkerListError`: over a bound, not a worker list, no usable
prefill or decode worker; never a spec of 0 prefill or 0 decode); 1 when the router cannot be
read at all.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from servelab.cli.boundary import json_option, print_json, run
from servelab.cli.options import FORCE_HELP
from servelab.cli.sharedoption import Parsed
from servelab.core.deploy.names import SAFE_NAME_RULE, unsafe_name
from servelab.core.deploy.spec import HostSpec, parse_spec
from servelab.core.init.contract import InitResult
from servelab.core.redaction import redact
from servelab.core.urls import parse_url
from servelab.core.whole import echoed
from servelab.errors import OptionError
from servelab.io.files import write_stream, write_to
from servelab.io.overwrite import check_overwrite
from servelab.ops.init import InitOptions, discover
from servelab.report.init import gap_words, init_note, spec_toml

__all__ = [
    "init_command",
]


def _host(ssh: str | None, identity_file: str | None) -> HostSpec | None:
    if ssh is None:
        return None
    user_host, _, port = ssh.partition(":")
    if port and not port.isdigit():
        raise OptionError(f"--ssh {ssh}: the port after ':' must be a number")
    try:
        return HostSpec(ssh=user_host, port=int(port or 22), identity_file=identity_file)
    except ValueError as exc:
        raise OptionError(f"--ssh {ssh}: must be USER@HOST[:PORT]") from exc


def _router_url(url: str) -> str:
    """``--router`` as init may write it into the spec: refused when it holds a credential (a
    password, a key as its user, a secret query parameter: what the one redaction policy masks),
    which the spec would keep in clear, then when it is not a server's URL
    (:func:`~servelab.core.urls.parse_url`); the error quotes it masked."""
    if redact(url) != url:
        raise OptionError(
            f"{redact(url)} holds a credential, which init would write into the "
            "spec: give the router's URL without it (a router that wants a key takes it as "
            "its --api-key: add it to the router's args in the spec, or to its env file)"
        )
    return parse_url(url)


def _json(result: InitResult, written: str) -> dict[str, object]:
    return {
        "ok": True,
        "written": written,
        "router_kind": str(result.router_kind),
        "engine": result.engine,
        "model": result.model,
        "services": {s.name: {"role": s.role, "url": s.url} for s in result.services},
        "gaps": [
            {"service": g.service, "code": str(g.code), "detail": g.detail, "words": gap_words(g)}
            for g in result.gaps
        ],
    }


def _deployment_name(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """``--name`` checked as the spec checks it, before the router is asked anything (it was
    refused by the written spec's check, which named ``-o``'s file: ``-``)."""
    if unsafe_name([value]) is not None:
        raise click.BadParameter(f"{SAFE_NAME_RULE}; got {echoed(value)}")
    return value


@click.command("init")
@click.option(
    "--router",
    "router_url",
    type=Parsed("URL", _router_url),
    default="http://127.0.0.1:30001",
    show_default=True,
    help="The running router's URL (as the deployment's host sees it when --ssh is given).",
)
@click.option(
    "--ssh",
    "ssh",
    default=None,
    metavar="USER@HOST[:PORT]",
    help="The SSH host the deployment runs on (default: this machine).",
)
@click.option("--identity-file", default=None, help="The SSH key for --ssh.")
@click.option(
    "--name", default="servelab", show_default=True, callback=_deployment_name,
    help="The spec's name.",
)  # fmt: skip
@click.option(
    "-o",
    "--output",
    "out",
    default="servelab.toml",
    show_default=True,
    help="Where the spec goes ('-': standard output).",
)
@click.option("--force", is_flag=True, help=FORCE_HELP)
@json_option
def init_command(
    router_url: str,
    ssh: str | None,
    identity_file: str | None,
    name: str,
    out: str,
    force: bool,
    as_json: bool,
) -> None:
    """Write a spec for the running deployment behind --router.

    It reads the router's worker list (URLs, roles, bootstrap ports; smg, sglang-router or
    vllm-router, told by its answer), each worker's server info (model, version), and on the
    deployment's host each service's process or systemd unit (ExecStart, EnvironmentFile).
    What it could not find is said here and in the spec's comments: edit those, then run
    `servelab verify -f SPEC`.
    """
    if out == "-" and as_json:
        raise OptionError("-o - writes the spec on standard output, where --json writes its "
                          "document: give one of them (or -o FILE with --json)")  # fmt: skip
    if out != "-":
        check_overwrite(Path(out), force)
    options = InitOptions(router_url, _host(ssh, identity_file), name)
    result = run(discover(options))
    text = spec_toml(result, router_url)
    parse_spec(text, source=out)  # what init writes, servelab reads
    if out == "-":
        write_stream(sys.stdout.fileno(), text.encode())
    else:
        write_to(Path(out), text.encode())
    written = "standard output" if out == "-" else out
    if as_json:
        print_json(_json(result, written))
    else:
        click.echo(init_note(result, written), nl=False, err=out == "-")
