"Search options beyond the defaults: hybrid fusion (linear blend or reciprocal rank fusion) and pseudo-relevance feedback; their settings and bad values"
import json
import pytest
from multis.config import ConfigError, DEFAULT_CONFIG, FUSIONS, deep_merge, load_config
from multis.core import DocChunk, MultisError
from multis.answer.ask import search_options
from multis.retrieval.embed import HashEmbedder
from multis.retrieval.ranking import DEFAULTS, Hit
from multis.retrieval.search import _blend_hybrid
from multis.retrieval.store import Store
from multis.retrieval.vectors import embed_pending

def hits(bm25:list, vector:list)->list:
    return [Hit(DocChunk(f'/n/{i}.md', str(i), 'x'), bm25=b, vector=v) for i, (b, v) in enumerate(zip(bm25, vector))]

def order(hs:list)->list: return [h.name for h in sorted(hs, key=lambda h: -h.hybrid)]

def test_rrf_sees_ranks_not_scores():
    "Stretching one channel's scores moves the linear blend's order, never reciprocal rank fusion's"
    flat, steep = hits([3.0, 2.9, 2.8], [0.1, 0.5, 0.9]), hits([30.0, 2.9, 0.1], [0.1, 0.5, 0.9])
    assert order(_blend_hybrid(flat, 0.5)) != order(_blend_hybrid(steep, 0.5))
    a, b = _blend_hybrid(hits([3.0, 2.9, 2.8], [0.1, 0.5, 0.9]), 0.5, fusion='rrf'), _blend_hybrid(hits([30.0, 2.9, 0.1], [0.1, 0.5, 0.9]), 0.5, fusion='rrf')
    assert [h.hybrid for h in a] == [h.hybrid for h in b]
    assert all(0 <= h.hybrid <= 1 for h in a) and max(h.hybrid for h in a) < 1   # no hit first in both channels

def test_zscore_ignores_shifts_and_scales():
    "z-scores put both channels on one footing: shifting or stretching a channel's scores changes nothing"
    a = _blend_hybrid(hits([3.0, 2.0, 1.0, 0.5], [0.1, 0.5, 0.9, 0.3]), 0.5, fusion='zscore')
    b = _blend_hybrid(hits([13.0, 12.0, 11.0, 10.5], [0.2, 1.0, 1.8, 0.6]), 0.5, fusion='zscore')
    assert [h.hybrid for h in a] == pytest.approx([h.hybrid for h in b])
    assert max(h.hybrid for h in a) == 1.0 and min(h.hybrid for h in a) == 0.0
    assert [h.hybrid for h in _blend_hybrid(hits([13.0, 12.0, 11.0, 10.5], [0.1, 0.5, 0.9, 0.3]), 0.5)] != pytest.approx(
        [h.hybrid for h in _blend_hybrid(hits([3.0, 2.0, 1.0, 0.5], [0.1, 0.5, 0.9, 0.3]), 0.5)])   # the linear blend moves
    one = _blend_hybrid(hits([2.0], [0.5]), 0.7, fusion='zscore')
    assert one[0].hybrid == 1.0 and one[0].scale == 2.0

def test_rrf_weight_and_k():
    "w = 0 is BM25's order, 1 the vectors'; a larger k narrows the gap between ranks; no keyword match counts 0"
    hs = lambda: hits([5.0, 4.0, 3.0, 0.0], [0.2, 0.4, 0.6, 0.8])
    assert order(_blend_hybrid(hs(), 0.0, fusion='rrf')) == ['0', '1', '2', '3']
    assert order(_blend_hybrid(hs(), 1.0, fusion='rrf')) == ['3', '2', '1', '0']
    gap = lambda k: (lambda h: h[0].hybrid - h[1].hybrid)(_blend_hybrid(hs(), 0.0, fusion='rrf', rrf_k=k))
    assert gap(0) == pytest.approx(0.5) and gap(60) == pytest.approx(1 - 61 / 62) and gap(1000) < gap(60)
    assert _blend_hybrid(hs(), 0.0, fusion='rrf')[3].hybrid == 0.0

