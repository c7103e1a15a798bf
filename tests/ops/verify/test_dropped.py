"""A config-file key the engine drops: vLLM keeps no ``false`` in ``--config``, so a declared
argument written ``false`` there never reaches the engine; verify's file layer says so (no process
needs to run: the file is what the engine will read)."""

from __future__ import annotations

from pathlib import Path

from servelab.core.verify.arguments import ArgumentDropped
from servelab.core.verify.checks import CheckCode
from servelab.io.specfile import load_spec
from servelab.ops.verify.verify import verify
from servelab.report.verify import check_detail
from tests.support import free_ports

SPEC = """\
name = "dropped"
engine = "vllm"
state_dir = "state"

[services.decode]
role = "decode"
url = "http://127.0.0.1:{port}"
start = "true"
config_file = "decode.yaml"
knobs = ["--enable-prefix-caching", "--max-num-seqs"]
"""


async def test_a_false_the_engine_drops_is_a_finding(tmp_path: Path) -> None:
    (tmp_path / "decode.yaml").write_text("enable-prefix-caching: false\nmax-num-seqs: 64\n")
    (spec := tmp_path / "servelab.toml").write_text(SPEC.format(port=free_ports(1)[0]))
    report = await verify(load_spec(spec), layers=("config",))
    dropped = [c for c in report.checks if c.code is CheckCode.CONFIG_ARGUMENT_DROPPED]
    assert [c.knob for c in dropped] == ["--enable-prefix-caching"] and not report.ok
    data = dropped[0].data
    assert isinstance(data, ArgumentDropped) and data.path.endswith("decode.yaml")
    assert "write `no-enable-prefix-caching: true`" in check_detail(dropped[0])
    (tmp_path / "decode.yaml").write_text("no-enable-prefix-caching: true\nmax-num-seqs: 64\n")
    again = await verify(load_spec(spec), layers=("config",))
    assert not [c for c in again.checks if c.code is CheckCode.CONFIG_ARGUMENT_DROPPED]
