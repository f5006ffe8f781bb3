"""Hybrid search latency at 100k chunks: `Store.search` with vectors beside BM25-only search on the same store.

    .venv/bin/python bench/hybrid.py                       # 100k chunks, 200 questions: ~1.5 min (~3.5 min the first time)
    .venv/bin/python bench/hybrid.py --sizes 10000,100000 --queries 300

Uses a copy of search.py's cached synthetic database (bench/.cache/, git-ignored) with one vector per chunk, made once.
The stored vectors come from `HashEmbedder(384)`: 384 dimensions like all-MiniLM-L6-v2, made in minutes where the
model would take hours; exact (brute-force) vector search costs the same whatever the vectors hold, so the latency is
that of real vectors, the ranking is not. Each query is embedded by the real model (`LocalEmbedder`, when
sentence-transformers is installed) with its cache of recent queries off, so its cost is in the hybrid latency, and is
also timed alone. For each question every variant runs once, in an order that rotates from question to question.
"""
import argparse, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import USERS, machine, pct, questions, timed
from search import NOW, LIMIT, FACTOR, build_with_vectors
from multis.retrieval.store import Store
from multis.retrieval.embed import Embedder, EmbeddingError, HashEmbedder, LocalEmbedder
from multis.retrieval.vectors import VectorIndex

DIM, WEIGHT = 384, 0.7
USER, SCOPED = USERS[1], ['kb', USERS[1]]

class QueryModel(Embedder):
    "Searches the stored vectors of `stored` (same name and dimension) with queries embedded by `model`"
    def __init__(self, stored:Embedder, model:Embedder, cached:bool=False):
        self.name, self.dim, self.model = stored.name, stored.dim, model
        self.max_cached = 100_000 if cached else 0   # 0: every query is embedded again

    def _embed(self, texts:list): return self.model.embed(texts)

def query_model()->tuple:
    "(the embedder of the queries, what it is and how long it took to load)"
    t = time.perf_counter()
    try: m = LocalEmbedder(); m.embed(['warm up'])
    except EmbeddingError as e: return HashEmbedder(DIM), f"{HashEmbedder(DIM).name} (the model is not available: {e})"
    if m.dim != DIM: sys.exit(f"{m.name} makes {m.dim}-dimensional vectors, the stored ones have {DIM}")
    return m, f"{m.name}, loaded in {time.perf_counter() - t:.1f} s"

def rss_mb()->float:
    "This process's resident memory in MB"
    try: return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS:')) / 1024
    except (OSError, StopIteration): return float('nan')

def load_figures(st:Store, stored:Embedder, model:Embedder)->str:
    "The one-time cost of the vectors: seconds and memory to load the matrices of the scoped search, then of all scopes"
    vi, q, out, total, m0 = VectorIndex(st, stored.name), model.embed(['warm up'])[0], [], 0.0, rss_mb()
    rows = dict(st._sql('SELECT scope, count(*) FROM embeddings WHERE model = ? GROUP BY scope', (stored.name,)).fetchall())
    for label, scopes in ((f"scopes {SCOPED}", SCOPED), ('all scopes (owner), the rest loaded after them', None)):
        n = sum(rows.get(s, 0) for s in scopes) if scopes else sum(rows.values())
        dt, _ = timed(vi.top, q, LIMIT*FACTOR, scopes)     # the first search of these scopes loads their matrices
        total += dt
        out.append(f"  matrix load, {label}: {n:,} vectors in {total:.2f} s in all, {n*DIM*4 / 2**20:,.0f} MB of float32, "
                   f"process RSS +{rss_mb() - m0:,.0f} MB")
    return '\n'.join(out)

def variants(st:Store, stored:Embedder, model:Embedder)->dict:
    "name -> function(query) for each thing timed"
    live, warm = QueryModel(stored, model), QueryModel(stored, model, cached=True)
    vi = VectorIndex(st, stored.name)
    def search(scopes, **kw): return lambda q: st.search(q, limit=LIMIT, scopes=scopes, now=NOW, **kw)
    return {'BM25 only, scoped': search(SCOPED, embedder=False),
            'hybrid, scoped': search(SCOPED, embedder=live, vector_weight=WEIGHT),
            'hybrid, scoped, query vector cached': search(SCOPED, embedder=warm, vector_weight=WEIGHT),
            'query embedding alone': lambda q: model.embed([q]),
            'vector top 30 alone, scoped': lambda q: vi.top(warm.embed_query(q), LIMIT*FACTOR, SCOPED),
            'BM25 only, owner': search(None, embedder=False),
            'hybrid, owner': search(None, embedder=live, vector_weight=WEIGHT)}

def run_size(n:int, qs:list, stored:Embedder, model:Embedder)->list:
    "Time every variant on every query of the database of n chunks; one (n, variant, times) per variant"
    with Store(build_with_vectors(n, stored)) as st:
        print(load_figures(st, stored, model), flush=True)
        fs = variants(st, stored, model)
        for q in qs[:5]: [f(q) for f in fs.values()]            # warm the OS cache and the term counts
        for q in qs: fs['hybrid, scoped, query vector cached'](q)  # its query vectors, made before the timing
        times, names = {k: [] for k in fs}, list(fs)
        for i, q in enumerate(qs):
            for k in names[i % len(names):] + names[:i % len(names)]: times[k].append(timed(fs[k], q)[0])
    return [(n, k, v) for k, v in times.items()]

def report(rows:list):
    "p50, p90 and p99 in ms, and p50 over BM25-only's p50 on the same store and scopes"
    print(f"\n{'chunks':>9}  {'variant':<36} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'p50 / BM25 only':>16}")
    base = {(n, 'owner' in k): pct(v, 50) for n, k, v in rows if k.startswith('BM25 only')}
    for n, k, v in rows:
        print(f"{n:>9,}  {k:<36} {pct(v, 50)*1e3:>8.2f} {pct(v, 90)*1e3:>8.2f} {pct(v, 99)*1e3:>8.2f} "
              f"{pct(v, 50) / base[(n, 'owner' in k)]:>15.2f}x")

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sizes', default='100000', help='comma-separated chunk counts (databases of search.py)')
    ap.add_argument('--queries', type=int, default=200, help='questions per size')
    args = ap.parse_args(argv)
    print(machine())
    t = time.perf_counter()
    stored, (model, desc) = HashEmbedder(DIM), query_model()
    print(f"stored vectors: {stored.name} (same dimension as the model; brute-force search cost does not depend on what "
          f"they hold); queries embedded by {desc}, cache of recent queries off")
    qs, rows = questions(args.queries), []
    for n in [int(s) for s in args.sizes.split(',')]:
        print(f"{n:,} chunks:", flush=True)
        rows += run_size(n, qs, stored, model)
    report(rows)
    print(f"\nlimit {LIMIT}, {LIMIT*FACTOR} BM25 and {LIMIT*FACTOR} vector candidates, vector_weight {WEIGHT}, scopes {SCOPED} "
          f"(scoped) or all (owner), {args.queries} questions of 2-8 terms; p50 / BM25 only compares with the same scopes. "
          f"Whole run {time.perf_counter() - t:.0f} s")

if __name__ == '__main__': main()
