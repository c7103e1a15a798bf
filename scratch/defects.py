import asyncio
from servelab.ops.soak import SoakConfig, Targets, WorkerTarget, soak
from servelab.sim.settings import ENV_WARMUP_S
from tests.support.http import set_faults
from tests.support.stack import sim_stack
with sim_stack(time_scale=0.05, proxy=True) as st:
    t = Targets(st.proxy_url, st.router_url, (WorkerTarget("prefill","prefill",st.prefill_url), WorkerTarget("decode","decode",st.decode_url)))
    set_faults(st.decode_url, transfer_fail_prob=1.0)
    r = asyncio.run(soak(SoakConfig(sessions=2, rounds=2, idle_timeout_s=3, duration_s=40), t))
    print("(a) KV transfer: errors", [(e.status, e.detail[:80]) for e in r.errors][:2], "findings", r.findings)
    set_faults(st.decode_url, transfer_fail_prob=0.0)
    st.restart_workers(decode_env={ENV_WARMUP_S: str(4.0/0.05)})
    r = asyncio.run(soak(SoakConfig(sessions=2, rounds=2, idle_timeout_s=3, duration_s=60, connection="fresh"), t))
    print("(b) cold: stalls", [(s.session, s.round) for s in r.stalls], "findings", [(f.layer, f.confidence) for f in r.findings])
