"""Whose a pid record is (shared state folders, issue 38): by the mark it keeps, else by the mark
its live process carries; a dead older record without one stays this deployment's, as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from servelab.errors import HostError
from servelab.io.hosts.host import Host
from servelab.io.hosts.ownrecord import (
    OwnRecord,
    made_by,
    named_deployment,
    read_own_record,
    same_deployment,
)
from servelab.io.hosts.place import make_place, read_place
from servelab.io.hosts.processes import (
    PidRecord,
    read_pid_record,
    service_mark,
    write_pid_record,
)


def _record(pid: int, extra: dict[str, object]) -> PidRecord:
    return PidRecord("a", "local", pid, pid, None, "/l", "2026-12-06T00:00:00+00:00",
                     command="true", extra=extra)  # fmt: skip


async def test_a_kept_mark_names_the_deployment(host: Host, tmp_path: Path) -> None:
    write_pid_record(tmp_path, _record(2**22 + 7, {"mark": "prod/a@local:9"}))  # no such process
    mine = await read_own_record(host, tmp_path, "a", "prod/a@local:9")
    assert mine == OwnRecord(read_pid_record(tmp_path, "a"))
    assert await read_own_record(host, tmp_path, "a", "staging/a@local:8") == OwnRecord(
        None, "prod", 2**22 + 7
    )


async def test_one_name_on_another_address_is_another_deployment(
    host: Host, tmp_path: Path
) -> None:
    """Two copies of one spec (same name, other ports) in one folder (issue 38 H1)."""
    write_pid_record(tmp_path, _record(2**22 + 7, {"mark": "servelab/a@local:9"}))
    assert await read_own_record(host, tmp_path, "a", "servelab/a@local:8") == OwnRecord(
        None, "servelab@local:9", 2**22 + 7
    )


async def test_an_older_mark_without_an_address_is_known_by_its_name(
    host: Host, tmp_path: Path
) -> None:
    write_pid_record(tmp_path, _record(2**22 + 7, {"mark": "prod/a"}))
    assert (await read_own_record(host, tmp_path, "a", "prod/a@local:9")).record is not None
    assert not same_deployment("prod/b", "prod/a@local:9")
    assert not same_deployment("prod/a@local:8", "prod/a@local:9")
    assert not same_deployment(None, "prod/a@local:9")


async def test_an_older_dead_record_stays_this_deployments(host: Host, tmp_path: Path) -> None:
    write_pid_record(tmp_path, _record(2**22 + 7, {}))
    assert (await read_own_record(host, tmp_path, "a", "staging/a@local:8")).record is not None
    assert await read_own_record(host, tmp_path, "b", "staging/b@local:8") == OwnRecord(None)


def test_a_ledger_rows_deployment_is_told_by_mark_and_an_older_rows_by_name() -> None:
    """knob_changes.deployment (issue 38, sixteenth pass): two marks of one name on two
    addresses are two deployments; a row holding a name alone (schema 8) compares by name, one
    holding nothing is anyone's; an address-less older mark of the name and service is ours."""
    c, d2 = "servelab/decode@local:20001", "servelab/decode@local:20002"
    assert made_by(c, c) and not made_by(d2, c) and not made_by(c, d2)
    assert made_by("servelab", c) and not made_by("other", c)
    assert made_by(None, c) and made_by(c, None)
    assert made_by("servelab/decode", c) and not made_by("servelab/prefill", c)
    assert made_by("servelab", "servelab") and not made_by("servelab", "other")
    assert not made_by("other/decode@local:20001", c)
    for odd in (
        "",
        "/",
        "@",
        "servelab/",
        "\ufeffservelab",
        "servelab\x00/decode@local:1",
        "x" * 100_000,
    ):
        assert not made_by(odd, c)
    assert named_deployment(d2, c) == "servelab@local:20002"
    assert named_deployment("other/decode@local:20002", c) == "other"
    assert named_deployment("servelab", c) == "servelab"


def test_one_name_and_address_in_two_state_folders_are_two_deployments(tmp_path: Path) -> None:
    """The seventeenth pass, H1: two copies of one spec, each with its own state folder, serving
    one address: the mark's place (the state folder's id) tells them apart; the eighteenth, H2:
    the id moves with the folder (a renamed folder is the same deployment); a mark written
    before marks named the place (same name, service, address) is still this deployment's."""
    one, two = tmp_path / "one", tmp_path / "two"
    assert read_place(one) is None  # nothing launched from it yet
    place = make_place(one)
    assert make_place(one) == place == read_place(one) and len(place) == 16
    (tmp_path / "link").symlink_to(one)
    assert read_place(tmp_path / "link") == place  # another path to it
    one.rename(tmp_path / "moved")
    assert read_place(tmp_path / "moved") == place  # moved with it
    assert make_place(two) != place
    assert make_place(Path("/proc/self/no-such")) is None  # cannot be written: no place
    a = service_mark("servelab", "decode", "local:9", place)
    b = service_mark("servelab", "decode", "local:9", read_place(two))
    assert a == f"servelab/decode@local:9#{place}"
    assert same_deployment(a, a) and not same_deployment(b, a) and not same_deployment(a, b)
    assert not made_by(b, a) and not made_by(a, b)
    older = "servelab/decode@local:9"
    assert same_deployment(older, a) and made_by(older, a)
    assert not same_deployment(a, older)  # a place is another's to a folder with none
    assert not same_deployment("servelab/decode@local:8", a)
    assert not same_deployment("servelab/prefill@local:9", a)
    assert same_deployment("servelab/decode", a)  # older still: no address
    assert named_deployment(b, a) == "servelab@local:9 (another state folder)"
    assert named_deployment(service_mark("servelab", "decode", "local:8", "0" * 16), a) == (
        "servelab@local:8"
    )


@pytest.mark.parametrize("kind", ["link", "fifo", "large", "foreign", "dir"])
def test_an_id_that_is_not_one_is_no_place_and_never_replaced(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "id"
    if kind == "link":
        (tmp_path / "target").write_text("0123456789abcdef\n")
        path.symlink_to(tmp_path / "target")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "large":
        path.write_text("0123456789abcdef" * 100)
    elif kind == "foreign":
        path.write_text("sk-secret-not-an-id\n")
    else:
        path.mkdir()
    assert read_place(tmp_path) is None  # never waits on the FIFO, never follows the link
    with pytest.raises(HostError, match="is not servelab's id of this state folder"):
        make_place(tmp_path)
    assert path.is_symlink() == (kind == "link") and os.path.lexists(path)  # left as it was
