"""Explorer update latency at 10k and 100k chunks, beside the bare `Store.search` of the same query.

    .venv/bin/python bench/explorer.py                          # 10k and 100k, 100 questions; hybrid at 10k
    .venv/bin/python bench/explorer.py --sizes 10000 --queries 50 --hybrid-sizes ''

Uses bench/search.py's cached databases (built on first use). For each question, in one run: the bare
`Store.search`, then the explorer's update after the query changes (fetch, table, excerpt), after the activation
weight moves (rerank of the cached candidates) and after the decay moves (activations recomputed, then rerank).
An update is timed from setting the widget's value to the end of its callback (no browser: rendering is not counted).

Hybrid search (`--hybrid-sizes`, default 10k): a copy of the same database with a `hash:256` vector (`HashEmbedder`)
for every chunk, made once into bench/.cache/. The same updates with the explorer and `Store.search` searching
hybrid, plus the vector weight slider (the cached candidates blended again, then reranked: no fetch, no embedding).
The query's vector comes from the embedder's cache in the explorer's fetch: `Store.search` embedded it just before.
"""
import argparse, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, questions, summary, timed
from search import build, build_with_vectors, NOW, LIMIT, USER
from multis.retrieval.store import Store
from multis.workbench.explorer import Explorer
from multis.retrieval.embed import HashEmbedder

SCOPES = ['kb', USER]
HASH_DIM = 256
TARGET_10K_MS, OVERHEAD_100K_MS = 100.0, 20.0   # the aims

def set_value(w, v): w.value = v

def run_size(n:int, qs:list)->dict:
    "name -> timings (seconds) for every kind of update on the database of n chunks"
    with Store(build(n)) as st:
        ex = Explorer(st, scopes=SCOPES, limit=LIMIT, now=NOW)
        for q in qs[:5]: st.search(q, limit=LIMIT, scopes=SCOPES, now=NOW); set_value(ex.query, q)   # warm up
        f0, times = ex.fetches, {k: [] for k in ('Store.search', 'query change (fetch)', 'activation weight (rerank)', 'decay (activations)')}
        for i, q in enumerate(qs):
            times['Store.search'].append(timed(st.search, q, limit=LIMIT, scopes=SCOPES, now=NOW)[0])
            times['query change (fetch)'].append(timed(set_value, ex.query, q)[0])
            times['activation weight (rerank)'].append(timed(set_value, ex.activation_weight, 1.0 + (i % 2))[0])
            times['decay (activations)'].append(timed(set_value, ex.decay, 0.4 + 0.2 * (i % 2))[0])
        assert ex.fetches - f0 <= len(qs), ex.fetches - f0   # the sliders never fetched
        return times

def run_hybrid(n:int, qs:list)->dict:
    "name -> timings (seconds) for every kind of update, hybrid search, on the database of n chunks with vectors"
    with Store(build_with_vectors(n, HashEmbedder(HASH_DIM))) as st:
        emb = HashEmbedder(HASH_DIM)
        ex = Explorer(st, scopes=SCOPES, limit=LIMIT, now=NOW, embedder=emb)
        def search(q): return st.search(q, limit=LIMIT, scopes=SCOPES, now=NOW, embedder=emb)
        for q in qs[:5]: search(q); set_value(ex.query, q)   # warm up (and load the vectors)
        f0, times = ex.fetches, {k: [] for k in ('Store.search', 'query change (fetch)', 'vector weight (blend)',
                                                 'activation weight (rerank)', 'decay (activations)')}
        for i, q in enumerate(qs):
            times['Store.search'].append(timed(search, q)[0])
            times['query change (fetch)'].append(timed(set_value, ex.query, q)[0])
            times['vector weight (blend)'].append(timed(set_value, ex.vector_weight, 0.3 + 0.4 * (i % 2))[0])
            times['activation weight (rerank)'].append(timed(set_value, ex.activation_weight, 1.0 + (i % 2))[0])
            times['decay (activations)'].append(timed(set_value, ex.decay, 0.4 + 0.2 * (i % 2))[0])
        assert ex.fetches - f0 <= len(qs), ex.fetches - f0   # the sliders never fetched
        return times

def report(n:int, times:dict, label:str='')->list:
    "Print one size's table; return the problems found against the aims"
    base = summary(times['Store.search'])['p50']
    if label: print(f"\n{label}", end='')
    print(f"\n{n:>9,} chunks  {'update':<28} {'p50 ms':>8} {'p99 ms':>8} {'p50 - search':>13}")
    for k, v in times.items():
        s = summary(v)
        print(f"{'':>17}{k:<28} {s['p50']:>8.2f} {s['p99']:>8.2f} {s['p50'] - base:>12.2f}")
    q, what = summary(times['query change (fetch)'])['p50'], f"{n:,}{' ' + label if label else ''}"
    if n <= 10_000 and q > TARGET_10K_MS: return [f"{what}: query update p50 {q:.1f} ms > {TARGET_10K_MS} ms"]
    if n >= 100_000 and q - base > OVERHEAD_100K_MS:
        return [f"{what}: query update p50 {q:.1f} ms is more than search {base:.1f} + {OVERHEAD_100K_MS} ms"]
    return []

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sizes', default='10000,100000', help='comma-separated chunk counts')
    ap.add_argument('--queries', type=int, default=100, help='questions per size')
    ap.add_argument('--hybrid-sizes', default='10000', help="chunk counts to time hybrid search at ('' for none)")
    args = ap.parse_args(argv)
    print(machine())
    qs, problems = questions(args.queries), []
    for n in [int(s) for s in args.sizes.split(',') if s]: problems += report(n, run_size(n, qs))
    for n in [int(s) for s in args.hybrid_sizes.split(',') if s]:
        problems += report(n, run_hybrid(n, qs), f"hybrid search, hash:{HASH_DIM} vectors")
    print(f"\nlimit {LIMIT}, scopes {SCOPES}, {args.queries} questions of 2-8 terms; aims: query update under "
          f"{TARGET_10K_MS:.0f} ms at 10k, at most search + {OVERHEAD_100K_MS:.0f} ms at 100k")
    print('\n'.join(['MISSED: ' + p for p in problems]) or 'all aims met')
    return 1 if problems else 0

if __name__ == '__main__': sys.exit(main())
