"""The deployment spec: parsing, validation messages with file and field path, start order."""

from __future__ import annotations

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB, DEFAULT_SPEC_TOML
from servelab.core.deploy.spec import parse_spec, spec_hash, start_order
from servelab.core.engines import ENGINES
from servelab.errors import SpecError

MINIMAL = """
[services.w]
role = "generic"
url = "http://127.0.0.1:9000"
start = "python -m http.server 9000"
"""


def _error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="my.toml")
    return info.value


def test_default_spec_is_the_reference_topology() -> None:
    spec = parse_spec(DEFAULT_SPEC_TOML)
    assert start_order(spec) == ["prefill", "decode", "router"]
    assert spec.services["prefill"].port == 30000
    assert spec.services["prefill"].bootstrap_port == 8998
    assert spec.services["decode"].port == 30002
    assert spec.services["router"].port == 30001
    assert DEFAULT_KNOB in spec.services["decode"].knobs
    assert spec.entry_point == "router"
    assert spec.readiness_path("router") == "/readiness"
    assert spec.readiness_path("decode") == "/health"


def test_readiness_paths_come_from_the_engine_description() -> None:
    """Issue 31 item 3: the spec reads the engine's facts, never a path typed beside them; a
    service's own ``ready_path`` wins."""
    spec = parse_spec(DEFAULT_SPEC_TOML)
    facts = ENGINES[spec.engine]
    assert spec.readiness_path("router") == facts.router_ready_path
    assert spec.readiness_path("prefill") == facts.worker_ready_path
    decode = spec.services["decode"].model_copy(update={"ready_path": "/ready-now"})
    own = spec.model_copy(update={"services": {**spec.services, "decode": decode}})
    assert own.readiness_path("decode") == "/ready-now"


def test_minimal_spec_gets_a_local_host() -> None:
    spec = parse_spec(MINIMAL)
    assert spec.hosts["local"].is_local
    assert spec.services["w"].host == "local"


def test_unknown_key_names_file_and_field() -> None:
    err = _error(MINIMAL + 'colour = "red"\n')
    assert err.source == "my.toml"
    assert err.path == "services.w.colour"
    assert "unknown key" in str(err)


def test_wrong_type_names_the_field() -> None:
    err = _error(MINIMAL + 'ready_timeout_s = "soon"\n')
    assert err.path == "services.w.ready_timeout_s"
    assert str(err).startswith("my.toml: services.w.ready_timeout_s: ")


def test_url_without_port_is_refused() -> None:
    err = _error(MINIMAL.replace("http://127.0.0.1:9000", "http://127.0.0.1"))
    assert err.path == "services.w.url"
    assert "explicit port" in str(err)


@pytest.mark.parametrize(
    ("url", "why"),
    [("http://[::1", "bracket is never closed"), ("http://127.0.0.1:99999", "1 to 65535"),
     ("ftp://x:1", "not ftp://"), ("garbage", "HOST[:PORT]"), ("", "empty"),
     ("http://h:1/?x=1", "no query"), ("http://u:sk-secret@[::1]:99999", "1 to 65535")],
)  # fmt: skip
@pytest.mark.parametrize("field", ["services.w.url", "prometheus.url"])
def test_a_malformed_url_names_the_file_and_the_field(url: str, why: str, field: str) -> None:
    """The one URL parser (core/urls.py): a port past 65535 or a query was once taken, an open
    IPv6 bracket said urllib's words; the password is never quoted."""
    if field == "prometheus.url":
        err = _error(f'{MINIMAL}\n[prometheus]\nurl = "{url}"\n')
    else:
        err = _error(MINIMAL.replace("http://127.0.0.1:9000", url))
    assert err.path == field and str(err).startswith(f"my.toml: {field}: "), str(err)
    assert why in str(err) and "sk-secret" not in str(err), str(err)


def test_dependency_cycle_is_named() -> None:
    text = DEFAULT_SPEC_TOML.replace('depends_on = ["prefill"]', 'depends_on = ["router"]')
    err = _error(text)
    assert "dependency cycle: decode -> router -> decode" in str(err)


def test_unknown_dependency() -> None:
    err = _error(MINIMAL + 'depends_on = ["ghost"]\n')
    assert err.path == "services.w.depends_on"
    assert "ghost" in str(err)


def test_duplicate_port_on_one_host() -> None:
    err = _error(DEFAULT_SPEC_TOML.replace("30002", "30000"))
    assert err.path == "services.decode.url"
    assert "already used by services.prefill.url" in str(err)


def test_bootstrap_port_clash_with_router_metrics() -> None:
    err = _error(DEFAULT_SPEC_TOML.replace("bootstrap_port = 8998", "bootstrap_port = 29000"))
    assert "29000" in str(err)


def test_same_port_on_two_hosts_is_fine() -> None:
    text = MINIMAL + (
        '\n[hosts.gpu]\nssh = "root@127.0.0.1"\n'
        '[services.v]\nrole = "generic"\nhost = "gpu"\nurl = "http://127.0.0.1:9000"\nstart = "x"\n'
    )
    spec = parse_spec(text)
    assert not spec.hosts["gpu"].is_local


def test_ssh_must_be_user_at_host() -> None:
    err = _error(MINIMAL + '[hosts.gpu]\nssh = "gpu-box"\n')
    assert err.path == "hosts.gpu.ssh"


def test_not_toml() -> None:
    err = _error("[services\n")
    assert "not valid TOML" in str(err)


def test_missing_services_table() -> None:
    assert _error('name = "x"\n').path == "services"


def test_knobs_list_declares_without_pinning() -> None:
    spec = parse_spec(MINIMAL + 'knobs = ["A", "B"]\n')
    assert spec.services["w"].knobs == {"A": None, "B": None}
    spec = parse_spec(MINIMAL + 'knobs = { A = "1" }\n')
    assert spec.services["w"].knobs == {"A": "1"}


def test_spec_hash_is_stable_and_sensitive() -> None:
    a = spec_hash(parse_spec(DEFAULT_SPEC_TOML))
    assert a == spec_hash(parse_spec(DEFAULT_SPEC_TOML))
    assert a != spec_hash(parse_spec(DEFAULT_SPEC_TOML.replace("30002", "30003")))


def test_spec_error_is_a_value_error() -> None:
    assert isinstance(_error("[services\n"), ValueError)


@pytest.mark.parametrize("port", ["0", "65536", "99999"])
def test_a_url_port_outside_1_to_65535_is_refused(port: str) -> None:
    err = _error(MINIMAL.replace("http://127.0.0.1:9000", f"http://127.0.0.1:{port}"))
    assert err.path == "services.w.url" and "1 to 65535" in str(err)


@pytest.mark.parametrize("start", ["", "  "])
def test_an_empty_start_is_refused(start: str) -> None:
    err = _error(MINIMAL.replace('start = "python -m http.server 9000"', f'start = "{start}"'))
    assert err.path == "services.w.start" and "not empty" in str(err)


def test_a_knob_name_that_is_no_knob_is_refused() -> None:
    err = _error(MINIMAL + 'knobs = ["1BAD"]\n')
    assert err.path == "services.w.knobs" and "not a knob: '1BAD'" in str(err)


def test_a_byte_order_mark_is_not_toml_s_concern() -> None:
    assert parse_spec("\ufeff" + MINIMAL).services["w"].port == 9000


def test_values_nested_too_deeply_are_a_spec_error() -> None:
    err = _error("x = " + "[" * 5000 + "]" * 5000 + "\n" + MINIMAL)
    assert "nested too deeply" in str(err) and isinstance(err, ValueError)
