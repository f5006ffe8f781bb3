"Tests of multis.retrieval.ranking against the installed package: ACT-R activation, reranking, metrics, BEIR loading"
import copy, itertools, json, math, pickle
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from multis.core import DocChunk, MultisError
from multis.retrieval.ranking import (DEFAULTS, HIT_JSON_FIELDS, Hit, activation, actr_scorer, blend, bm25_only, evaluate,
                            load_beir, mrr, ndcg_at_k, recall_at_k, rerank)

NOW = 1_700_000_000.0
DAY = 86400
SCIFACT = Path(__file__).resolve().parents[1].parent/'shared'/'eval'/'scifact'


# ---- activation

def test_activation_without_history_is_zero():
    assert activation([], NOW) == 0.0
    assert activation(iter(()), NOW, decay=0.8) == 0.0

def test_activation_formula():
    times = [NOW - 10, NOW - 3600, NOW - DAY]
    assert activation(times, NOW) == pytest.approx(math.log(1 + 10**-0.5 + 3600**-0.5 + DAY**-0.5))
    assert activation(times, NOW, decay=0.3) == pytest.approx(math.log(1 + 10**-0.3 + 3600**-0.3 + DAY**-0.3))
    assert activation([NOW - 1], NOW) == pytest.approx(math.log(2))

def test_activation_increases_with_accesses():
    acts = [activation([NOW - 60*(i + 1) for i in range(n)], NOW) for n in range(12)]
    assert all(a < b for a, b in zip(acts, acts[1:]))
    assert acts[1] > 0

def test_activation_decreases_with_age():
    acts = [activation([NOW - age], NOW) for age in (1, 10, 60, 3600, DAY, 30*DAY, 365*DAY)]
    assert all(a > b > 0 for a, b in zip(acts, acts[1:]))

def test_larger_decay_forgets_faster():
    times = [NOW - DAY, NOW - 2*DAY]
    assert activation(times, NOW, decay=0.3) > activation(times, NOW, decay=0.5) > activation(times, NOW, decay=0.8)

def test_only_the_last_50_accesses_count():
    recent = [NOW - 60*(i + 1) for i in range(50)]
    old = [NOW - 30*DAY - i for i in range(200)]
    expected = activation(recent, NOW)
    assert activation(old + recent, NOW) == pytest.approx(expected)
    assert activation(recent[::-1] + old, NOW) == pytest.approx(expected)  # order does not matter
    assert activation(old + recent, NOW, max_accesses=60) > expected
    assert activation(recent, NOW, max_accesses=1) == pytest.approx(math.log1p(60**-0.5))
    assert DEFAULTS['max_accesses'] == 50

def test_future_accesses_count_as_one_second():
    assert activation([NOW + 3600], NOW) == pytest.approx(math.log(2))
    assert activation([NOW], NOW) == pytest.approx(math.log(2))
    assert activation([NOW + 5, NOW - 1], NOW) == pytest.approx(math.log(3))

def test_activation_accepts_datetimes():
    now = datetime.fromtimestamp(NOW, timezone.utc)
    expected = activation([NOW - 3600, NOW - 60], NOW)
    assert activation([now - timedelta(hours=1), now - timedelta(minutes=1)], now) == pytest.approx(expected)
    assert activation([NOW - 3600, now - timedelta(minutes=1)], NOW) == pytest.approx(expected)
    naive = datetime(2024, 5, 1, 12, 0, 0)
    assert activation([naive - timedelta(hours=1)], naive) == pytest.approx(math.log1p(3600**-0.5))

@pytest.mark.parametrize('decay', [0, -0.5, float('nan'), float('inf'), '0.5', None])
def test_bad_decay_raises(decay):
    with pytest.raises(ValueError, match='decay must be a positive number'): activation([NOW], NOW, decay=decay)

def test_bad_inputs_raise():
    with pytest.raises(ValueError, match='max_accesses must be at least 1'): activation([NOW], NOW, max_accesses=0)
    with pytest.raises(TypeError, match='unix seconds or datetimes'): activation(['2024-01-01'], NOW)
    with pytest.raises(ValueError, match='not a finite number'): activation([float('inf')], NOW)
    with pytest.raises(ValueError, match='not a finite number'): activation([NOW], float('nan'))

