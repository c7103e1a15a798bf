"""The ledger's schema, as numbered migrations (``PRAGMA user_version`` is the last one applied).

Migration ``n`` takes a ledger at version ``n - 1`` to version ``n``. Migrations are append-only:
never edit a released one, add the next. :func:`migrate` applies the missing ones inside the
caller's write transaction, so two processes opening a fresh ledger at once cannot both apply them.
"""

from __future__ import annotations

import sqlite3

from servelab.errors import SchemaError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "schema_version", "statements", "too_new"]

_V1_RECORDS = """
CREATE TABLE deployments (
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, name TEXT NOT NULL, spec_hash TEXT,
    action TEXT NOT NULL, detail TEXT NOT NULL
);
CREATE TABLE knob_changes (
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, service TEXT NOT NULL, name TEXT NOT NULL,
    old TEXT, new TEXT, reason TEXT, case_id INTEGER, backup_path TEXT
);
CREATE TABLE verifications (
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, spec_hash TEXT, ok INTEGER NOT NULL
);
CREATE TABLE verification_checks (
    id INTEGER PRIMARY KEY,
    verification_id INTEGER NOT NULL REFERENCES verifications(id) ON DELETE CASCADE,
    layer TEXT NOT NULL, service TEXT, ok INTEGER NOT NULL, detail TEXT, data TEXT NOT NULL
);
CREATE TABLE bench_runs (
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, label TEXT, config TEXT NOT NULL,
    summary TEXT NOT NULL, n_records INTEGER NOT NULL
);
CREATE TABLE bench_records (
    run_id INTEGER NOT NULL REFERENCES bench_runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (run_id, seq)
);
CREATE TABLE ab_runs (
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, service TEXT NOT NULL, knob TEXT NOT NULL,
    config TEXT NOT NULL, result TEXT NOT NULL
);
CREATE TABLE soak_runs (
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, ok INTEGER, config TEXT NOT NULL,
    result TEXT NOT NULL
);
CREATE TABLE soak_findings (
    id INTEGER PRIMARY KEY, soak_id INTEGER NOT NULL REFERENCES soak_runs(id) ON DELETE CASCADE,
    layer TEXT, confidence REAL, finding TEXT NOT NULL
);
"""

_V2_CASES = """
CREATE TABLE cases (
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, title TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'open', root_cause TEXT, resolved_at TEXT
);
CREATE TABLE case_suspects (
    id INTEGER PRIMARY KEY, case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    at TEXT NOT NULL, target TEXT NOT NULL, reason TEXT, verdict TEXT, verdict_at TEXT,
    UNIQUE (case_id, target)
);
CREATE TABLE case_evidence (
    id INTEGER PRIMARY KEY, case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    at TEXT NOT NULL, kind TEXT NOT NULL, ref_id INTEGER, note TEXT
);
CREATE TABLE case_events (
    id INTEGER PRIMARY KEY, case_id INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    at TEXT NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL
);
"""

_V3_INDEXES = """
CREATE INDEX knob_changes_by_knob ON knob_changes(service, name, id);
CREATE INDEX knob_changes_by_case ON knob_changes(case_id);
CREATE INDEX ab_runs_by_knob ON ab_runs(service, knob, id);
CREATE INDEX verification_checks_by_run ON verification_checks(verification_id);
CREATE INDEX soak_findings_by_run ON soak_findings(soak_id);
CREATE INDEX case_suspects_by_case ON case_suspects(case_id);
CREATE INDEX case_evidence_by_case ON case_evidence(case_id);
CREATE INDEX case_events_by_case ON case_events(case_id);
"""

# Version 4: per-request records may be pruned (the run keeps its summary and says when its
# records went), and are written in the compact form of
# :func:`servelab.io.ledger.packed.pack_record` (a BLOB in ``bench_records.record``). Rows written
# before stay JSON text and read as before; ``servelab ledger vacuum`` rewrites them compactly.
_V4_RETENTION = """
ALTER TABLE bench_runs ADD COLUMN records_pruned_at TEXT;
"""

