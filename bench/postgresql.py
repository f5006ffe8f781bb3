"""The PostgreSQL store beside the SQLite store: SciFact quality, search latency at 10k and 100k chunks, indexing speed.

    .venv/bin/python bench/postgresql.py                                   # SciFact, then 10k and 100k chunks
    .venv/bin/python bench/postgresql.py --sizes 10000 --queries 100 --no-scifact

Starts a throwaway PostgreSQL in a temporary folder (`multis.testing.postgres.TempPostgres`: Debian's server, else the
pgserver wheel; fsync off, as a benchmark server) and stops it at the end; nothing is cached between runs.

- SciFact (../shared/eval/scifact; skipped when absent): the corpus saved into an SQLite store and a PostgreSQL store,
  the 300 test queries searched with `Store.search(q, limit=100, embedder=False)` on each: nDCG@10, Recall@100,
  MRR@10, q/s, and the nDCG@10 difference (the issue asks for at most 0.005).
- Indexing: the synthetic chunks of bench/_common.py (Zipf text, 100-300 words, scopes as in bench/search.py) saved
  in batches of 2,000 with `save` into each store: chunks per second.
- Search: the same 10,000 accesses as bench/search.py recorded in both, then for each question (2-8 Zipf terms with
  stopwords) in rotating order: the SQLite store, the PostgreSQL store, and a bare PostgreSQL full-text query on the
  same database (`ts_rank`, the same OR of the same tokens, the same scopes, LIMIT 30 = the store's candidates), all
  with scopes ['kb', 'user:1001'], then the two stores with no scope filter (the owner).
"""
import argparse, itertools, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import USERS, machine, questions, summary, synthetic_chunks, timed
from search import NOW, LIMIT, FACTOR, add_accesses
from multis.retrieval.store import Store, open_store
from multis.retrieval.search import query_terms
from multis.retrieval.pgsearch import _tokens, _tsquery
from multis.retrieval.postgresql import close_pools
from multis.testing.postgres import TempPostgres

SCIFACT = Path(__file__).resolve().parents[2]/'shared'/'eval'/'scifact'
USER = USERS[1]
BARE = ("SELECT id, ts_rank(tsv, %(q)s::tsquery) AS r FROM chunks WHERE tsv @@ %(q)s::tsquery AND scope = ANY(%(s)s) "
        "ORDER BY r DESC LIMIT %(n)s")
BARE_ALL = "SELECT id, ts_rank(tsv, %(q)s::tsquery) AS r FROM chunks WHERE tsv @@ %(q)s::tsquery ORDER BY r DESC LIMIT %(n)s"

def scifact(srv):
    "nDCG@10 and speed of both stores on the SciFact test split"
    from multis.retrieval.ranking import load_beir, evaluate
    from multis.retrieval.evaluate import corpus_chunks, search_fn
    corpus, queries, qrels = load_beir(SCIFACT, 'test')
    chunks, res = corpus_chunks(corpus), {}
    for name, st in (('SQLite store', Store(':memory:')), ('PostgreSQL store', open_store(srv.new_database('scifact')))):
        with st:
            t = time.perf_counter(); st.save(chunks); t_save = time.perf_counter() - t
            f = search_fn(st, embedder=False)
            evaluate(f, dict(itertools.islice(queries.items(), 30)), qrels)          # warm up
            t = time.perf_counter(); m = evaluate(f, queries, qrels, ks=(10, 100)); m['qps'] = len(queries) / (time.perf_counter() - t)
            res[name] = m
            print(f"  {name:<18} nDCG@10 {m['ndcg@10']:.4f}  Recall@100 {m['recall@100']:.4f}  MRR@10 {m['mrr@10']:.4f}  "
                  f"{m['qps']:6.1f} q/s  ({len(chunks):,} chunks saved in {t_save:.1f} s)", flush=True)
    d = abs(res['SQLite store']['ndcg@10'] - res['PostgreSQL store']['ndcg@10'])
    print(f"  nDCG@10 difference {d:.4f} (at most 0.005 asked): {'ok' if d <= 0.005 else 'TOO FAR'}")

def build(n:int, srv, folder:Path)->tuple:
    "Both stores holding the same n synthetic chunks and accesses; (sqlite store, pg store, chunks/s of each)"
    rates = {}
    lite, pg = Store(folder/f'bench-{n}.db'), open_store(srv.new_database(f'bench{n}'))
    for name, st in (('SQLite', lite), ('PostgreSQL', pg)):
        chunks, t = synthetic_chunks(n), time.perf_counter()
        while batch := list(itertools.islice(chunks, 2000)): st.save(batch)
        rates[name] = n / (time.perf_counter() - t)
        add_accesses(st)
    pg._sql('VACUUM ANALYZE chunks'); pg._sql('ANALYZE fts_terms')
    return lite, pg, rates

