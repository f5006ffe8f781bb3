"""Explorer update latency at 10k and 100k chunks, beside the bare `Store.search` of the same query.

    .venv/bin/python bench/explorer.py                          # 10k and 100k, 100 questions
    .venv/bin/python bench/explorer.py --sizes 10000 --queries 50

Uses bench/search.py's cached databases (built on first use). For each question, in one run: the bare
`Store.search`, then the explorer's update after the query changes (fetch, table, excerpt), after the activation
weight moves (rerank of the cached candidates) and after the decay moves (activations recomputed, then rerank).
An update is timed from setting the widget's value to the end of its callback (no browser: rendering is not counted).
"""
import argparse, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, questions, summary, timed
from search import build, NOW, LIMIT, USER
from multis.store import Store
from multis.explorer import Explorer

SCOPES = ['kb', USER]
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

def report(n:int, times:dict)->list:
    "Print one size's table; return the problems found against the aims"
    base = summary(times['Store.search'])['p50']
    print(f"\n{n:>9,} chunks  {'update':<28} {'p50 ms':>8} {'p99 ms':>8} {'p50 - search':>13}")
    for k, v in times.items():
        s = summary(v)
        print(f"{'':>17}{k:<28} {s['p50']:>8.2f} {s['p99']:>8.2f} {s['p50'] - base:>12.2f}")
    q = summary(times['query change (fetch)'])['p50']
    if n <= 10_000 and q > TARGET_10K_MS: return [f"{n:,}: query update p50 {q:.1f} ms > {TARGET_10K_MS} ms"]
    if n >= 100_000 and q - base > OVERHEAD_100K_MS:
        return [f"{n:,}: query update p50 {q:.1f} ms is more than search {base:.1f} + {OVERHEAD_100K_MS} ms"]
    return []

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sizes', default='10000,100000', help='comma-separated chunk counts')
    ap.add_argument('--queries', type=int, default=100, help='questions per size')
    args = ap.parse_args(argv)
    print(machine())
    qs, problems = questions(args.queries), []
    for n in [int(s) for s in args.sizes.split(',')]: problems += report(n, run_size(n, qs))
    print(f"\nlimit {LIMIT}, scopes {SCOPES}, {args.queries} questions of 2-8 terms; aims: query update under "
          f"{TARGET_10K_MS:.0f} ms at 10k, at most search + {OVERHEAD_100K_MS:.0f} ms at 100k")
    print('\n'.join(['MISSED: ' + p for p in problems]) or 'all aims met')
    return 1 if problems else 0

if __name__ == '__main__': sys.exit(main())
