"Tests of multis.workbench.experiments against the installed package: BEIR samples, sweeps and the simulated access log"
import json, random, subprocess, sys
from pathlib import Path

import pytest

from multis.retrieval.evaluate import beir_store, search_fn
from multis.core import MultisError
from multis.workbench.experiments import (access_log, beir_sample, best_setting, figures, load_eval, mrr_table, simulate_refinding,
                                sweep, weight_grid)
from multis.retrieval.ranking import load_beir, mrr
from multis.retrieval.search import query_terms

SCIFACT = Path(__file__).resolve().parents[1].parent/'shared'/'eval'/'scifact'
NOW0 = 1_700_000_000.0


def toy_beir(n_docs=120, n_queries=15, seed=0):
    "A BEIR-like set of random words: each query takes words of its relevant document plus noise"
    rng = random.Random(seed)
    vocab = [f'w{i}' for i in range(400)]
    corpus = {f'd{i}': {'title': ' '.join(rng.sample(vocab, 2)), 'text': ' '.join(rng.choices(vocab, k=40))}
              for i in range(n_docs)}
    queries, qrels = {}, {}
    for i, d in enumerate(rng.sample(sorted(corpus), n_queries)):
        queries[f'q{i}'] = ' '.join(rng.sample(corpus[d]['text'].split(), 4) + rng.sample(vocab, 4))
        qrels[f'q{i}'] = {d: 1}
    return corpus, queries, qrels


@pytest.fixture(scope='module')
def toy(): return toy_beir()


def doc_ids(hits): return list(dict.fromkeys(h.chunk.metadata['doc_id'] for h in hits))


# ---- samples and sweeps

def test_beir_sample_keeps_relevant_documents(toy):
    corpus, queries, qrels = beir_sample(*toy, n_queries=5, n_docs=30, seed=1)
    assert len(queries) == 5 and len(corpus) == 30
    assert all(d in corpus for q in qrels for d in qrels[q])
    assert beir_sample(*toy, n_queries=5, n_docs=30, seed=1)[0].keys() == corpus.keys()


def test_sweep_one_row_per_setting_metrics_in_range(toy):
    corpus, queries, qrels = toy
    grid = weight_grid(names=(0.5, 2.0), sections=(0.5, 1.0), factors=(1, 3))
    assert len(grid) == 8
    with beir_store(corpus) as st: rows = sweep(st, queries, qrels, grid)
    assert len(rows) == len(grid)
    assert [(r['name_weight'], r['section_weight'], r['candidate_factor']) for r in rows] == \
           [(g['bm25_weights'][0], g['bm25_weights'][2], g['candidate_factor']) for g in grid]
    for r in rows:
        assert r['queries'] == len(queries)
        assert all(0 <= r[m] <= 1 for m in ('ndcg@10', 'recall@10', 'recall@100', 'mrr@10'))
    assert best_setting(rows)['ndcg@10'] == max(r['ndcg@10'] for r in rows)


def test_name_weight_changes_the_ranking(toy):
    "The sweep really passes its settings to search: a huge title weight changes nDCG"
    corpus, queries, qrels = toy
    with beir_store(corpus) as st:
        rows = sweep(st, queries, qrels, weight_grid(names=(1.0, 50.0)), ks=(10,))
    assert rows[0]['ndcg@10'] != rows[1]['ndcg@10']


# ---- the access log and the simulation

def test_access_log_is_seeded_and_time_ordered(toy):
    _, queries, _ = toy
    log = access_log(queries, 40, seed=5, gap_s=30, refind_terms=2)
    assert log == access_log(queries, 40, seed=5, gap_s=30, refind_terms=2)
    assert log != access_log(queries, 40, seed=6, gap_s=30, refind_terms=2)
    assert log[0]['t'] == NOW0 and log[0]['kind'] == 'fresh'
    assert all(a['t'] < b['t'] for a, b in zip(log, log[1:]))
    fresh = [e['qid'] for e in log if e['kind'] == 'fresh']
    assert len(fresh) == len(set(fresh))
    asked = set()
    for e in log:
        if e['kind'] == 'refind': assert e['qid'] in asked and len(query_terms(e['text'])) <= 2
        asked.add(e['qid'])


