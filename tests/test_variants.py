"The variants API (multis.workbench.variants, .locomo): ranx's figures equal the hand-written metrics and the benchmarks'"
import json, os, random, subprocess, sys
from pathlib import Path
import importlib.util
import pytest
from multis.core import MultisError
from multis.retrieval.ranking import evaluate, ndcg_at_k, recall_at_k, mrr
from multis.retrieval.evaluate import beir_store, search_fn

# ranx (numba, scipy, pandas) is imported by the tests, not at collection: a forked child's ru_maxrss starts at pytest's
# size, and tests/test_bombs.py measures a subprocess's memory that way
pytestmark = pytest.mark.skipif(importlib.util.find_spec('ranx') is None, reason='ranx is not installed (the explorer extra)')

def api():
    "The API's names, imported when a test runs"
    from multis.workbench import variants, locomo
    return {k: v for k, v in {**vars(locomo), **vars(variants)}.items() if not k.startswith("_")}

REPO = Path(__file__).resolve().parents[1]
EVAL = REPO.parent/'shared'/'eval'
SCIFACT, LOCOMO = EVAL/'scifact', EVAL/'locomo'/'locomo10.json'

def toy_beir(n_docs=150, n_queries=25, seed=3):
    "Random-word documents; each query takes words of one or two relevant documents (grades 1 and 2) plus noise"
    rng = random.Random(seed)
    vocab = [f'w{i}' for i in range(300)]
    corpus = {f'doc{i}': {'title': ' '.join(rng.sample(vocab, 2)), 'text': ' '.join(rng.choices(vocab, k=30))} for i in range(n_docs)}
    queries, qrels = {}, {}
    for i in range(n_queries):
        rel = rng.sample(sorted(corpus), 2)
        queries[f'q{i}'] = ' '.join(rng.sample(corpus[rel[0]]['text'].split(), 3) + rng.sample(vocab, 3))
        qrels[f'q{i}'] = {rel[0]: 2, rel[1]: 1, f'doc{rng.randrange(n_docs)}': 0}
    qrels['q0'] = {'doc1': 0}                                       # judged, nothing relevant: left out, as evaluate does
    return corpus, queries, qrels

@pytest.fixture(scope='module')
def toy():
    globals().update(api())
    corpus, queries, qrels = toy_beir()
    with beir_store(corpus) as st: yield Collection('toy', st, queries, qrels)

def test_ranx_metrics_equal_the_hand_written_ones_on_every_query(toy):
    globals().update(api())
    def boost_title(hit): return hit.bm25 + (1.0 if 'w1' in hit.name else 0.0)
    variants = {'bm25': {}, 'title x3': {'bm25_weights': (3.0, 1.0, 0.5)}, 'scorer': {'scorer': boost_title},
                'factor 1': {'candidate_factor': 1}}
    exp = run_variants(toy, variants)
    for name, opts in variants.items():
        hand = evaluate(search_fn(toy.store, **opts), toy.queries, toy.qrels, per_query=True)
        mine = exp.per_query[exp.per_query.variant == name].set_index('query')
        assert len(mine) == hand['queries'] == 24
        for q, m in hand['per_query'].items():
            for k in METRICS: assert mine.loc[q, k] == pytest.approx(m[k], abs=1e-12), (name, q, k)
        for k in METRICS: assert exp.means().loc[name, k] == pytest.approx(hand[k], abs=1e-12)

def test_fusion_significance_and_saved_runs(toy, tmp_path):
    globals().update(api())
    exp = run_variants(toy, {'a': {}, 'b': {'bm25_weights': (0.0, 1.0, 0.5)}, 'rrf': {'fuse': {'runs': ['a', 'b']}}},
                       save=tmp_path/'runs')
    sig = exp.significance(test='fisher')
    assert set(sig.variant) == {'b', 'rrf'} and all(0 <= p <= 1 for p in sig.p)
    assert (sig['W'] + sig['T'] + sig['L'] == 24).all()
    lines = (tmp_path/'runs'/'a.trec').read_text().splitlines()
    q, q0, doc, rank, score, tag = lines[0].split()
    assert (q0, rank, tag) == ('Q0', '1', 'a')
    first = [l.split()[2] for l in lines if l.split()[0] == 'q1']
    assert first == search_fn(toy.store)(toy.queries['q1'], 100)
    assert {p.name for p in (tmp_path/'runs').iterdir()} == {'a.trec', 'a.csv', 'b.trec', 'b.csv', 'rrf.trec', 'rrf.csv',
                                                            'per_query.csv', 'means.csv'}

