import sys, time, json
sys.path.insert(0,'benchmarks/peers'); sys.path.insert(0,'src')
import truth_server as t
from servelab.core.records import RequestRecord, decode_chunks
from servelab.io.h1 import ResponseParser
head_role = t.HEAD_AND_ROLE
reads = [head_role] + [t.TOKEN_CHUNKS[k%8] for k in range(63)] + [t.TOKEN_CHUNKS[7]+t._tail(128,64)]
N=2000
p0=time.process_time()
for _ in range(N):
    p=ResponseParser(); ch=[]
    for i,r in enumerate(reads):
        b=p.feed(r)
        if b: ch.append((i,b))
p1=time.process_time()
for _ in range(N):
    rec=RequestRecord(0,0); decode_chunks(rec, ch, 100)
p2=time.process_time()
print("parse us/token", (p1-p0)/N/64*1e6, "decode us/token", (p2-p1)/N/64*1e6, rec.output_tokens, rec.ok)
from servelab.core.sse import SSEDecoder
p0=time.process_time()
for _ in range(N):
    d=SSEDecoder()
    for tt,b in ch: d.feed(b,tt)
p1=time.process_time()
ev=[]
d=SSEDecoder()
for tt,b in ch: ev+=d.feed(b,tt)
p2=time.process_time()
for _ in range(N):
    for e in ev:
        if e.data != "[DONE]": json.loads(e.data)
p3=time.process_time()
print("sse us/token",(p1-p0)/N/64*1e6,"json us/token",(p3-p2)/N/64*1e6)