def test_simulation_is_deterministic(toy):
    corpus, queries, qrels = toy
    opts = dict(n_events=40, seed=2, weights=(0, 2, 50), decays=(0.3, 0.8), refind_terms=3)
    with beir_store(corpus) as a, beir_store(corpus) as b:
        rows = simulate_refinding(a, queries, qrels, **opts)
        assert rows == simulate_refinding(b, queries, qrels, **opts)
    assert len(rows) == 40 * 3 * 2
    assert {(r['weight'], r['decay']) for r in rows} == {(w, d) for w in (0, 2, 50) for d in (0.3, 0.8)}
    assert all(0 <= r['mrr'] <= 1 for r in rows)


def test_weight_zero_is_plain_bm25_at_every_step(toy):
    corpus, queries, qrels = toy
    opts = dict(n_events=40, seed=3, refind_terms=3)
    with beir_store(corpus) as st, beir_store(corpus) as plain:
        rows = simulate_refinding(st, queries, qrels, weights=(0, 50), decays=(0.2, 0.5), **opts)
        log = access_log(queries, 40, seed=3, refind_terms=3)
        expected = [mrr(search_fn(plain)(e['text'], 10), qrels[e['qid']], 10) for e in log]
    for d in (0.2, 0.5):
        assert [r['mrr'] for r in rows if r['weight'] == 0 and r['decay'] == d] == expected
    assert [r['mrr'] for r in rows if r['weight'] == 50] != [r['mrr'] for r in rows if r['weight'] == 0]


def test_used_documents_get_activation(toy):
    corpus, queries, qrels = toy
    with beir_store(corpus) as st:
        assert st._sql('SELECT count(*) FROM access_history').fetchone()[0] == 0
        log = access_log(queries, 30, seed=4)
        simulate_refinding(st, queries, qrels, n_events=30, seed=4, weights=(0,))
        used = [r[0] for r in st._sql('SELECT DISTINCT chunk_id FROM access_history')]
        assert used
        acts = st.activations(used, now=log[-1]['t'] + 60)
        assert all(acts[c] > 0 for c in used)
        for c in used: assert any(st.get(c).metadata['doc_id'] in qrels[q] for q in qrels)
        # a re-found query whose document was used earlier: that document is active when it is re-asked
        seen = {}
        for e in log:
            if e['kind'] == 'refind' and e['qid'] in seen:
                chunk = seen[e['qid']]
                assert st.activations([chunk], now=e['t'], decay=0.5)[chunk] > 0
                break
            hits = st.search(e['text'], 10, activation_weight=0, now=e['t'])
            rel = next((h.chunk_id for h in hits if h.chunk.metadata['doc_id'] in qrels[e['qid']]), None)
            if rel: seen.setdefault(e['qid'], rel)
        else: pytest.fail('no re-found query with a used document in the log')


def test_mrr_table_groups_and_windows():
    rows = [dict(t=NOW0, weight=0, kind='fresh', mrr=1.0), dict(t=NOW0 + 10, weight=0, kind='fresh', mrr=0.0),
            dict(t=NOW0 + 100, weight=0, kind='refind', mrr=0.5), dict(t=NOW0 + 100, weight=2, kind='refind', mrr=1.0)]
    assert mrr_table(rows, by=('weight',)) == [{'weight': 0, 'mrr': 0.5, 'n': 3}, {'weight': 2, 'mrr': 1.0, 'n': 1}]
    tab = mrr_table(rows, by=('kind',), window_s=60)
    assert [(r['kind'], r['window'], r['n']) for r in tab] == [('fresh', 0, 2), ('refind', 1, 2)]


# ---- SciFact (skipped when ../shared/eval/scifact is absent)

@pytest.fixture(scope='module')
def scifact_sample():
    if not SCIFACT.is_dir(): pytest.skip('../shared/eval/scifact is absent')
    return beir_sample(*load_beir(SCIFACT, 'train'), n_queries=60, n_docs=500)


