"""Search latency at 10k, 100k and 1M chunks: multis `Store.search` beside the bare scoped FTS5 OR query.

    .venv/bin/python bench/search.py                       # 10k, 100k, 1M: ~20 min (+6 min to build the first time)
    .venv/bin/python bench/search.py --sizes 10000,100000 --queries 200

Databases are built once into bench/.cache/ (git-ignored): synthetic Zipf text (vocabulary 50k, s=1.1, 100-300 words
a chunk), 20 sections a file, files in scopes kb (80%), admin (10%) and eight user:<id> (10%), plus 10k accesses.
Queries are questions of 2-8 Zipf terms with stopwords. For each query every variant runs once, in rotating order.
"""
import argparse, itertools, sqlite3, statistics, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CACHE, GEN_VERSION, USERS, machine, questions, summary, synthetic_chunks, timed
import numpy as np
from multis.retrieval.store import Store, SCHEMA_VERSION
from multis.retrieval.search import query_terms, fts_query
from multis.retrieval.ranking import DEFAULTS

NOW = 1_800_000_000.0   # the benchmark's "now": accesses lie in the 30 days before it
LIMIT, FACTOR, WEIGHTS = 10, 3, DEFAULTS['bm25_weights']   # the bare query weighs the columns as multis does
USER = USERS[1]
BARE = """SELECT chunks_fts.rowid, bm25(chunks_fts, ?, ?, ?) AS s FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid
WHERE chunks_fts MATCH ? AND c.scope IN (?, ?) ORDER BY s LIMIT ?"""
BARE_ALL = "SELECT rowid, bm25(chunks_fts, ?, ?, ?) AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?"

