"""What an engine reports it is running with: an argument knob's value in its ``/server_info``
(pure; ``../shared/notes/engine-contracts.md`` §1).

- SGLang (``GET /server_info``; ``/get_server_info`` is its older alias with the same body): a flat
  object of every server-args field under its field name (``max_running_requests``), resolved
  values, booleans as JSON booleans. ``max_running_requests`` stays null unless it was set; the
  limit in force is ``internal_states[i].effective_max_running_requests_per_dp`` (per
  data-parallel rank), which is what this reads when the field is null.
- vLLM (``GET /server_info?config_format=json``, only with ``VLLM_SERVER_DEV_MODE=1``): the
  engine's config under ``vllm_config``, nested by component (``scheduler_config.max_num_seqs``);
  the field is looked up by name anywhere in it and must be found exactly once.

An engine that does not report the field gives :attr:`Reported.known` False: unknown, never a pass.
The report itself crosses layers as one :class:`EngineReport` (its decoded JSON, read here).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from servelab.core.knob import OFF, ON, Knob, KnobKind
from servelab.core.knobs.argv import json_get
from servelab.core.redaction import redact

__all__ = ["EFFECTIVE_FIELDS", "EngineReport", "Reported", "reported_value"]

#: Fields whose resolved value lives elsewhere when the field itself is null (SGLang).
EFFECTIVE_FIELDS: Mapping[str, str] = {
    "max_running_requests": "effective_max_running_requests_per_dp",
}


@dataclass(frozen=True, slots=True)
class EngineReport:
    """A worker's own report of what it runs with (``/server_info``): the engine's document as
    decoded, open-ended (every server argument, nested config), read only by path here and by
    :func:`servelab.core.verify.pair.pair_values`."""

    #: the decoded JSON object, as the engine sent it
    doc: Mapping[str, Any]

    @property
    def version(self) -> str | None:
        """The release the engine reports (SGLang's ``version``), None when it does not say; a
        token in it masked (the one redaction policy: it is quoted and stored as said)."""
        version = self.doc.get("version")
        return redact(version) if isinstance(version, str) else None


@dataclass(frozen=True, slots=True)
class Reported:
    """A knob's value as the engine reports it; ``where`` names the field it was read from."""

    known: bool
    value: str | None = None
    where: str = ""


def _text(value: Any, knob: Knob) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        if knob.kind is KnobKind.FLAG:
            return ON if value else OFF
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _nested(node: Any, name: str, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            if key == name:
                yield where, value
            yield from _nested(value, name, where)


def _effective(report: EngineReport, field: str) -> tuple[str, Any] | None:
    inner = EFFECTIVE_FIELDS.get(field)
    states = report.doc.get("internal_states")
    if inner is None or not isinstance(states, list) or not states:
        return None
    first = states[0]
    if not isinstance(first, dict) or inner not in first:
        return None
    return f"internal_states[0].{inner}", first[inner]


def _field(report: EngineReport, knob: Knob) -> tuple[str, Any] | None:
    """(where, raw value) of the knob's argument field, or None when it is not reported."""
    info = report.doc
    config = info.get("vllm_config")
    if isinstance(config, dict):
        found = list(_nested(config, knob.field, "vllm_config"))
        return found[0] if len(found) == 1 else None
    if knob.field not in info:
        return None
    value = info[knob.field]
    if value is None:
        return _effective(report, knob.field) or (knob.field, None)
    return knob.field, value


def reported_value(report: EngineReport, knob: Knob) -> Reported:
    """The knob's value in an engine's ``/server_info`` report."""
    found = _field(report, knob)
    if found is None:
        return Reported(False)
    where, value = found
    if knob.kind is KnobKind.JSON_KEY:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return Reported(False, where=where)
        ok, value = json_get(value, knob.keys)
        where = ".".join([where, *knob.keys])
        if not ok:
            return Reported(True, None, where)
    return Reported(True, _text(value, knob), where)