finite = st.floats(min_value=-1e15, max_value=1e15, allow_nan=False)

@settings(max_examples=300, deadline=None)
@given(times=st.lists(st.one_of(finite, st.floats(allow_nan=False, allow_infinity=False)), max_size=120),
       now=st.floats(allow_nan=False, allow_infinity=False), decay=st.floats(min_value=0.01, max_value=5))
def test_activation_nonnegative_finite_bounded(times, now, decay):
    a = activation(times, now, decay=decay)
    assert math.isfinite(a) and 0 <= a <= math.log(51) + 1e-12
    if not times: assert a == 0.0

@settings(max_examples=100, deadline=None)
@given(times=st.lists(st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1),
                                   timezones=st.just(timezone.utc)), max_size=60))
def test_activation_datetimes_nonnegative_finite(times):
    a = activation(times, datetime(2030, 1, 1, tzinfo=timezone.utc))
    assert math.isfinite(a) and a >= 0 and (a > 0) == bool(times)


# ---- blending, hits, reranking

def _hit(name, bm25, act=0.0, cid=None, **kw):
    return Hit(DocChunk('/docs/g.md', name, f'text of {name}', chunk_id=cid or '', **kw), bm25=bm25, activation=act)

def test_blend_and_defaults():
    assert blend(5.0, 0.0) == 5.0
    assert blend(5.0, 0.5) == pytest.approx(6.0)
    assert blend(5.0, 0.5, 3.0) == pytest.approx(6.5)
    assert DEFAULTS['activation_weight'] == 2.0 and DEFAULTS['decay'] == 0.5 and DEFAULTS['candidate_factor'] == 3
    assert len(DEFAULTS['bm25_weights']) == 3

def test_scorers():
    h = _hit('a', 4.0, 0.5)
    assert actr_scorer()(h) == pytest.approx(5.0)
    assert actr_scorer(0.0)(h) == pytest.approx(4.0)
    assert bm25_only(h) == 4.0

def test_hit_passthrough_and_json():
    h = _hit('Install', 3.5, 0.25, section_path=['Guide', 'Install'], page_start=2, page_end=3, scope='admin')
    assert h.name == 'Install' and h.section_path == ['Guide', 'Install'] and h.scope == 'admin'
    assert h['bm25'] == 3.5 and h['chunk_id'] == h.chunk.chunk_id
    with pytest.raises(AttributeError): getattr(h, 'no_such_field')
    with pytest.raises(KeyError): h['no_such_field']
    d = rerank([h])[0].to_json()
    assert tuple(d) == HIT_JSON_FIELDS
    assert set(d) == {'chunk_id', 'name', 'file_path', 'section_path', 'page_start', 'page_end', 'scope',
                      'element_type', 'score', 'bm25', 'activation', 'vector', 'hybrid', 'chunk_index',
                      'chunk_total', 'token_count', 'document_type', 'content'}
    assert d['vector'] is None and d['hybrid'] is None and d['chunk_total'] == 1
    assert d['score'] == pytest.approx(4.0) and d['page_end'] == 3 and d['content'] == 'text of Install'
    assert json.loads(json.dumps(d)) == d

def test_hit_copies_and_pickles():
    h = _hit('a', 1.0, 0.1)
    assert copy.deepcopy(h) == h
    assert pickle.loads(pickle.dumps(h)) == h
    assert '**#0**' in h._repr_markdown_()

def test_rerank_orders_by_blend():
    hits = [_hit('a', 9.0), _hit('b', 8.0, 1.0), _hit('c', 8.5, 0.1), _hit('d', 1.0)]
    res = rerank(hits, limit=3)
    assert [h.name for h in res] == ['b', 'a', 'c']
    assert [h.rank for h in res] == [1, 2, 3]
    assert [h.score for h in res] == pytest.approx([10.0, 9.0, 8.7])
    assert [h.name for h in rerank(hits, bm25_only)] == ['a', 'c', 'b', 'd']
    assert [h.name for h in rerank(hits, actr_scorer(0.5))] == ['a', 'c', 'b', 'd']
    assert [h.score for h in hits] == [0.0]*4 and [h.rank for h in hits] == [0]*4  # input untouched

