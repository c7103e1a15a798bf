"""The pure readings of ``servelab init``: the router kind from its worker list's shape, service
names, a systemd unit from /proc/PID/cgroup, a unit's ExecStart and EnvironmentFile, the variable
that holds the arguments, listening sockets."""

from __future__ import annotations

from servelab.core.deploy.routers import RouterKind
from servelab.core.init.detect import (
    args_variable,
    environment_files,
    exec_start_argv,
    listening_inodes,
    router_kind_of,
    service_names,
    socket_inodes,
    unit_of_cgroup,
)

_SGLANG = {"id": "a", "url": "http://h:1", "worker_type": "decode", "is_healthy": True}


def test_router_kind_by_the_shape_of_its_worker_list() -> None:
    smg = {"workers": [{**_SGLANG, "status": "ready"}], "total": 1, "stats": {}}
    vllm = {"workers": [{"url": "http://h:1", "worker_type": "decode"}], "total": 1, "stats": {}}
    assert router_kind_of(smg) == (RouterKind.SMG, False)
    assert router_kind_of({"workers": [_SGLANG]}) == (RouterKind.SGLANG_ROUTER, False)
    assert router_kind_of(vllm) == (RouterKind.VLLM_ROUTER, False)
    assert router_kind_of({"workers": []}) == (RouterKind.SMG, True)  # a guess, said
    assert router_kind_of(["not", "a", "dict"]) == (RouterKind.SMG, True)


def test_service_names_number_a_role_only_when_it_has_several() -> None:
    assert service_names(["prefill", "decode"]) == ["prefill", "decode"]
    roles = ["prefill", "prefill", "decode", "decode", "decode"]
    assert service_names(roles) == ["prefill-1", "prefill-2", "decode-1", "decode-2", "decode-3"]


def test_unit_of_cgroup_only_for_a_system_service() -> None:
    assert unit_of_cgroup("0::/system.slice/sglang-decode.service\n") == "sglang-decode.service"
    v1 = "12:pids:/system.slice/sglang-prefill.service\n1:name=systemd:/system.slice/x.service\n"
    assert unit_of_cgroup(v1) == "sglang-prefill.service"
    assert unit_of_cgroup("0::/user.slice/user-0.slice/session-3.scope\n") is None
    assert unit_of_cgroup("0::/\n") is None


def test_exec_start_and_environment_files_as_systemctl_shows_them() -> None:
    shown = (
        "{ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -m sglang.launch_server "
        "--port 30002 $SGLANG_ARGS ; ignore_errors=no ; start_time=[n/a] ; pid=0 }"
    )
    argv = exec_start_argv(shown)
    assert argv == ["/usr/bin/python3", "-m", "sglang.launch_server", "--port", "30002",
                    "$SGLANG_ARGS"]  # fmt: skip
    assert exec_start_argv("") is None
    files = "/etc/sglang/decode.env (ignore_errors=no)\n/etc/more.env (ignore_errors=yes)\n"
    assert environment_files(files) == ["/etc/sglang/decode.env", "/etc/more.env"]
    assert environment_files("\n") == []
    assert args_variable(argv, {"SGLANG_ARGS": "--x", "OTHER": "1"}) == "SGLANG_ARGS"
    assert args_variable(["run", "${ARGS}"], {"ARGS": ""}) == "ARGS"
    assert args_variable(argv, {"OTHER": "1"}) is None  # a variable the file does not set


def test_listening_sockets_of_a_process() -> None:
    tcp = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:7531 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0 0 111 1\n"
        "   1: 0100007F:7532 0100007F:9999 01 00000000:00000000 00:00000000 00000000  0 0 222 1\n"
    )
    assert listening_inodes(tcp) == {111: 0x7531}  # the established one is not listening
    links = "lrwx------ 1 u u 64 Dec 5 10:00 9 -> socket:[111]\nl-wx 3 -> /dev/null\n"
    assert socket_inodes(links) == {111}
