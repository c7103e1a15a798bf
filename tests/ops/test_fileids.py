"""Each service's env file's identity on its host (``ops/fileids.py``), for real files: a hard
link and a symbolic link to one file are that file; a FIFO, a dangling link, a link loop and
``/dev/full`` are no regular file, known by their path alone (never opened: a FIFO would block)."""

from __future__ import annotations

import os
from pathlib import Path

from servelab.io.specfile import load_spec
from servelab.ops.context import operation
from servelab.ops.fileids import file_identities
from tests.support.xpyd import write_2p2d_spec


async def test_links_are_one_file_and_odd_files_are_known_by_path(tmp_path: Path) -> None:
    spec_path, _ = write_2p2d_spec(tmp_path)
    env = tmp_path / "env"
    (env / "decode-2.env").unlink()
    os.link(env / "decode.env", env / "decode-2.env")  # a hard link
    (env / "prefill-2.env").unlink()
    (env / "prefill-2.env").symlink_to("decode.env")  # a symbolic link
    (env / "prefill.env").unlink()
    os.mkfifo(env / "prefill.env")
    (env / "router-2p2d.env").unlink()
    (env / "router-2p2d.env").symlink_to("router-2p2d.env")  # a loop
    async with operation(load_spec(spec_path)) as op:
        same = await file_identities(op)
    ids = {path: ident for (_host, path), ident in same.items()}
    assert ids["env/decode.env"] == ids["env/decode-2.env"] == ids["env/prefill-2.env"]
    assert "env/prefill.env" not in ids and "env/router-2p2d.env" not in ids
    (env / "decode-2.env").unlink()
    (env / "decode-2.env").symlink_to("/dev/full")
    async with operation(load_spec(spec_path)) as op:
        same = await file_identities(op)
    assert "env/decode-2.env" not in {path for _host, path in same}