def test_rerank_without_history_is_bm25_order():
    hits = [_hit(n, b) for n, b in zip('pqrstu', (3.0, 7.5, 1.2, 7.4, 9.9, 0.5))]
    assert [h.name for h in rerank(hits)] == [h.name for h in rerank(hits, bm25_only)] == list('tqspru')

def test_rerank_ties():
    hits = [_hit('x', 3.0, 1.0, cid='doc:c'), _hit('y', 5.0, 0.0, cid='doc:z'), _hit('z', 3.0, 1.0, cid='doc:a')]
    assert [h.chunk_id for h in rerank(hits)] == ['doc:z', 'doc:a', 'doc:c']  # all score 5.0
    same = [_hit('s', 2.0, cid=f'doc:{i}') for i in (3, 1, 2)]
    assert [h.chunk_id for h in rerank(same)] == ['doc:1', 'doc:2', 'doc:3']

def test_rerank_custom_scorer_and_limits():
    hits = [_hit('a', 9.0), _hit('b', 2.0, 0.3, element_type='memory_summary'), _hit('c', 5.0, 0.2)]
    assert [h.name for h in rerank(hits, lambda h: h.activation)] == ['b', 'c', 'a']
    assert rerank(hits, lambda h: h['element_type'] == 'memory_summary')[0].name == 'b'
    assert rerank(hits, limit=0) == [] and len(rerank(hits, limit=10)) == 3 and rerank([]) == []
    with pytest.raises(ValueError, match='limit must be >= 0'): rerank(hits, limit=-1)
    with pytest.raises(ValueError, match='returned'): rerank(hits, lambda h: float('nan'))
    with pytest.raises(ValueError, match='returned'): rerank(hits, lambda h: 'high')


# ---- metrics

REL = {'a': 2, 'b': 1, 'z': 0}

def test_metrics_by_hand():
    idcg = 2 + 1/math.log2(3)
    assert ndcg_at_k(['x', 'a', 'y', 'b'], REL) == pytest.approx((2/math.log2(3) + 1/math.log2(5)) / idcg)
    assert ndcg_at_k(['b', 'a'], REL) == pytest.approx((1 + 2/math.log2(3)) / idcg)
    assert ndcg_at_k(['a', 'b'], REL) == pytest.approx(1.0)
    assert ndcg_at_k(['z', 'x'], REL) == 0.0
    assert ndcg_at_k(['x', 'b'], {'a': 1, 'b': 1, 'c': 1}, k=2) == pytest.approx((1/math.log2(3)) / (1 + 1/math.log2(3)))
    assert recall_at_k(['x', 'a', 'y', 'b'], REL, 2) == 0.5
    assert recall_at_k(['x', 'a', 'y', 'b'], REL, 4) == 1.0
    assert mrr(['x', 'z', 'b', 'a'], REL) == pytest.approx(1/3)
    assert mrr(['x', 'z', 'b', 'a'], REL, k=2) == 0.0

def test_duplicates_count_once():
    assert ndcg_at_k(['a', 'a', 'b'], REL, k=2) == pytest.approx(1.0)
    assert recall_at_k(['x', 'x', 'a'], REL, 2) == 0.5
    assert mrr(['x', 'x', 'x', 'a'], REL) == 0.5

def test_no_relevant_documents_gives_none():
    for rel in ({}, {'a': 0}, {'a': 0, 'b': -1}):
        assert ndcg_at_k(['a'], rel) is None and recall_at_k(['a'], rel) is None and mrr(['a'], rel) is None

def test_bad_k():
    for f in (ndcg_at_k, recall_at_k, mrr):
        with pytest.raises(ValueError, match='k must be at least 1'): f(['a'], REL, 0)

