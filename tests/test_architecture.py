"""The house rules that can be checked mechanically: imports flow one way, public API is explicit,
no module grows past 450 lines (but the few named, held at their size), library code never prints
or exits, no re-exports, one codec."""

from __future__ import annotations

import ast
import functools
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import servelab

SRC = Path(servelab.__file__).parent
LAYERS = ["core", "sim", "io", "ops", "report", "cli"]
# What each layer may import from servelab (besides itself, errors and the package root).
ALLOWED = {
    "core": set(),
    "sim": {"core"},
    "io": {"core"},
    "ops": {"core", "io", "sim"},
    "report": {"core", "ops"},
    "cli": {"core", "sim", "io", "ops", "report"},
}


#: The most lines a module has (docs/architecture.md's gates).
MAX_LINES = 450
#: The modules still over it, each at most its size today: one concept each, not yet split by
#: meaning (a split made only to pass the gate is worse than none).
OVER_MAX: dict[str, int] = {}


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py"))


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once per run (every rule below reads every module)."""
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a module's tree in ``ast.walk`` order, walked once per run."""
    return tuple(ast.walk(_tree(path)))


def _layer(path: Path) -> str | None:
    rel = path.relative_to(SRC).parts
    return rel[0] if len(rel) > 1 and rel[0] in LAYERS else None


def _servelab_imports(path: Path) -> set[str]:
    tree = _tree(path)
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "servelab" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_flow_one_way(path: Path) -> None:
    layer = _layer(path)
    if layer is None:
        return
    used = _servelab_imports(path) & set(LAYERS)
    forbidden = used - ALLOWED[layer] - {layer}
    assert not forbidden, f"{layer}/ must not import {sorted(forbidden)}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_modules_stay_small(path: Path) -> None:
    """No module over :data:`MAX_LINES` lines, but the ones :data:`OVER_MAX` names, each held at
    its size until it is split by meaning (never to pass this gate)."""
    lines = path.read_text(encoding="utf-8").count("\n")
    rel = str(path.relative_to(SRC))
    ceiling = OVER_MAX.get(rel, MAX_LINES)
    assert lines <= ceiling, f"{rel} has {lines} lines (at most {ceiling})"


def test_the_modules_over_the_limit_are_still_over_it() -> None:
    """A module split below the limit leaves :data:`OVER_MAX` (the list only shrinks)."""
    under = [rel for rel in OVER_MAX if (SRC / rel).read_text("utf-8").count("\n") <= MAX_LINES]
    assert not under, f"drop from OVER_MAX (now within {MAX_LINES} lines): {under}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_print_or_exit_outside_cli(path: Path) -> None:
    if _layer(path) == "cli" or path.name == "__main__.py":
        return
    for node in _nodes(path):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id != "print", f"print() in {path.name}:{node.lineno}"
        if isinstance(node, ast.Attribute) and node.attr == "exit":
            assert not (isinstance(node.value, ast.Name) and node.value.id == "sys"), (
                f"sys.exit in {path.name}:{node.lineno}"
            )


