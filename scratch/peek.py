import json, urllib.request, time
from tests.support.stack import sim_stack
with sim_stack(time_scale=0.05, proxy=False) as st:
    body = json.dumps({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":False}).encode()
    req = urllib.request.Request(st.router_url+"/v1/chat/completions", body, {"Content-Type":"application/json"})
    print(urllib.request.urlopen(req).read()[:300])
    for p in ("/workers", "/get_loads", "/get_load"):
        try: print(p, urllib.request.urlopen(st.router_url+p).read()[:1500])
        except Exception as e: print(p, e)
    print(urllib.request.urlopen(f"http://127.0.0.1:{st.prometheus_port}/metrics").read().decode()[:6000])
    print(urllib.request.urlopen(st.decode_url+"/get_load").read())
    print(urllib.request.urlopen(st.decode_url+"/metrics").read().decode()[:1500])