def _ref_dcg(ids, rel):
    return sum(max(rel.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(ids))

def _ref_metrics(ranking, rel, k):
    "Brute force: dedupe by hand, ideal DCG as the best over every ordering of the judged documents"
    seen, ranked = set(), []
    for d in ranking:
        if d not in seen: seen.add(d); ranked.append(d)
    top = ranked[:k]
    wanted = [d for d, r in rel.items() if r > 0]
    if not wanted: return None
    idcg = max(_ref_dcg(p[:k], rel) for p in itertools.permutations(rel))
    first = [i for i, d in enumerate(top, 1) if rel.get(d, 0) > 0]
    return _ref_dcg(top, rel) / idcg, sum(d in top for d in wanted) / len(wanted), (1/first[0] if first else 0.0)

ids = st.sampled_from(list('abcdefgh'))

@settings(max_examples=300, deadline=None)
@given(ranking=st.lists(ids, max_size=12), rel=st.dictionaries(ids, st.integers(0, 3), max_size=6),
       k=st.integers(1, 8))
def test_metrics_match_brute_force(ranking, rel, k):
    ref = _ref_metrics(ranking, rel, k)
    got = ndcg_at_k(ranking, rel, k), recall_at_k(ranking, rel, k), mrr(ranking, rel, k)
    if ref is None: assert got == (None, None, None)
    else:
        assert got == pytest.approx(ref)
        assert 0 <= got[0] <= 1 + 1e-12


# ---- BEIR loading

def _beir(folder, corpus=None, queries=None, splits=None):
    (folder/'qrels').mkdir(parents=True)
    corpus = corpus if corpus is not None else [{'_id': 'd1', 'title': 'T1', 'text': 'one'}, {'_id': 'd2', 'text': 'two'}]
    queries = queries if queries is not None else [{'_id': 'q1', 'text': 'first'}, {'_id': 'q2', 'text': 'second'},
                                                   {'_id': 'q3', 'text': 'unjudged'}]
    (folder/'corpus.jsonl').write_text(''.join(json.dumps(o) + '\n' for o in corpus))
    (folder/'queries.jsonl').write_text(''.join(json.dumps(o) + '\n' for o in queries))
    splits = splits if splits is not None else {'test': 'q1\td1\t1\nq2\td2\t2\nq2\td1\t0\n', 'train': 'q3\td1\t1\n'}
    for name, body in splits.items(): (folder/'qrels'/f'{name}.tsv').write_text('query-id\tcorpus-id\tscore\n' + body)
    return folder

def test_load_beir(tmp_path):
    corpus, queries, qrels = load_beir(_beir(tmp_path/'set'))
    assert corpus == {'d1': {'title': 'T1', 'text': 'one'}, 'd2': {'title': '', 'text': 'two'}}
    assert queries == {'q1': 'first', 'q2': 'second'}
    assert qrels == {'q1': {'d1': 1}, 'q2': {'d2': 2, 'd1': 0}}
    assert load_beir(str(tmp_path/'set'), 'train')[1] == {'q3': 'unjudged'}

def test_load_beir_missing_folder(tmp_path):
    with pytest.raises(MultisError, match='BEIR folder not found'): load_beir(tmp_path/'nope')

@pytest.mark.parametrize('name', ['corpus.jsonl', 'queries.jsonl'])
def test_load_beir_missing_file(tmp_path, name):
    (_beir(tmp_path/'set')/name).unlink()
    with pytest.raises(MultisError, match=f'no {name} in BEIR folder'): load_beir(tmp_path/'set')

def test_load_beir_missing_split(tmp_path):
    _beir(tmp_path/'set')
    with pytest.raises(MultisError, match=r'no qrels/dev\.tsv in .*; available splits: test, train'):
        load_beir(tmp_path/'set', 'dev')
    for p in (tmp_path/'set'/'qrels').iterdir(): p.unlink()
    (tmp_path/'set'/'qrels').rmdir()
    with pytest.raises(MultisError, match='available splits: none'): load_beir(tmp_path/'set')

def test_load_beir_malformed_json_line(tmp_path):
    folder = _beir(tmp_path/'set')
    with open(folder/'corpus.jsonl', 'a') as f: f.write('\n{"_id": "d3", "text": }\n')
    with pytest.raises(MultisError, match='corpus.jsonl line 4: not valid JSON'): load_beir(folder)

def test_load_beir_bad_objects(tmp_path):
    _beir(tmp_path/'a', corpus=[{'_id': 'd1', 'text': 'x'}, ['not', 'an', 'object']])
    with pytest.raises(MultisError, match='corpus.jsonl line 2: expected an object with an _id'): load_beir(tmp_path/'a')
    _beir(tmp_path/'b', queries=[{'_id': 'q1', 'text': 'x'}, {'text': 'no id'}])
    with pytest.raises(MultisError, match='queries.jsonl line 2: expected an object with an _id'): load_beir(tmp_path/'b')
    _beir(tmp_path/'c', queries=[{'_id': 'q1'}])
    with pytest.raises(MultisError, match='queries.jsonl line 1: query q1 has no text'): load_beir(tmp_path/'c')
    folder = _beir(tmp_path/'d')
    (folder/'queries.jsonl').write_bytes(b'{"_id": "q1", "text": "caf\xe9"}\n')
    with pytest.raises(MultisError, match='queries.jsonl line 1: not valid JSON'): load_beir(folder)

@pytest.mark.parametrize('body,msg', [('q1\td1\n', r'qrels/test\.tsv line 2: expected 3 columns'),
                                      ('q1\td1\t1\nq2\td2\tyes\n', r"qrels/test\.tsv line 3: score 'yes' is not an integer"),
                                      ('q9\td1\t1\n', r'qrels/test\.tsv judges 1 queries not in queries\.jsonl \(first: q9\)')])
def test_load_beir_bad_qrels(tmp_path, body, msg):
    _beir(tmp_path/'set', splits={'test': body})
    with pytest.raises(MultisError, match=msg): load_beir(tmp_path/'set')

def test_load_beir_qrels_not_utf8(tmp_path):
    folder = _beir(tmp_path/'set')
    (folder/'qrels'/'test.tsv').write_bytes(b'q1\td\xff\t1\n')
    with pytest.raises(MultisError, match=r'qrels/test\.tsv: not UTF-8 text'): load_beir(folder)


# ---- evaluate

def test_evaluate(tmp_path):
    queries = {'q1': 'one', 'q2': 'two', 'q3': 'three', 'q4': 'not judged'}
    qrels = {'q1': {'d1': 1}, 'q2': {'d2': 1, 'd9': 1}, 'q3': {'d3': 0}}
    runs = {'one': ['d1', 'x'], 'two': ['x', 'd2'] + [f'y{i}' for i in range(20)] + ['d9'], 'three': ['d3']}
    calls = []
    def search(text, k): calls.append(k); return runs[text]
    res = evaluate(search, queries, qrels, ks=(10, 100), per_query=True, progress=True)
    assert res['queries'] == 2 and set(calls) == {100} and len(calls) == 3
    assert res['ndcg@10'] == pytest.approx((1 + (1/math.log2(3)) / (1 + 1/math.log2(3))) / 2)
    assert res['recall@10'] == pytest.approx((1 + 0.5) / 2)
    assert res['recall@100'] == pytest.approx(1.0)
    assert res['mrr@10'] == pytest.approx((1 + 0.5) / 2)
    assert sorted(res['per_query']) == ['q1', 'q2'] and res['per_query']['q2']['recall@10'] == 0.5
    plain = evaluate(search, queries, qrels)
    assert 'per_query' not in plain and set(plain) == {'ndcg@10', 'recall@10', 'recall@100', 'mrr@10', 'queries'}
    with pytest.raises(MultisError, match='no query to evaluate'): evaluate(search, queries, {'q3': {'d3': 0}})
    with pytest.raises(ValueError, match='ks must be positive'): evaluate(search, queries, qrels, ks=(0,))


# ---- SciFact (the shared evaluation set, when present beside the repository)

@pytest.fixture
def scifact():
    if not SCIFACT.exists(): pytest.skip('shared/eval/scifact not found beside the repository')
    return SCIFACT

def test_scifact_test_split(scifact):
    corpus, queries, qrels = load_beir(scifact)
    assert len(corpus) == 5183 and len(queries) == 300 and set(queries) == set(qrels)
    assert sum(map(len, qrels.values())) == 339
    assert all(d in corpus for rel in qrels.values() for d in rel)
    assert all(set(doc) == {'title', 'text'} for doc in corpus.values())

def test_scifact_train_split(scifact):
    _, queries, qrels = load_beir(scifact, 'train')
    assert len(queries) == 809 and sum(map(len, qrels.values())) == 919