@pytest.fixture
def store():
    with Store(':memory:') as st:
        st.save([DocChunk(f'/n/{i}.md', f'Note {i}', t) for i, t in enumerate(
            ['water the tomatoes', 'tomatoes need sun', 'bread rises slowly', 'passport renewal in May', 'garden water hose'])])
        assert embed_pending(st, HashEmbedder(64)) == 5
        yield st

def test_rrf_search_with_an_embedder(store):
    e = HashEmbedder(64)
    lin, rrf = store.search('water tomatoes', embedder=e), store.search('water tomatoes', embedder=e, fusion='rrf', rrf_k=10)
    assert {h.chunk_id for h in lin} == {h.chunk_id for h in rrf}   # the same candidates, joined differently
    assert all(h.vector is not None and 0 <= h.hybrid <= 1 for h in rrf)
    assert rrf[0].score == pytest.approx(rrf[0].hybrid * rrf[0].scale)   # back in BM25 units, as the linear blend
    kw = [h.chunk_id for h in store.search('water tomatoes', embedder=False) ]
    assert [h.chunk_id for h in store.search('water tomatoes', embedder=e, fusion='rrf', vector_weight=0.0)][:len(kw)] == kw

@pytest.mark.parametrize('bad,msg', [(dict(fusion='borda'), "unknown fusion 'borda': use linear or zscore or rrf"),
                                     (dict(fusion=None), 'unknown fusion None'), (dict(rrf_k=-1), 'rrf_k must be a number from 0 up, got -1'),
                                     (dict(rrf_k='60'), "got '60'"), (dict(rrf_k=True), 'got True'), (dict(rrf_k=float('inf')), 'got inf')])
@pytest.mark.parametrize('embedder', [False, HashEmbedder(64)], ids=['keyword', 'hybrid'])
def test_bad_fusion_refused(store, bad, msg, embedder):
    with pytest.raises(MultisError, match=msg.replace('(', r'\(')): store.search('water', embedder=embedder, **bad)

def test_hybrid_candidates_checks_too(store):
    e = HashEmbedder(64)
    kw = store.candidates('water')
    with pytest.raises(MultisError, match="unknown fusion 'RRF'"):
        store.hybrid_candidates('water', kw, 10, None, e, 0.7, DEFAULTS['bm25_weights'], 0.5, 0.0, fusion='RRF')

def test_config_fusion(tmp_path):
    p = tmp_path/'config.json'
    assert load_config(p, env=False)['search']['fusion'] == 'linear' == DEFAULTS['fusion'] and FUSIONS == ('linear', 'zscore', 'rrf')
    assert load_config(p, env=False)['search']['rrf_k'] == DEFAULTS['rrf_k'] == 60
    for cfg, msg in [({'fusion': 'borda'}, "search.fusion must be 'linear' or 'zscore' or 'rrf', got 'borda'"),
                     ({'rrf_k': -3}, 'search.rrf_k must be a number from 0 up, got -3'), ({'rrf_k': 'ten'}, "search.rrf_k must be a number, got 'ten'"),
                     ({'fusion': 2}, 'search.fusion must be str, got 2')]:
        p.write_text(json.dumps({'search': cfg}))
        with pytest.raises(ConfigError, match=msg): load_config(p, env=False)
    p.write_text(json.dumps({'search': {'fusion': 'rrf', 'rrf_k': 20}}))
    opts = search_options(load_config(p, env=False))
    assert (opts['fusion'], opts['rrf_k']) == ('rrf', 20)

def test_config_fusion_reaches_the_search(store):
    opts = search_options(deep_merge(DEFAULT_CONFIG, {'search': {'fusion': 'rrf', 'rrf_k': 0}}))
    e = HashEmbedder(64)
    got = store.search('water tomatoes', embedder=e, **opts)
    want = store.search('water tomatoes', embedder=e, fusion='rrf', rrf_k=0)
    assert [(h.chunk_id, h.hybrid) for h in got] == [(h.chunk_id, h.hybrid) for h in want]
    assert {h.hybrid for h in got} != {h.hybrid for h in store.search('water tomatoes', embedder=e)}

# ---- pseudo-relevance feedback

