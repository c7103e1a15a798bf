"""Issue 38, fifth pass, D2: every real number of the spec is finite and every timeout bounded.

``ready_timeout_s = inf`` made ``up`` wait forever for a service that never got ready and
``stop_grace_s = inf`` hung ``up``'s rollback (the process orphaned); ``1e308`` did the same in
practice. Each float field of every table of the spec (found by introspection, so a new one is
covered) refuses ``inf``, ``-inf``, ``nan`` and ``1e308`` with the spec's error naming the field.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from servelab.core.deploy.routers import RouterOptions
from servelab.core.deploy.spec import (
    MAX_TIMEOUT_S,
    HostSpec,
    PrometheusSpec,
    ServiceSpec,
    TracingSpec,
    parse_spec,
)
from servelab.errors import SpecError

SERVICE = '[services.w]\nrole = "generic"\nurl = "http://127.0.0.1:9000"\nstart = "true"\n'

#: Each table of the spec: the TOML that holds one of its fields, and that field's path.
TABLES: dict[type[BaseModel], tuple[str, str]] = {
    ServiceSpec: (SERVICE + "{field} = {value}\n", "services.w.{field}"),
    HostSpec: (SERVICE + '[hosts.gpu]\nssh = "u@h"\n{field} = {value}\n', "hosts.gpu.{field}"),
    PrometheusSpec: (
        SERVICE + '[prometheus]\nurl = "http://127.0.0.1:9090"\n{field} = {value}\n',
        "prometheus.{field}",
    ),
    TracingSpec: (SERVICE + "[tracing]\n{field} = {value}\n", "tracing.{field}"),
}


def _float_fields() -> list[tuple[type[BaseModel], str]]:
    return [
        (model, name)
        for model in TABLES
        for name, info in model.model_fields.items()
        if info.annotation is float
    ]


def test_the_float_fields_are_the_known_timeouts() -> None:
    """The introspection finds what the defect named (a test over nothing cannot fail)."""
    found = {name for _, name in _float_fields()}
    assert found == {
        "connect_timeout_s",
        "timeout_s",
        "wait_s",
        "ready_timeout_s",
        "start_timeout_s",
        "stop_grace_s",
    }
    assert not [n for n, i in RouterOptions.model_fields.items() if i.annotation is float]


def _error(model: type[BaseModel], field: str, value: str) -> SpecError:
    text, path = TABLES[model]
    with pytest.raises(SpecError) as info:
        parse_spec(text.format(field=field, value=value), source="s.toml")
    assert info.value.path == path.format(field=field)
    assert str(info.value).startswith(f"s.toml: {path.format(field=field)}: ")
    return info.value


@pytest.mark.parametrize(("model", "field"), _float_fields())
@pytest.mark.parametrize("value", ["inf", "+inf", "nan", "-nan"])
def test_infinite_and_nan_are_refused_naming_the_field(
    model: type[BaseModel], field: str, value: str
) -> None:
    assert "finite number" in str(_error(model, field, value))


@pytest.mark.parametrize(("model", "field"), _float_fields())
@pytest.mark.parametrize("value", ["1e308", "86400.001", "-inf"])
def test_past_a_day_is_refused_naming_the_field(
    model: type[BaseModel], field: str, value: str
) -> None:
    message = str(_error(model, field, value))
    assert "86400" in message or "greater than" in message or "finite" in message
    if value != "-inf":
        assert "less than or equal to 86400" in message


@pytest.mark.parametrize(("model", "field"), _float_fields())
def test_a_day_is_still_accepted(model: type[BaseModel], field: str) -> None:
    text, _ = TABLES[model]
    for value in ("86400", "86400.0", "0.5"):
        spec = parse_spec(text.format(field=field, value=value))
        table = {
            ServiceSpec: spec.services["w"],
            HostSpec: spec.hosts.get("gpu"),
            PrometheusSpec: spec.prometheus,
            TracingSpec: spec.tracing,
        }[model]
        assert getattr(table, field) == float(value)
    assert MAX_TIMEOUT_S == 86400.0


@pytest.mark.parametrize(
    "field", ["worker_startup_timeout_s", "health_check_interval_s", "request_timeout_s"]
)
def test_the_routers_timeouts_are_bounded_by_a_day(field: str) -> None:
    router = (
        '[services.r]\nrole = "router"\nurl = "http://127.0.0.1:9001"\nstart = "router"\n'
        "router = {{ {field} = {value} }}\n"
    )
    with pytest.raises(SpecError) as info:
        parse_spec(router.format(field=field, value=86401), source="s.toml")
    assert info.value.path == f"services.r.router.{field}"
    assert "less than or equal to 86400" in str(info.value)
    spec = parse_spec(router.format(field=field, value=86400))
    opts = spec.services["r"].router
    assert opts is not None and getattr(opts, field) == 86400
