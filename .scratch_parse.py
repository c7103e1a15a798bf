import sys, time
sys.path.insert(0,'benchmarks/peers'); sys.path.insert(0,'src')
import truth_server as t, httptools
from servelab.io.h1 import ResponseParser
reads = [t.HEAD_AND_ROLE] + [t.TOKEN_CHUNKS[k%8] for k in range(63)] + [t.TOKEN_CHUNKS[7]+t._tail(128,64)]
N=3000
class P:
    def __init__(s): s.ch=[]; s.now=0; s.done=False
    def on_body(s,b): s.ch.append((s.now,b))
    def on_message_complete(s): s.done=True
for rep in range(2):
    p0=time.process_time()
    for _ in range(N):
        p=ResponseParser(); ch=[]
        for i,r in enumerate(reads):
            b=p.feed(r)
            if b: ch.append((i,b))
    p1=time.process_time()
    for _ in range(N):
        o=P(); hp=httptools.HttpResponseParser(o)
        for i,r in enumerate(reads):
            o.now=i; hp.feed_data(r)
    p2=time.process_time()
    print("h1 us/read", (p1-p0)/N/65*1e6, "httptools us/read", (p2-p1)/N/65*1e6)