def test_scifact_activation_helps_refinding(scifact_sample):
    corpus, queries, qrels = scifact_sample
    with beir_store(corpus) as st:
        rows = simulate_refinding(st, queries, qrels, n_events=200, weights=(0, 20), decays=(0.5,), refind_terms=3)
    tab = {(r['weight'], r['kind']): r['mrr'] for r in mrr_table(rows, by=('weight', 'kind'))}
    assert tab[(20, 'refind')] > tab[(0, 'refind')]
    assert tab[(20, 'fresh')] <= tab[(0, 'fresh')] + 1e-9


# ---- where the evaluation data comes from (issue 14, item 25): MULTIS_EVAL_DIR or an argument, never a guess

def write_beir(d:Path, corpus:dict, queries:dict, qrels:dict):
    "`corpus, queries, qrels` as a BEIR folder, the same qrels for train and test"
    (d/'qrels').mkdir(parents=True)
    (d/'corpus.jsonl').write_text(''.join(json.dumps({'_id': k, **v}) + '\n' for k, v in corpus.items()))
    (d/'queries.jsonl').write_text(''.join(json.dumps({'_id': k, 'text': v}) + '\n' for k, v in queries.items()))
    rows = ''.join(f'{q}\t{doc}\t{g}\n' for q, ds in qrels.items() for doc, g in ds.items())
    for split in ('train', 'test'): (d/'qrels'/f'{split}.tsv').write_text('query-id\tcorpus-id\tscore\n' + rows)


def test_without_eval_dir_the_demo_says_so_and_shows_no_published_figure(monkeypatch, tmp_path):
    monkeypatch.delenv('MULTIS_EVAL_DIR', raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path.parent/'shared'/'eval'/'scifact').mkdir(parents=True, exist_ok=True)   # beside the "clone": not read
    data = load_eval('scifact')
    assert data.synthetic and data.label.startswith('SYNTHETIC DEMO') and 'MULTIS_EVAL_DIR' in data.label
    with beir_store(data.test[0]) as st: res = evaluate_fn(st, data.test)
    out = figures({'multis (defaults)': res}, data)
    assert out.splitlines()[0] == data.label
    assert '0.679' not in out and '0.663' not in out and 'Lucene' not in out


def test_eval_dir_from_env_or_argument_reads_the_real_set(monkeypatch, tmp_path, toy):
    write_beir(tmp_path/'eval'/'scifact', *toy)
    monkeypatch.setenv('MULTIS_EVAL_DIR', str(tmp_path/'eval'))
    data = load_eval('scifact')
    assert not data.synthetic and data.label == 'scifact from $MULTIS_EVAL_DIR/scifact'
    assert data.test[0].keys() == toy[0].keys() and data.train[1] == toy[1]
    with beir_store(data.test[0]) as st: res = evaluate_fn(st, data.test)
    out = figures({'multis (defaults)': res}, data).splitlines()
    assert out[0].startswith('multis (defaults)') and 'SYNTHETIC' not in '\n'.join(out)
    assert out[1:] == ['BM25 (BEIR, Lucene flat)   nDCG@10 0.679', 'multis for Node.js         nDCG@10 0.663']
    monkeypatch.delenv('MULTIS_EVAL_DIR')
    assert load_eval('scifact', tmp_path/'eval').label == f'scifact from {tmp_path/"eval"}/scifact'


def test_eval_dir_without_the_set_is_an_error_not_the_demo(monkeypatch, tmp_path):
    monkeypatch.setenv('MULTIS_EVAL_DIR', str(tmp_path))
    with pytest.raises(MultisError, match=r'scifact: no scifact set there \(MULTIS_EVAL_DIR'): load_eval('scifact')


def test_experiments_notebook_reads_only_the_env_var():
    "The notebook's code never names a folder beside the clone: its data is load_eval's"
    nb = json.loads((Path(__file__).resolve().parents[1]/'nbs'/'91_workbench.experiments.ipynb').read_text())
    code = '\n'.join(''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'code')
    assert 'shared/eval' not in code and 'SCIFACT' not in code
    assert "data = load_eval('scifact')" in code
    assert 'Lucene BM25 0.679' not in code and 'for k, v in PUBLISHED.items(): print' not in code  # only via `figures`


def evaluate_fn(store, split):
    from multis.retrieval.ranking import evaluate
    return evaluate(search_fn(store), split[1], split[2])
