"""``--resume ID`` takes the journalled run's own options: any other given with it is refused.

A resumed ``ab`` or ``tune`` continues the plan its journal stored (its knob and values, load,
workload, design, ``--keep``...); an option typed beside ``--resume`` would be silently ignored,
so it is refused (a usage error, exit 2, naming each one), whether or not its value equals the
stored one. Only where the run reads from and writes to may be given: the spec, the ledger,
``--json``, ``--export`` and ``--wait``.
"""

from __future__ import annotations

import click
from click.core import ParameterSource

__all__ = ["refuse_options_with_resume"]

#: The parameters a resumed run takes from its command line (the rest from its journal).
RESUMED_TAKES = frozenset({"spec_path", "ledger_path", "resume", "as_json", "export", "wait"})


def refuse_options_with_resume(what: str) -> None:
    """Under ``--resume``: refuse every option of the current command given on its command line
    (or in the environment) that the journal's own stores; ``what`` names the run (``A/B``)."""
    ctx = click.get_current_context()
    given = [
        param.opts[0]
        for param in ctx.command.params
        if param.name is not None
        and param.name not in RESUMED_TAKES
        and ctx.get_parameter_source(param.name)
        in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    ]
    if given:
        raise click.UsageError(
            f"--resume continues the journalled {what} with the options it was started with: "
            f"{', '.join(given)} would be ignored; give --resume alone (with -f, --ledger, "
            "--json, --export, --wait)"
        )