def test_bad_variants_and_empty_collections_say_what_is_wrong(toy):
    globals().update(api())
    with pytest.raises(MultisError, match="fuses runs not run before it: x"): run_variants(toy, {'f': {'fuse': {'runs': ['x', 'y']}}})
    empty = Collection('empty', toy.store, {'q': 'w1'}, {'q': {'doc1': 0}})
    with pytest.raises(MultisError, match='empty: no query to evaluate'): run_variants(empty, {'a': {}})
    assert ranx_run({'q': {'d': 1.0}}, 'r').to_dict() == {'q': {'d': 1.0}}

def test_locomo_recall_and_hit_are_the_benchmark_formulas(tmp_path):
    "On a tiny conversation: recall@k = share of evidence in the top k, hit@k = any of it (bench/locomo.py's question_scores)"
    globals().update(api())
    turns = [('Ann', 'I adopted a puppy called Rex'), ('Bo', 'What breed is Rex?'), ('Ann', 'Rex is a border collie'),
             ('Bo', 'I paint lakes in oil'), ('Ann', 'Rex can fetch the paper')]
    data = [{'sample_id': 's', 'conversation': {'session_1_date_time': '1:56 pm on 8 May, 2023',
             'session_1': [{'speaker': a, 'dia_id': f'D1:{i}', 'text': t} for i, (a, t) in enumerate(turns, 1)]},
             'qa': [{'question': 'what breed is Rex, the puppy?', 'evidence': ['D1:1', 'D1:3'], 'category': 1},
                    {'question': 'what does Bo paint?', 'evidence': ['D1:4'], 'category': 4}]}]
    (tmp_path/'l.json').write_text(json.dumps(data))
    coll = locomo_collection(load_locomo(tmp_path/'l.json'))
    exp = run_variants(coll, {'today': {}}, metrics=LOCOMO_METRICS)
    for qid, ev in coll.qrels.items():
        ranked = [coll.doc(h) for h in coll.store.search(coll.queries[qid], limit=10, **coll.options[qid])]
        row = exp.per_query.set_index('query').loc[qid]
        for k in (1, 5, 10):
            assert row[f'recall@{k}'] == pytest.approx(len(set(ev) & set(ranked[:k])) / len(ev))
            assert row[f'hit_rate@{k}'] == float(bool(set(ev) & set(ranked[:k])))
    assert list(by_category(exp).columns) == ['multi-hop', 'single-hop']
    assert os.getcwd() != str(tmp_path) and time_is_local()

def time_is_local():
    import time
    return os.environ.get('TZ') in (None, 'UTC') and time.tzname is not None

@pytest.mark.skipif(not SCIFACT.is_dir(), reason='../shared/eval/scifact is absent')
def test_scifact_bm25_figure_through_the_api():
    "bench/scifact.py's test-split BM25 figure, nDCG@10 0.6916, to 4 decimals and equal to evaluate's"
    globals().update(api())
    coll = beir_collection(SCIFACT)
    exp = run_variants(coll, {'bm25': {}})
    hand = evaluate(search_fn(coll.store), coll.queries, coll.qrels)
    m = exp.means().loc['bm25']
    assert round(m['ndcg@10'], 4) == 0.6916 and m['n'] == hand['queries'] == 300
    for k in METRICS: assert m[k] == pytest.approx(hand[k], abs=1e-12)
    coll.store.close()

BENCH_ONE = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, 'bench')
import locomo as B
convs = [cv for cv in B.load(B.LOCOMO) if cv.idx == 5]
with tempfile.TemporaryDirectory() as tmp:
    res = B.run(convs, B.TODAY, Path(tmp), asks={'today': {}, 'w': {'weights': (1.0, 1.0, 1.0)}})
print(json.dumps({k: B.mean(v[0], {5}) for k, v in res.items()}))
"""

@pytest.mark.skipif(not LOCOMO.is_file(), reason='../shared/eval/locomo is absent')
def test_locomo_figures_equal_the_benchmarks():
    "Conversation 5 in its own store: R@k and hit@k of bench/locomo.py's code and of the API, to 4 decimals"
    globals().update(api())
    r = subprocess.run([sys.executable, '-c', BENCH_ONE], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    bench = json.loads(r.stdout.splitlines()[-1])
    coll = locomo_collection(load_locomo(LOCOMO, [5]))
    exp = run_variants(coll, {'today': {}, 'w': {'bm25_weights': (1.0, 1.0, 1.0)}}, metrics=LOCOMO_METRICS)
    for name in ('today', 'w'):
        m = exp.means().loc[name]
        assert m['n'] == bench[name]['n']
        for k in (1, 5, 10):
            assert round(m[f'recall@{k}'], 4) == round(bench[name][f'R@{k}'], 4)
            assert round(m[f'hit_rate@{k}'], 4) == round(bench[name][f'hit@{k}'], 4)
