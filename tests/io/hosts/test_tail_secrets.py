"""A service's log tail (what ``restart``/``up`` print and the ledger stores) masks the twelfth
hostile pass's shapes (issue 38, H3): a Kubernetes-style env list's value below its secret name,
the flow and JSON pair forms, a no-break space around ``=``, a header pair list, ``pwd=X``, and
the bypass/cert headers; the ordinary pairs and lines of the same tail stay. A real file read
through a real host, locally and over the loopback sshd."""

from __future__ import annotations

from pathlib import Path

from servelab.io.hosts.host import Host
from servelab.io.hosts.logs import tail

PLANTED = "Zq8sKx2PlantedValue"
LOG = f"""starting engine
env:
- name: DB_PASSWORD
  value: {PLANTED}1
- name: PORT
  value: "8080"
env: [{{name: API_KEY, value: {PLANTED}2}}]
{{"key":"password","value":"{PLANTED}3"}}
{{"name":"API_KEY","value":"{PLANTED}4"}}
PASSWORD\u00a0=\u00a0{PLANTED}5
headers=[["Authorization","{PLANTED}6"]]
pwd={PLANTED}7
password -> {PLANTED}8
X-Vercel-Protection-Bypass: {PLANTED}9
X-Client-Cert: {PLANTED}0
ready on port 8080
"""


async def test_a_log_tail_masks_the_twelfth_pass_shapes(host: Host, tmp_path: Path) -> None:
    log = tmp_path / "svc.log"
    log.write_text(LOG, encoding="utf-8")
    said = await tail(host, str(log), max_bytes=4000)
    assert PLANTED not in said, said
    assert said.count("***") == 11, said  # 10 values, and ``"key":"password"``'s name
    assert '- name: PORT\n  value: "8080"' in said
    assert said.startswith("starting engine\n") and said.endswith("ready on port 8080\n")


#: A request's headers as a server or a proxy logs them, in free text (issue 38, the thirteenth
#: pass: a header's name was read as secret only when given as ``--header``).
HEADER_LOG = f"""> GET /v1/models HTTP/1.1
> Content-Type: application/json
> X-Request-Id: req-42
> X-Authentication: {PLANTED}1
> Session-Id: {PLANTED}2
> Cf-Access-Jwt-Assertion: {PLANTED}3
> Authorization: Digest username="ops", response="{PLANTED}4"
> Proxy-Authorization: Basic {PLANTED}5
scope headers=[(b"x-api-key", b"{PLANTED}6"), (b"accept", b"*/*")]
< Access-Control-Allow-Origin: *
< Access-Control-Allow-Credentials: true
session_id: sess-7 access-log: true
"""


async def test_a_log_tail_masks_header_pairs_in_free_text(host: Host, tmp_path: Path) -> None:
    log = tmp_path / "proxy.log"
    log.write_text(HEADER_LOG, encoding="utf-8")
    said = await tail(host, str(log), max_bytes=4000)
    assert PLANTED not in said, said
    for kept in ("Content-Type: application/json", "X-Request-Id: req-42",
                 "Access-Control-Allow-Origin: *", "Access-Control-Allow-Credentials: true",
                 '(b"accept", b"*/*")', "session_id: sess-7 access-log: true"):  # fmt: skip
        assert kept in said, said
    assert said.count("***") == 6, said