def variants(lite, pg, conn)->dict:
    "name -> function(question)"
    def bare(sql, scopes):
        def run(q): return conn.execute(sql, dict(q=_tsquery(_tokens(query_terms(q))) or "''", s=scopes, n=LIMIT*FACTOR)).fetchall()
        return run
    def store(st, scopes):
        def run(q): return st.search(q, limit=LIMIT, scopes=scopes, now=NOW)
        return run
    return {'SQLite store, scoped': store(lite, ['kb', USER]), 'PostgreSQL store, scoped': store(pg, ['kb', USER]),
            'bare PostgreSQL ts_rank, scoped': bare(BARE, ['kb', USER]),
            'SQLite store, owner': store(lite, None), 'PostgreSQL store, owner': store(pg, None),
            'bare PostgreSQL ts_rank, owner': bare(BARE_ALL, None)}

def run_size(n:int, qs:list, srv, folder:Path)->list:
    import psycopg
    print(f"{n:,} chunks: building both stores ...", flush=True)
    lite, pg, rates = build(n, srv, folder)
    print(f"  indexing: SQLite store {rates['SQLite']:,.0f} chunks/s, PostgreSQL store {rates['PostgreSQL']:,.0f} chunks/s "
          f"({rates['PostgreSQL'] / rates['SQLite']:.2f}x)", flush=True)
    with lite, pg, psycopg.connect(pg._conninfo, autocommit=True) as conn:
        conn.execute('SET jit = off')
        fs = variants(lite, pg, conn)
        for q in qs[:5]: [f(q) for f in fs.values()]
        same = sum([h.chunk_id for h in fs['SQLite store, scoped'](q)] == [h.chunk_id for h in fs['PostgreSQL store, scoped'](q)] for q in qs)
        times, names = {k: [] for k in fs}, list(fs)
        for i, q in enumerate(qs):
            for k in names[i % len(names):] + names[:i % len(names)]: times[k].append(timed(fs[k], q)[0])
    print(f"  the same top {LIMIT} on both stores (scoped) for {same}/{len(qs)} questions", flush=True)
    return [(n, k, summary(v)) for k, v in times.items()]

def report(rows:list):
    print(f"\n{'chunks':>9}  {'variant':<34} {'p50 ms':>9} {'p99 ms':>9} {'QPS':>8} {'p50 / SQLite':>13}")
    base = {(n, k.split(', ')[1]): s['p50'] for n, k, s in rows if k.startswith('SQLite')}
    for n, k, s in rows:
        print(f"{n:>9,}  {k:<34} {s['p50']:>9.2f} {s['p99']:>9.2f} {s['qps']:>8.1f} {s['p50'] / base[(n, k.split(', ')[1])]:>12.2f}x")

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sizes', default='10000,100000', help='comma-separated chunk counts')
    ap.add_argument('--queries', type=int, default=200, help='questions per size')
    ap.add_argument('--no-scifact', action='store_true', help='skip the SciFact comparison')
    args = ap.parse_args(argv)
    srv = TempPostgres().start()
    if not srv.ok: sys.exit(f"no PostgreSQL: {srv.why}")
    import psycopg
    with psycopg.connect(srv.url()) as c: version = c.execute('SHOW server_version').fetchone()[0]
    print(machine() + f" | PostgreSQL {version} ({srv.kind})")
    try:
        if args.no_scifact: pass
        elif SCIFACT.is_dir(): print("SciFact test split, BM25 (embedder=False), limit 100:", flush=True); scifact(srv)
        else: print(f"SciFact skipped: {SCIFACT} is absent")
        qs, rows = questions(args.queries), []
        with tempfile.TemporaryDirectory() as d:
            for n in [int(s) for s in args.sizes.split(',')]: rows += run_size(n, qs, srv, Path(d))
        report(rows)
        print(f"\nlimit {LIMIT}, {LIMIT*FACTOR} BM25 candidates, scopes ['kb', '{USER}'] (scoped) or all (owner), "
              f"{args.queries} questions of 2-8 terms; bare = ts_rank over the same tsvector and tokens, LIMIT {LIMIT*FACTOR}.")
    finally:
        close_pools(); srv.stop()

if __name__ == '__main__': main()