def _public_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(servelab.__path__, "servelab."):
        if not info.ispkg and not info.name.endswith("__main__"):
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", _public_modules())
def test_public_api_is_explicit(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.__all__ names missing {symbol}"


#: What core/ may never import: the clock, processes, files, sockets, databases, HTTP.
_CORE_BANNED = {
    "aiohttp", "asyncio", "socket", "subprocess", "sqlite3", "asyncssh", "os", "time", "pathlib",
    "shutil", "tempfile", "glob", "io", "http", "ssl", "select", "selectors", "signal",
    "threading", "multiprocessing", "datetime", "urllib.request", "servelab.io",
}  # fmt: skip


def _imported(node: ast.AST) -> set[str]:
    """Every dotted prefix of the modules an import statement names (``a.b.c``: a, a.b, a.b.c)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        names = [node.module]
    else:
        return set()
    parts = [name.split(".") for name in names]
    return {".".join(p[: i + 1]) for p in parts for i in range(len(p))}


def test_core_has_no_io_imports() -> None:
    for path in (SRC / "core").rglob("*.py"):
        for node in _nodes(path):
            found = _imported(node) & _CORE_BANNED
            assert not found, f"core/{path.name}:{getattr(node, 'lineno', 0)} imports {found}"


@pytest.mark.parametrize("path", sorted((SRC / "core").rglob("*.py")), ids=lambda p: p.name)
def test_core_opens_no_files(path: Path) -> None:
    """No ``open()``, ``input()`` or ``print()`` in the pure layer: it computes on its input."""
    for node in _nodes(path):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in {"open", "input", "print"}, (
                f"core/{path.name}:{node.lineno} calls {node.func.id}()"
            )


#: Function-local imports that are allowed, and why. Everything else imports at the top, so the
#: import graph (and the layering rule above) is what the module headers say.
_LOCAL_IMPORTS_ALLOWED = {
    # matplotlib costs about 0.5 s to import (the whole CLI about 0.65 s); only plotting pays it.
    ("report/plots.py", "matplotlib"),
    # scipy.stats (and numpy with it) costs about 1.5 s; only the statistics pay it.
    ("core/stats.py", "scipy"),
    ("core/stats.py", "numpy"),
    # the OpenAI SDK (an optional extra) costs seconds to import; only `soak --client openai` pays.
    ("io/http/sdk.py", "openai"),
    # the entry point installs its quiet Ctrl-C handler before the CLI's imports (about a second).
    ("__main__.py", "servelab"),
    # the A/B and soak records (their results' types) cost about 0.3 s of CPU, verify's records
    # (its checks, the answers and SSE parsers with them) about 0.1 s: only a command that reads
    # or writes them pays, not every one that opens the ledger (benchmarks/cli_startup.py).
    ("io/ledger/tables.py", "servelab"),
    ("io/ledger/ledger.py", "servelab"),
    # aiohttp costs about 0.25 s of CPU: `knob get/set/diff` read files, and ask an engine (and
    # import the HTTP client) only on the paths that do.
    ("ops/arguments.py", "servelab"),
    ("ops/reads.py", "servelab"),
    # the A/B result's types (about 0.1 s of CPU): only `ab` and `tune`, which take --metric, pay.
    ("cli/options.py", "servelab"),
    # the co-restart and verify machinery (aiohttp with it, about 0.3 s): only `case revert` and
    # `restore` pay, not `case open/show/list/suspect/evidence/resolve`.
    ("ops/case/case.py", "servelab"),
    # the same for the words of a revert or restore stopped by a signal (cli/interrupted.py, the
    # put-back's machinery with it): `case show` and the other reads stay light.
    ("cli/case.py", "servelab"),
    # every feature's progress events and their words: only a command that prints progress pays.
    ("cli/common.py", "servelab"),
    # the case, soak and verify words of `ledger export` (about 0.5 s): `ledger stats/prune/vacuum`
    # skip them.
    ("report/ledger.py", "servelab"),
    # rich costs about 25 ms of CPU: the consoles are made on first use, so `servelab --help` and
    # a simulated engine's start skip it (tests/cli/test_lazy_cli.py).
    ("cli/boundary.py", "rich"),
    # PyYAML costs about 10 ms: only a `--config` file's parse pays (tests/cli/test_lazy_cli.py).
    ("core/knobs/configyaml.py", "yaml"),
}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_function_local_imports(path: Path) -> None:
    rel = str(path.relative_to(SRC))
    for func in _nodes(path):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(func):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                top = min(_imported(node) or {"?"}, key=len)
                assert (rel, top) in _LOCAL_IMPORTS_ALLOWED, (
                    f"{rel}:{node.lineno} imports {top} inside {func.name}(): import at the top"
                )


def _is_attr(node: ast.AST, owner: str, *names: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr in names
        and isinstance(node.value, ast.Name)
        and node.value.id == owner
    )


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_exits_and_raw_output_only_in_cli(path: Path) -> None:
    """Only cli/ picks exit codes and writes to the terminal: no ``raise SystemExit``,
    ``os._exit``, ``sys.exit`` or ``sys.stdout/stderr.write`` anywhere else."""
    if _layer(path) == "cli" or path.name == "__main__.py":
        return
    rel = path.relative_to(SRC)
    for node in _nodes(path):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            assert not (isinstance(exc, ast.Name) and exc.id == "SystemExit"), (
                f"{rel}:{node.lineno} raises SystemExit"
            )
        assert not _is_attr(node, "os", "_exit"), f"{rel}:{getattr(node, 'lineno', 0)} os._exit"
        assert not _is_attr(node, "sys", "exit"), f"{rel}:{getattr(node, 'lineno', 0)} sys.exit"
        if isinstance(node, ast.Attribute) and node.attr == "write":
            assert not _is_attr(node.value, "sys", "stdout", "stderr"), (
                f"{rel}:{node.lineno} writes to sys.stdout/stderr"
            )


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_aiohttp_and_asyncssh_only_in_io_and_sim(path: Path) -> None:
    """Third-party network clients are translated at the io/ boundary (the simulator serves)."""
    if _layer(path) in ("io", "sim"):
        return
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            mods = {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mods = {node.module.split(".")[0]}
        else:
            continue
        found = mods & {"aiohttp", "asyncssh"}
        assert not found, f"{path.relative_to(SRC)}:{node.lineno} imports {sorted(found)}"


#: The ``__init__.py`` that hold more than nothing: the package root (its version and the one
#: public shortcut, ``ServelabError``), ``cli/`` (the console script's group and its command
#: table: a command's module is imported on first use) and ``sim/`` (a docstring naming its
#: modules, nothing imported).
_INIT_WITH_CODE = {SRC, SRC / "cli", SRC / "sim"}


def _servelab_names_imported(tree: ast.Module) -> set[str]:
    """The names a module's top level imports from servelab (``from servelab.x import name``)."""
    return {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("servelab")
        for alias in node.names
    }


def _exported(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return [str(e.value) for e in ast.walk(node.value) if isinstance(e, ast.Constant)]
    return []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_re_exports(path: Path) -> None:
    """docs/architecture.md: a name is imported from the module that defines it. No module's
    ``__all__`` names what it imported from servelab (the package root's ``ServelabError`` is
    the one public shortcut); a folder's ``__init__.py`` is empty (but :data:`_INIT_WITH_CODE`)."""
    if path == SRC / "__init__.py":
        return
    if path.name == "__init__.py" and path.parent not in _INIT_WITH_CODE:
        assert not path.read_text(encoding="utf-8").strip(), f"{path.relative_to(SRC)} not empty"
        return
    tree = _tree(path)
    again = set(_exported(tree)) & _servelab_names_imported(tree)
    assert not again, f"{path.relative_to(SRC)} re-exports {sorted(again)}"


# core's folders (and its top-level modules), lowest first: a module of core imports only from its
# own folder and the ones before it, so no arrow runs back up between them. The codec's folder is
# the ground floor; the facts (a deployment, knobs, load, telemetry) come next, then the features
# that read them, then the composites (a case uses A/Bs and soaks); the union of every feature's
# progress and the ledger's export, which import every feature, sit on top.
CORE_ORDER = [
    "ledger",  # codec, jsonvalues, retention: what every record is encoded with
    "printable",  # text from the network with its control characters escaped
    "confusables",  # a name as it reads (NFKC, homoglyphs): redaction's secret names use it
    "prosesecret",  # a secret typed in prose (``secret X``): credentials and redaction use it
    "credentials",  # credentials in command text (Basic, a glued -p, -u user:pw): redaction uses it
    "listed",  # argv lists as Python/JSON print them, ODBC's Pwd=: redaction uses it
    "paired",  # names and values side by side (a Kubernetes env list): redaction uses it
    "secretnames",  # which names (and headers) say secret: redaction uses it
    "redaction",  # the one redaction policy: what every feature stores and shows goes through it
    "redacted",  # the policy as the serializer types of the contracts (pydantic): they use it
    "stats",
    "whole",  # the one parser of a whole number a user types: ab's --max-rounds and options use it
    "urls",  # the one parser of a server URL a user types: options and the spec's fields use it
    "engines",  # each engine's facts (readiness paths, metrics names, default knob)
    "knob",  # a knob itself (name, kind, value comparison): a spec validates its knobs with it
    "deploy",
    "knobs",
    "load",
    "telemetry",
    "answers",  # probes, checks and the paired rule: verify, bench, ab and case compose them
    "verify",
    "restart",  # a restart: deploy's steps then verify's checks
    "init",  # what `servelab init` read of a running deployment: deploy's facts
    "bench",
    "soak",
    "ab",
    "case",
    "investigate",  # the evidence loop: composes soak, case and verify's records
    "options",
    "bounds",  # the load's counts and a plan's change: parsers on top of options
    "progress",
    "ledger.export",
]
# Arrows back up still there, each with why; the test fails once one is gone (drop it here too).
KNOWN_BACK_ARROWS: dict[tuple[str, str], set[str]] = {}


def _core_unit(path: Path) -> str:
    """``path``'s place in :data:`CORE_ORDER`: its folder, or its own name at core's top."""
    rel = path.relative_to(SRC / "core")
    if rel.parts == ("ledger", "export.py"):
        return "ledger.export"
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _core_imports(path: Path) -> set[str]:
    """The core units ``path`` imports (``servelab.core.X...``, ``from servelab.core.X import
    module`` too), by :func:`_core_unit`."""
    found: set[str] = set()
    for node in _nodes(path):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            module = SRC.joinpath(*parts[1:])
            if parts[:2] == ["servelab", "core"] and module.with_suffix(".py").is_file():
                found.add(_core_unit(module.with_suffix(".py")))
            elif parts[:2] == ["servelab", "core"] and len(parts) > 2 and module.is_dir():
                found.add(_core_unit(module / "__init__.py"))
    return found


def _core_back_arrows() -> dict[tuple[str, str], set[str]]:
    """Every import that runs from a core unit to one above it: (from, to) -> the modules."""
    arrows: dict[tuple[str, str], set[str]] = {}
    rank = {unit: index for index, unit in enumerate(CORE_ORDER)}
    for path in sorted((SRC / "core").rglob("*.py")):
        unit = _core_unit(path)
        for used in _core_imports(path) - {unit}:
            if rank[used] > rank[unit]:
                arrows.setdefault((unit, used), set()).add(str(path.relative_to(SRC / "core")))
    return arrows


def test_core_order_names_every_folder() -> None:
    units = {_core_unit(path) for path in (SRC / "core").rglob("*.py")} - {"__init__"}
    assert units == set(CORE_ORDER)


def test_no_arrow_runs_back_up_between_cores_folders() -> None:
    assert _core_back_arrows() == KNOWN_BACK_ARROWS


#: Where a value is turned into JSON-ready data other than by the codec, and why. Everything else
#: (core, ops, report, cli) encodes through ``core/ledger/codec.py``: docs/architecture.md's
#: "one codec".
_OTHER_SERIALIZERS = {
    # the spec is a pydantic model read from TOML; its hash is over its model_dump by field name
    # (what every stored spec hash was computed from)
    "core/deploy/spec.py",
    # the OpenAI SDK's own pydantic chunks, re-encoded as the SSE lines the decoder reads
    "io/http/sdk.py",
    # io's own state files (a pid record, the lock's holder) and the row writer's raw spans and
    # column fallback: io's types, written and read by io alone
    "io/hosts/processes.py",
    "io/lock.py",
    "io/ledger/ledger.py",
    "io/ledger/rows.py",
}
_SERIALIZER_NAMES = {"asdict", "astuple", "TypeAdapter", "model_dump", "model_dump_json"}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_one_codec(path: Path) -> None:
    """No ``dataclasses.asdict``, ``TypeAdapter`` or ``model_dump`` outside the codec (and the
    simulator, and the few places named above with their reason)."""
    rel = str(path.relative_to(SRC))
    if _layer(path) == "sim" or rel in _OTHER_SERIALIZERS or rel == "core/ledger/codec.py":
        return
    for node in _nodes(path):
        name = (
            node.id if isinstance(node, ast.Name)
            else node.attr if isinstance(node, ast.Attribute)
            else None
        )  # fmt: skip
        assert name not in _SERIALIZER_NAMES, (
            f"{rel}:{getattr(node, 'lineno', 0)} uses {name}: encode through core/ledger/codec.py"
        )


# -- JSON stays at the edge ----------------------------------------------------------------------
#: Uses of ``dict[str, Any]``/``Mapping[str, Any]``/``JsonObject`` outside io, sim and the codec,
#: and public functions there taking or returning one: ceilings that only come down. The target
#: (issue 31) is 20 uses, each with its reason, and no public function; today's counts are what
#: is left of 210 uses and 86 public functions before bench, verify, deploy and restart had their
#: contracts, of 204 and 68 before the ``--json`` builders of report/ returned the document's
#: text, and of 191 and 49 before bench's stored run, verify's flat check, the rolling restart's
#: report, the engine's report, the trace generator, the ledger export and the case timeline's
#: events were read and written as their types, and of 172 and 25 before a stored soak had one
#: typed reader, the case outcomes' ``--json`` moved to report/case and a soak's request body and
#: messages were typed (``core/soak/body.py`` ``ChatBody``), and of 136 and 5 before the packed
#: per-request records moved to the ledger (``io/ledger/packed.py``), a JSON-valued argument's
#: key was set on its text (``core/knobs/argv.py`` ``json_key_set``), the export's raw rows
#: became ``core/ledger/rawrow.py`` ``RawRow`` and a bisection's bench and a case test's workload
#: were read as their types, and of 119 before the OpenAI chat JSON sent and read and a trace's
#: line were typed (``core/load/chat.py``, ``core/load/trace.py`` ``TraceLine``), a bench level's
#: and a stored soak's older ages were ``TypedDict`` s (``core/bench/upgrade.py``,
#: ``core/soak/shapes.py``), a bench run's config, summary and records were ``Stored``
#: ``TypedDict`` s (``core/bench/shapes.py``), an answer's stream chunks, a probe's body and
#: schema, and a Prometheus server's answers were read as TypedDicts and typed series
#: (``core/telemetry/promapi.py``), a deploy row's preflight refusal was typed and a rolling
#: restart's recovery body came from the router's own adapter, verify's, restart's, soak's, the
#: case actions' and ``case show``'s ``--json`` were built typed as ``report/document.py``
#: ``Worded``, an engine's report was read through its type and a recorded revert's or restore's
#: outcome was worded from its type, and of 35 before a stored check's JSON was typed
#: (``core/verify/record.py`` ``CheckJson``: JSON values by key), and of 29 before the rolling
#: report's serializers returned JSON values (``ops/deploy/rolling_results.py``), and of 25
#: before the ledger export's rows were JSON values (``report/ledger.py`` ``Row``) (what is left:
#: :data:`JSON_LEFT`, :data:`JSON_PUBLIC_LEFT`).
MAX_JSON_TYPES = 16
MAX_JSON_PUBLIC = 0
#: The public functions still taking or returning a JSON dict, each with its reason (none).
JSON_PUBLIC_LEFT: dict[str, str] = {}
_JSON_FREE_LAYERS = ("io", "sim")


#: Where the JSON dict types left outside io, sim and the codec are, each file with its reason
#: (issue 31: "each with its reason"); a file that no longer has one loses its line here.
JSON_LEFT: dict[str, str] = {
    # open-ended documents of the outside world, whose keys are data, not fields
    "core/knobs/argv.py": "a JSON-valued argument's own document (any keys), edited by key path",
    "core/knobs/configfile.py": "the engine's --config YAML mapping: its keys are argument names",
    "core/knobs/serverinfo.py": "EngineReport.doc, an engine's /server_info as sent: every "
    "server argument by name (read only through EngineReport, by path)",
    "core/telemetry/spans.py": "a received span's attributes: OTLP attributes, any keys",
    "core/ledger/rawrow.py": "a table's row as stored, of any age, exported as it is",
    # stored shapes of any age, read by kind or upgraded before they are typed
    "core/case/model.py": "a recorded case event's detail, decoded by its kind in report/ (the "
    "kinds' types live above core/case: investigate, ab)",
    "core/case/record.py": "the same detail as the case_events row stores it",
    "core/deploy/record.py": "a deploy row's detail: DeployReport, RestartReport (core/restart, "
    "above core/deploy), RollingReport (ops) or PreflightFailed, and rows of any age",
    "core/ab/record.py": "an A/B row's config as it ran (AbConfig is in ops; rows of any age)",
    "core/ab/result.py": "an older A/B result's design, upgraded before it is decoded",
    "report/document.py": "Worded's merge of a contract's encoding and its words: the one place",
    "report/docs.py": "a recorded case event's detail, read by its kind",
    "report/bench.py": "bench --json (report/bench.py is at its size ceiling)",
    "cli/boundary.py": "the failure document, whose keys depend on what the command noted",
}


def test_each_json_dict_left_has_its_reason() -> None:
    """Every file still holding a JSON dict type outside io, sim and the codec says why."""
    files = {rel for rel, tree in _json_checked() if any(map(_is_json_type, ast.walk(tree)))}
    unexplained, stale = sorted(files - set(JSON_LEFT)), sorted(set(JSON_LEFT) - files)
    assert not unexplained, f"a JSON dict type with no reason given: {unexplained}"
    assert not stale, f"a reason for a file that holds none (remove it): {stale}"


#: Files holding a mapping typed ``dict``/``Mapping[str, JsonValue]`` (exact JSON, checked by mypy,
#: but still a JSON object rather than a contract) outside io, sim and the codec, each with why:
#: the stored shapes of older ages and the flat stored or exported layouts. Not counted in
#: :data:`MAX_JSON_TYPES`; held here so that no other module starts passing JSON around.
JSON_VALUE_MAPPINGS = {
    "core/bench/shapes.py": "a stored bench run's older ages (level, summary, failures)",
    "core/soak/shapes.py": "a stored soak's per-session outcomes of any age, decoded later",
    "core/verify/record.py": "a check's flat stored JSON: data keys beside layer/service/ok/code",
    "ops/deploy/rolling_results.py": "the rolling report's flat stored shape (its serializers)",
    "report/ledger.py": "the ledger export's rows, encoded, with their words added",
}


def _is_json_value_mapping(node: ast.AST) -> bool:
    return _str_mapping_to(node) == "JsonValue"


def test_json_valued_mappings_stay_in_the_stored_shapes() -> None:
    """A ``Mapping[str, JsonValue]`` is JSON still: only stored and exported layouts hold one."""
    files = {
        rel for rel, tree in _json_checked() if any(map(_is_json_value_mapping, ast.walk(tree)))
    }
    unexplained = sorted(files - set(JSON_VALUE_MAPPINGS))
    stale = sorted(set(JSON_VALUE_MAPPINGS) - files)
    assert not unexplained, f"a JSON-valued mapping outside the stored shapes: {unexplained}"
    assert not stale, f"a reason for a file that holds none (remove it): {stale}"


def _str_mapping_to(node: ast.AST) -> str | None:
    """The value type's name of a ``dict``/``Mapping``/``MutableMapping[str, V]`` annotation."""
    if not isinstance(node, ast.Subscript) or not isinstance(node.slice, ast.Tuple):
        return None
    base = node.value
    name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
    if name not in ("dict", "Mapping", "MutableMapping") or len(node.slice.elts) != 2:
        return None
    key, value = node.slice.elts
    value_name = value.id if isinstance(value, ast.Name) else getattr(value, "attr", None)
    return value_name if isinstance(key, ast.Name) and key.id == "str" else None


def _is_json_type(node: ast.AST) -> bool:
    if isinstance(node, ast.Name | ast.Attribute):
        return (node.id if isinstance(node, ast.Name) else node.attr) == "JsonObject"
    return _str_mapping_to(node) == "Any"


def _json_checked() -> list[tuple[str, ast.Module]]:
    return [
        (rel, _tree(path))
        for path in _modules()
        if (rel := str(path.relative_to(SRC))).split("/")[0] not in _JSON_FREE_LAYERS
        and rel != "core/ledger/codec.py"
    ]


def _public_json_functions(rel: str, body: list[ast.stmt], owner: str = "") -> list[str]:
    found = []
    for node in body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            found += _public_json_functions(rel, node.body, f"{owner}{node.name}.")
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or (
            node.name.startswith("_") and not node.name.endswith("__")
        ):
            continue
        args = node.args
        annotations = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        annotations += [node.returns, args.vararg.annotation if args.vararg else None]
        if any(_is_json_type(n) for a in annotations if a is not None for n in ast.walk(a)):
            found.append(f"{rel}:{owner}{node.name}")
    return found


def test_json_stays_at_the_edge() -> None:
    """docs/architecture.md: a dict of JSON crosses no layer; the typed contract does."""
    checked = _json_checked()
    uses = sum(1 for _rel, tree in checked for node in ast.walk(tree) if _is_json_type(node))
    public = [f for rel, tree in checked for f in _public_json_functions(rel, tree.body)]
    assert uses <= MAX_JSON_TYPES, f"{uses} JSON dict types outside io/sim/codec"
    assert len(public) <= MAX_JSON_PUBLIC, f"{len(public)} public functions take or return one"
    unexplained = sorted(set(public) - set(JSON_PUBLIC_LEFT))
    assert not unexplained, f"take or return a JSON dict, with no reason given: {unexplained}"
    assert len(JSON_PUBLIC_LEFT) <= MAX_JSON_PUBLIC


#: The one writer of files (issue 38, "one writer"): every other module hands it its bytes.
_WRITER = "io/files.py"
#: Writes that cannot go through the writer, and why.
_WRITES_ALLOWED = {
    # the lock's holder is written into the locked file itself: a rename would drop the lock.
    ("io/lock.py", "os.open"), ("io/lock.py", "os.ftruncate"), ("io/lock.py", "os.pwrite"),
    # /dev/null opened to point a lost stdout/stderr at it (Python's note on SIGPIPE): no file.
    ("cli/streams.py", "os.open"),
    # a text stream onto descriptor 1 or 2 when Python made none (``>&-``): no file either.
    ("cli/streams.py", "open(mode='w')"),
}  # fmt: skip
#: Calls that write (or create, move, truncate) a file, by attribute name or dotted name.
_WRITING_METHODS = {"write_text", "write_bytes", "rename", "symlink_to", "hardlink_to", "touch"}
_WRITING_CALLS = {
    "os.replace", "os.rename", "os.renames", "os.write", "os.pwrite", "os.writev", "os.ftruncate",
    "os.truncate", "os.link", "os.symlink", "os.mkfifo", "os.mknod", "os.open", "os.fdopen",
    "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copyfileobj", "shutil.move",
    "shutil.copytree", "tempfile.mkstemp", "tempfile.NamedTemporaryFile",
    "tempfile.TemporaryFile", "tempfile.SpooledTemporaryFile", "io.open", "codecs.open",
}  # fmt: skip
_READ_ONLY = {"r", "rb", "rt", "br", "tr"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _open_mode(call: ast.Call, position: int) -> str | None:
    """The mode an ``open()`` call names: a constant, ``?`` when computed, None when left out."""
    given = [kw.value for kw in call.keywords if kw.arg == "mode"]
    given += call.args[position : position + 1]
    if not given:
        return None
    mode = given[0]
    return mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else "?"


def _write_call(call: ast.Call) -> str | None:
    """What the call writes with, or None when it only reads (or is no file call)."""
    name = _dotted(call.func)
    if name in _WRITING_CALLS:
        return name
    if isinstance(call.func, ast.Attribute) and call.func.attr in _WRITING_METHODS:
        return f".{call.func.attr}()"
    if name == "open":  # the built-in: a computed mode counts as a write
        mode = _open_mode(call, 1)
        if mode is not None and mode not in _READ_ONLY:
            return f"open(mode={mode!r})"
    elif isinstance(call.func, ast.Attribute) and call.func.attr == "open":  # Path.open
        mode = _open_mode(call, 0)
        if mode is not None and re.fullmatch(r"[rwxabt+]+", mode) and mode not in _READ_ONLY:
            return f".open(mode={mode!r})"
    return None


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_every_file_is_written_by_the_one_writer(path: Path) -> None:
    """Issue 38, "one writer": no ``open(..., 'w')``, ``Path.write_text/bytes``, ``os.replace``,
    ``os.open``, ``shutil.copy``, temp files, ... outside ``io/files.py`` (links followed, FIFOs
    and devices streamed, regular files atomic, owner, group and mode kept: once, there)."""
    rel = str(path.relative_to(SRC))
    if rel == _WRITER:
        return
    for node in _nodes(path):
        if not isinstance(node, ast.Call):
            continue
        how = _write_call(node)
        if how is not None and (rel, how) not in _WRITES_ALLOWED:
            pytest.fail(f"{rel}:{node.lineno} writes a file with {how}: use servelab.io.files")


def test_the_writer_check_finds_every_kind_of_write() -> None:
    """The check above cannot pass by missing a form: each of these is found."""
    found = [
        _write_call(ast.parse(src, mode="eval").body)  # type: ignore[arg-type]
        for src in (
            "open(p, 'w')", "open(p, mode='ab')", "p.open('w')", "p.write_text(t)",
            "p.write_bytes(b)", "os.replace(a, b)", "os.open(p, flags)", "shutil.copy(a, b)",
            "tempfile.mkstemp()", "p.rename(q)", "open(p, m)",
        )
    ]  # fmt: skip
    assert None not in found
    assert _write_call(ast.parse("open(p)", mode="eval").body) is None  # type: ignore[arg-type]
    assert _write_call(ast.parse("p.open('rb')", mode="eval").body) is None  # type: ignore[arg-type]