def add_accesses(st:Store, n:int=10_000, seed:int=3):
    "n recorded accesses in the last 30 days, popular chunks (Zipf over a random order) more often"
    rng, total = np.random.default_rng(seed), st.stats()['chunks']
    order = rng.permutation(total) + 1
    p = np.arange(1, total+1, dtype=float) ** -1.0
    picks = order[np.minimum(np.searchsorted(np.cumsum(p/p.sum()), rng.random(n)), total-1)]
    times = np.sort(NOW - rng.random(n//10) * 30*86400)
    ids = dict(st._sql("SELECT id, chunk_id FROM chunks").fetchall()) if total <= 100_000 else None
    for t, batch in zip(times, np.array_split(picks, n//10)):
        rows = batch.tolist()
        cids = [ids[i] for i in rows] if ids else [r[0] for r in st._sql(
            f"SELECT chunk_id FROM chunks WHERE id IN ({','.join('?'*len(rows))})", rows)]
        st.record_access(cids, 'bench', now=float(t))

def build(n:int)->Path:
    "The cached database of n synthetic chunks (built on first use)"
    path = CACHE/f'search-{n}-g{GEN_VERSION}-s{SCHEMA_VERSION}.db'
    if path.exists(): return path
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix('.building')
    for f in CACHE.glob(tmp.name + '*'): f.unlink()
    t, chunks = time.perf_counter(), synthetic_chunks(n)
    with Store(tmp) as st:
        while batch := list(itertools.islice(chunks, 20_000)): st.save(batch)
        add_accesses(st)
        st._sql('PRAGMA wal_checkpoint(TRUNCATE)')
    tmp.rename(path)
    print(f"  built {n:,} chunks in {time.perf_counter()-t:.0f} s: {path.stat().st_size/2**20:,.0f} MB", flush=True)
    return path

def build_with_vectors(n:int, embedder)->Path:
    "A copy of `build(n)`'s database with a vector from `embedder` for every chunk (made on first use)"
    from multis.retrieval.vectors import embed_pending
    path = CACHE/f"hybrid-{n}-g{GEN_VERSION}-s{SCHEMA_VERSION}-{embedder.name.replace(':', '')}.db"
    if path.exists(): return path
    tmp = path.with_suffix('.building')
    for f in CACHE.glob(tmp.name + '*'): f.unlink()
    src, dst = sqlite3.connect(build(n)), sqlite3.connect(tmp)
    src.backup(dst); src.close(); dst.close()
    print(f"  embedding {n:,} chunks with {embedder.name} (once) ...", flush=True)
    t = time.perf_counter()
    with Store(tmp) as st:
        embed_pending(st, embedder, batch=2_000, progress=sys.stderr.isatty())
        st._sql('PRAGMA wal_checkpoint(TRUNCATE)')
    tmp.rename(path)
    print(f"  {n:,} vectors in {time.perf_counter() - t:.0f} s: {path.stat().st_size / 2**20:,.0f} MB", flush=True)
    return path

def variants(st:Store, bare:sqlite3.Connection)->dict:
    "name -> function(query) for each thing timed"
    def bare_q(sql, *extra):
        def run(q): return bare.execute(sql, (*WEIGHTS, fts_query(query_terms(q)), *extra, LIMIT*FACTOR)).fetchall()
        return run
    def multis(scopes, **kw):
        def run(q): return st.search(q, limit=LIMIT, scopes=scopes, now=NOW, **kw)
        return run
    def cold(q):
        st._df_cache = (None, {})
        return st.search(q, limit=LIMIT, scopes=['kb', USER], now=NOW)
    return {'bare FTS5, scoped': bare_q(BARE, 'kb', USER), 'multis, scoped': multis(['kb', USER]),
            'multis, scoped, cold counts': cold, 'multis, scoped, prune=False': multis(['kb', USER], prune=False),
            'bare FTS5, all scopes': bare_q(BARE_ALL), 'multis, owner': multis(None)}

def run_size(n:int, qs:list)->list:
    "Time every variant on every query of the database of n chunks; one row of figures per variant"
    with Store(build(n)) as st:
        bare = sqlite3.connect(st.path)
        fs = variants(st, bare)
        for q in qs[:5]: [f(q) for f in fs.values()]            # warm the OS cache and the counts
        times, names = {k: [] for k in fs}, list(fs)
        for i, q in enumerate(qs):
            for k in names[i % len(names):] + names[:i % len(names)]: times[k].append(timed(fs[k], q)[0])
        agree = [agreement(fs['multis, scoped'](q), fs['multis, scoped, prune=False'](q)) for q in qs]
        stats = match_stats(st, qs)
        bare.close()
    print(f"  pruned top-{LIMIT} against unpruned: identical for {agree.count('identical')}/{len(qs)} queries, same "
          f"up to near-ties (scores within 1e-4 at every rank) for {agree.count('ties')}, different for {agree.count('different')}"
          f"\n  {stats}", flush=True)
    return [(n, k, summary(v)) for k, v in times.items()]

def agreement(a:list, b:list, tol:float=1e-4)->str:
    "'identical' (same hits, same order), 'ties' (scores within tol at every rank) or 'different'"
    if [h.chunk_id for h in a] == [h.chunk_id for h in b]: return 'identical'
    same = len(a) == len(b) and all(abs(x.score - y.score) < tol for x, y in zip(a, b))
    return 'ties' if same else 'different'

def match_stats(st:Store, qs:list)->str:
    "How many rows the full and the pruned queries match (median share of the index), and how often all were kept"
    total = st.stats()['chunks']
    count = lambda ts: st._sql('SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?', (fts_query(ts),)).fetchone()[0]
    full, pruned, fewer = [], [], 0
    for q in qs:
        ts = query_terms(q); kept = st.informative_terms(ts)
        full.append(count(ts)/total); pruned.append(count(kept)/total)
        fewer += kept != ts and count(kept) < LIMIT*FACTOR
    return (f"rows matched (median share): full query {statistics.median(full):.0%}, pruned {statistics.median(pruned):.0%}; "
            f"pruned query short of {LIMIT*FACTOR} rows (full query rerun) for {fewer}/{len(qs)}")

def report(rows:list):
    "The table: p50, p99, QPS and p50 ratio to the bare query of the same scopes"
    print(f"\n{'chunks':>9}  {'variant':<30} {'p50 ms':>9} {'p99 ms':>9} {'QPS':>8} {'p50 / bare':>11}")
    base = {(n, 'scoped' in k): s['p50'] for n, k, s in rows if k.startswith('bare')}
    for n, k, s in rows:
        ratio = s['p50'] / base[(n, 'scoped' in k)]
        print(f"{n:>9,}  {k:<30} {s['p50']:>9.2f} {s['p99']:>9.2f} {s['qps']:>8.1f} {ratio:>10.2f}x")

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sizes', default='10000,100000,1000000', help='comma-separated chunk counts')
    ap.add_argument('--queries', type=int, default=100, help='questions per size')
    args = ap.parse_args(argv)
    print(machine())
    qs, rows = questions(args.queries), []
    for n in [int(s) for s in args.sizes.split(',')]:
        print(f"{n:,} chunks:", flush=True)
        rows += run_size(n, qs)
    report(rows)
    print(f"\nlimit {LIMIT}, {LIMIT*FACTOR} BM25 candidates, scopes ['kb', '{USER}'] (scoped) or all (owner), "
          f"{args.queries} questions of 2-8 terms; 'cold counts' empties the term-count cache before each query.")

if __name__ == '__main__': main()