@pytest.fixture
def hearts():
    with Store(':memory:') as st:
        st.save([DocChunk('/n/h.md', f'Heart {i}', 'the heart is a cardiac muscle that pumps blood', scope='kb') for i in range(3)]
                + [DocChunk('/n/c.md', 'Cardiac', 'blood pumps through cardiac muscle cells', scope='kb'),
                   DocChunk('/n/p.md', 'Private', 'blood pumps through cardiac muscle cells', scope='user:9')]
                + [DocChunk(f'/n/o{i}.md', f'Other {i}', t, scope='kb') for i, t in
                   enumerate(['bread dough rises', 'paint the fence', 'file the taxes', 'tune the piano', 'walk the dog', 'oil the bike'])])
        yield st

def test_feedback_finds_what_the_query_words_miss(hearts):
    plain = [h.name for h in hearts.search('heart', scopes=['kb'])]
    fb = [h.name for h in hearts.search('heart', scopes=['kb'], prf_docs=3, prf_terms=3, prf_weight=0.5)]
    assert 'Cardiac' not in plain and fb[:3] == plain and fb[3] == 'Cardiac'
    assert 'Private' not in [h.name for h in hearts.search('heart', scopes=['kb', 'user:1'], prf_docs=3, prf_weight=1.0)]
    assert 'Private' in [h.name for h in hearts.search('heart', scopes=['kb', 'user:9'], prf_docs=3, prf_weight=1.0)]

def test_feedback_off_changes_nothing(hearts):
    base = [(h.chunk_id, h.bm25) for h in hearts.search('heart blood')]
    for off in (dict(prf_docs=0, prf_weight=1.0), dict(prf_docs=5, prf_weight=0.0)):
        assert [(h.chunk_id, h.bm25) for h in hearts.search('heart blood', **off)] == base
    assert hearts.search('zzz', prf_docs=5) == [] and hearts.search('?!', prf_docs=5) == []

def test_feedback_words(hearts):
    rows = hearts._bm25_top(['heart'], 10, None, DEFAULTS['bm25_weights'])
    words = hearts.expansion_terms(rows, ['heart'], 3, 10)
    assert words and 'heart' not in words and 'hearts' not in words and 'the' not in words and 'is' not in words
    assert hearts.expansion_terms(rows, ['pumping', 'heart'], 3, 10) == [w for w in words if w != 'pumps']  # same stem: not added
    assert len(hearts.expansion_terms(rows, ['heart'], 3, 2)) == 2

def test_feedback_with_hybrid(hearts):
    assert embed_pending(hearts, HashEmbedder(64)) == 11
    hs = hearts.search('heart', embedder=HashEmbedder(64), prf_docs=3, prf_weight=0.5, fusion='rrf', limit=20)
    assert 'Cardiac' in [h.name for h in hs] and all(h.hybrid is not None for h in hs)

@pytest.mark.parametrize('bad,msg', [(dict(prf_docs=-1), 'prf_docs must be a whole number from 0 .off. to 100, got -1'),
                                     (dict(prf_docs=101), 'got 101'), (dict(prf_docs=True), 'got True'), (dict(prf_terms=0), 'prf_terms must be'),
                                     (dict(prf_weight=-0.1), 'prf_weight must be a number from 0 to 1'), (dict(prf_weight='x'), "got 'x'")])
def test_bad_feedback_refused(hearts, bad, msg):
    with pytest.raises(MultisError, match=msg): hearts.search('heart', **bad)

def test_config_feedback(tmp_path):
    p = tmp_path/'config.json'
    assert {k: load_config(p, env=False)['search'][k] for k in ('prf_docs', 'prf_terms', 'prf_weight')} == {
        k: DEFAULTS[k] for k in ('prf_docs', 'prf_terms', 'prf_weight')} and DEFAULTS['prf_docs'] == 0
    p.write_text(json.dumps({'search': {'prf_docs': -2}}))
    with pytest.raises(ConfigError, match='search.prf_docs must be a whole number from 0 to 100, got -2'): load_config(p, env=False)
    p.write_text(json.dumps({'search': {'prf_docs': 5, 'prf_weight': 0.3}}))
    assert {k: v for k, v in search_options(load_config(p, env=False)).items() if k.startswith('prf')} == dict(prf_docs=5, prf_terms=10, prf_weight=0.3)
