"""MCP `search` tool-call latency, over stdio (`multis mcp`) and Streamable HTTP (`/mcp` of `multis serve`), beside a
direct `Store.search` on the same database with the same options, in the same run.

    .venv/bin/python bench/mcp.py                               # 10k and 100k chunks, 200 questions each: ~3 min
    .venv/bin/python bench/mcp.py --sizes 10000 --queries 100

The databases are `search.py`'s cached synthetic ones (built on first use), copied into a temporary multis home.
Each question runs once per variant, in an order that rotates from question to question, after 20 warm-up
questions. The figure that matters is the overhead: the tool call's latency minus the direct search's, at p50 and
p95 (the issue's aim: p95 overhead under 10 ms).
"""
import argparse, json, os, shutil, sys, tempfile, time
from contextlib import AsyncExitStack
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or '.').resolve() != HERE]   # this file is not the `mcp` package
import anyio, httpx2
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
sys.path.insert(0, str(HERE))
from _common import machine, pct, questions
from search import build
from multis.config import load_config
from multis.retrieval.store import Store
from multis.run.guard import service_token
from multis.testing.service import ServeProcess

MULTIS = str(Path(sys.executable).parent/'multis')
LIMIT, WARMUP = 10, 20

async def sessions(stack:AsyncExitStack, home:Path, url:str)->dict:
    "name -> ClientSession: one over stdio, one over HTTP with the owner's token"
    params = StdioServerParameters(command=MULTIS, args=['mcp'], env={**os.environ, 'MULTIS_HOME': str(home)})
    r, w = await stack.enter_async_context(stdio_client(params, errlog=open(os.devnull, 'w')))
    stdio = await stack.enter_async_context(ClientSession(r, w))
    hc = await stack.enter_async_context(httpx2.AsyncClient(headers={'Authorization': f'Bearer {service_token(home)}'}, timeout=60))
    r, w, *_ = await stack.enter_async_context(streamable_http_client(url + '/mcp', http_client=hc))
    http = await stack.enter_async_context(ClientSession(r, w))
    for s in (stdio, http): await s.initialize()
    return dict(stdio=stdio, http=http)

async def run_size(n:int, n_queries:int)->dict:
    "Latencies in seconds per variant at n chunks"
    home = Path(tempfile.mkdtemp(prefix='multis-bench-mcp-'))
    try:
        shutil.copy(build(n), home/'multis.db')
        cfg = load_config(home/'config.json')['search']
        opts = dict(activation_weight=cfg['activation_weight'], decay=cfg['decay'], candidate_factor=cfg['candidate_factor'],
                    bm25_weights=tuple(cfg['bm25_weights']))
        srv = ServeProcess(home, timeout=120).start(); url = srv.url
        times = {'direct': [], 'stdio': [], 'http': []}
        try:
            with Store(home/'multis.db') as st:
                async with AsyncExitStack() as stack:
                    ss = await sessions(stack, home, url)
                    def direct(q): return [h.chunk.chunk_id for h in st.search(q, limit=LIMIT, **opts)]
                    async def tool(name, q):
                        r = await ss[name].call_tool('search', {'query': q, 'limit': LIMIT})
                        if r.is_error: raise SystemExit(f'{name}: {r.content[0].text}')
                        return [h['chunk_id'] for h in r.structured_content['result']]
                    qs = questions(WARMUP + n_queries, seed=11)
                    for i, q in enumerate(qs):
                        order = ['direct', 'stdio', 'http']; order = order[i % 3:] + order[:i % 3]
                        got = {}
                        for v in order:
                            t = time.perf_counter()
                            got[v] = direct(q) if v == 'direct' else await tool(v, q)
                            if i >= WARMUP: times[v].append(time.perf_counter() - t)
                        if not (got['direct'] == got['stdio'] == got['http']):
                            # the same store, options and clock to the second: only activation drift may differ
                            if set(got['direct']) != set(got['stdio']) or set(got['direct']) != set(got['http']):
                                raise SystemExit(f'different hits for {q!r}')
        finally: srv.stop(30)
        return times
    finally: shutil.rmtree(home, ignore_errors=True)

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--sizes', default='10000,100000'); ap.add_argument('--queries', type=int, default=200)
    a = ap.parse_args()
    print(machine()); print(f"MCP search tool calls, limit {LIMIT}, {a.queries} questions per size (+{WARMUP} warm-up)\n")
    print(f"{'chunks':>8} {'variant':>7} {'p50 ms':>8} {'p95 ms':>8} {'p50 overhead':>13} {'p95 overhead':>13} {'p50 ratio':>10}")
    out = {}
    for n in [int(x) for x in a.sizes.split(',')]:
        t = anyio.run(run_size, n, a.queries)
        d50, d95 = pct(t['direct'], 50), pct(t['direct'], 95)
        for v in ('direct', 'stdio', 'http'):
            p50, p95 = pct(t[v], 50), pct(t[v], 95)
            over = '' if v == 'direct' else f"{(p50-d50)*1e3:>+12.2f}  {(p95-d95)*1e3:>+12.2f} {p50/d50:>10.2f}"
            print(f"{n:>8,} {v:>7} {p50*1e3:>8.2f} {p95*1e3:>8.2f} {over}", flush=True)
            out[f'{n}/{v}'] = dict(p50_ms=p50*1e3, p95_ms=p95*1e3)
    print('\n' + json.dumps(out))

if __name__ == '__main__': main()