# Version 5: the OpenTelemetry spans received during a traced bench run or soak, one row per span
# (ids as hex, times as the exporting process's Unix epoch nanoseconds, the client's request id a
# span names in its own column: ``Span.request_id``, a router span's ``request_id`` since the real
# engines' spans, the simulator's ``servelab.request_id`` before; every attribute as compact
# JSON). A span belongs to exactly one bench run (``run_id``) or one soak (``soak_id``) and goes
# with it; pruning a run's records removes its spans too.
_V5_SPANS = """
CREATE TABLE spans (
    id INTEGER PRIMARY KEY,
    run_id INTEGER REFERENCES bench_runs(id) ON DELETE CASCADE,
    soak_id INTEGER REFERENCES soak_runs(id) ON DELETE CASCADE,
    trace_id TEXT NOT NULL, span_id TEXT NOT NULL, parent_id TEXT NOT NULL,
    name TEXT NOT NULL, service TEXT NOT NULL,
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
    request_id TEXT, attributes TEXT NOT NULL,
    CHECK ((run_id IS NULL) <> (soak_id IS NULL))
);
CREATE INDEX spans_by_run ON spans(run_id, id) WHERE run_id IS NOT NULL;
CREATE INDEX spans_by_soak ON spans(soak_id, id) WHERE soak_id IS NOT NULL;
CREATE INDEX spans_by_request ON spans(request_id) WHERE request_id IS NOT NULL;
"""

# Version 6: tunes (``servelab tune``). ``tune_runs``: one row per tune started, its knobs as text
# (``decode:NAME,...``, for listing), its config and the knobs' values before it (JSON), where it
# stands (``running``/``interrupted``/``finished``) and, once finished, its result (the
# :class:`~servelab.core.ab.tunerun.TuneRecord`). ``tune_visits``: every finished visit, saved as
# it ends, so ``tune --resume`` continues without measuring a visit twice (the state is replayed
# from them). A/B's tables do not fit: ``ab_runs`` holds one knob at two values.
_V6_TUNES = """
CREATE TABLE tune_runs (
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, knobs TEXT NOT NULL, config TEXT NOT NULL,
    original TEXT NOT NULL, status TEXT NOT NULL, result TEXT
);
CREATE TABLE tune_visits (
    tune_id INTEGER NOT NULL REFERENCES tune_runs(id) ON DELETE CASCADE,
    position INTEGER NOT NULL, visit TEXT NOT NULL, PRIMARY KEY (tune_id, position)
);
"""

# Version 7: answer references (:mod:`servelab.io.ledger.answers`). One row per set of reference
# answers taken from a state (the baseline of an A/B, a tune, a bisection; a bench's target) at
# low concurrency: its key (the state and the probe set, hashed), the state itself (spec hash and
# knob values, JSON) and the answers (JSON, the codec's encoding). The latest row of a key is
# reused while the state is the same.
_V7_ANSWERS = """
CREATE TABLE answer_references (
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, key TEXT NOT NULL, state TEXT NOT NULL,
    refs TEXT NOT NULL
);
CREATE INDEX answer_references_by_key ON answer_references(key, id);
"""

# Version 8: a knob change names the deployment (the spec's ``name``) that made it, so two
# deployments sharing one ledger each read their own knob history (``case revert``'s, ``restore``'s
# hand-edit check). A change recorded before is anyone's (NULL). Later servelabs store the changed
# service's mark (``name/service@host:port``) in the same column, no migration: two specs of one
# name are two deployments (issue 38, sixteenth pass); a row holding a name alone compares by name.
_V8_CHANGE_DEPLOYMENT = """
ALTER TABLE knob_changes ADD COLUMN deployment TEXT;
"""

#: Migration ``i + 1`` is ``MIGRATIONS[i]``.
MIGRATIONS: tuple[str, ...] = (
    _V1_RECORDS, _V2_CASES, _V3_INDEXES, _V4_RETENTION, _V5_SPANS, _V6_TUNES, _V7_ANSWERS,
    _V8_CHANGE_DEPLOYMENT,
)  # fmt: skip
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: sqlite3.Connection) -> int:
    """The ledger's ``PRAGMA user_version``."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, *, source: str, upto: int = SCHEMA_VERSION) -> int:
    """Apply the missing migrations up to ``upto``; return the version the ledger was at.

    Must run inside a write transaction (``BEGIN IMMEDIATE``). A ledger from a newer servelab is
    refused with :class:`SchemaError` rather than touched.
    """
    found = schema_version(conn)
    if found > SCHEMA_VERSION:
        raise too_new(source, found)
    for version in range(found + 1, upto + 1):
        for statement in statements(MIGRATIONS[version - 1]):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version:d}")
    return found


def too_new(source: str, found: int) -> SchemaError:
    """The refusal of a ledger at schema version ``found``, newer than this servelab's."""
    return SchemaError(
        f"{source}: ledger schema version {found} is newer than this servelab supports "
        f"({SCHEMA_VERSION}); upgrade servelab or point --ledger/SERVELAB_LEDGER elsewhere"
    )


def statements(script: str) -> list[str]:
    """A migration's SQL statements, one by one."""
    return [s.strip() for s in script.split(";") if s.strip()]
