"The search explorer: its plain functions, and its callbacks driven by setting widget values"
from pathlib import Path
import pytest
pytest.importorskip('ipywidgets'); pytest.importorskip('pandas')
from multis.core import DocChunk
from multis.retrieval.ranking import Hit, rerank, actr_scorer
from multis.retrieval.store import Store
from multis.workbench.explorer import (Explorer, hits_table, highlight, update_kind, with_activations, with_vector_weight,
                             scope_choice, TABLE_COLUMNS, HYBRID_COLUMNS)
from multis.retrieval.embed import HashEmbedder
from multis.retrieval.vectors import attach_embedder

DATA = Path(__file__).resolve().parents[1]/'data'
NOW = 1_000_000.0

class CountingEmbedder(HashEmbedder):
    "A hash embedder counting the queries it embeds"
    queries = 0
    def embed_query(self, text): self.queries += 1; return super().embed_query(text)

@pytest.fixture
def store():
    docs = [DocChunk('/n/garden.md', 'Tomatoes', 'Water tomatoes deeply twice a week; tomatoes like sun.', section_path=['Garden', 'Tomatoes']),
            DocChunk('/n/garden.md', 'Watering', 'Water the garden early in the morning.', section_path=['Garden', 'Watering']),
            DocChunk('/n/trip.md', 'Packing', 'Pack water bottles and a rain jacket.', scope='admin'),
            DocChunk('/n/chat.md', 'Note', 'Water the tomatoes before the trip.', scope='user:42')]
    other = ['Bread needs a long, slow rise.', 'Back up the laptop every Sunday.', 'The car is due for service in May.',
             'Renew the passport before it expires.', 'Pay the electricity bill online.', 'Call the dentist.']
    with Store(':memory:') as st:
        st.save(docs + [DocChunk('/n/misc.md', f'Note {i}', t) for i, t in enumerate(other)])
        yield st

def test_highlight_escapes_before_marking():
    out = highlight('<img src=x onerror=alert(1)> water & watering', ['water', 'amp', 'img'])
    assert '<img' not in out and out.count('<mark>') == 3
    assert '&amp;' in out and '&<mark>amp' not in out

def test_hits_table_columns_and_values():
    c = DocChunk('/n/a.pdf', 'A', 'alpha', page_start=2, page_end=5, section_path=['X', 'A'], scope='admin')
    df = hits_table(rerank([Hit(c, 3.0, 0.5)], actr_scorer(2.0)))
    assert list(df.columns) == TABLE_COLUMNS
    assert df.iloc[0].tolist() == [1, 'A', 'X › A', '2-5', 'admin', 3.0, 0.5, 4.0]

def test_update_rule_and_helpers():
    assert update_kind('bm25_section') == 'fetch' and update_kind('decay') == 'activations'
    assert update_kind('activation_weight') == 'rerank'
    c = DocChunk('/n/a.md', 'A', 'alpha')
    assert with_activations([Hit(c, 1.0, 0.3)], {}) [0].activation == 0.0
    assert scope_choice(('all',)) is None and scope_choice(('kb',)) == ['kb']

def test_sliders_refetch_only_when_candidates_change(store):
    ex = Explorer(store, now=NOW)
    ex.query.value = 'water tomatoes'
    assert ex.fetches == 1 and ex.hits and ex.table['rank'].tolist() == list(range(1, len(ex.hits)+1))
    ex.activation_weight.value = 3.0
    ex.decay.value = 0.8
    assert (ex.fetches, ex.activation_queries) == (1, 1)
    for w, v in ((ex.bm25_name, 2.0), (ex.bm25_content, 0.5), (ex.bm25_section, 1.0), (ex.candidate_factor, 6)):
        w.value = v
    assert ex.fetches == 5
    ex.scopes.value = ('kb',)
    assert ex.fetches == 6 and set(ex.table['scope']) == {'kb'}

def test_use_records_an_access_and_reranks(store):
    ex = Explorer(store, now=NOW)
    ex.activation_weight.value = 5.0
    ex.query.value = 'water the tomatoes'
    assert ex.hits[0].name == 'Tomatoes'
    watering = next(h.chunk_id for h in ex.hits if h.name == 'Watering')
    ex.pick.value = watering
    assert 'Watering' in ex.excerpt.value and '<mark>Water</mark>' in ex.excerpt.value
    ex.use.click()
    assert ex.hits[0].chunk_id == watering and ex.fetches == 1
    assert store.activations([watering], now=NOW)[watering] == pytest.approx(ex.hits[0].activation)
    assert 'Watering' in ex.results.value.split('</tr>')[1]     # first body row of the HTML table

def test_scopes_preselected_and_empty_query(store):
    ex = Explorer(store, scopes=['user:42'], now=NOW)
    ex.query.value = 'water'
    assert {h.scope for h in ex.hits} == {'user:42'}
    ex.query.value = 'the and of'
    assert ex.hits == [] and ex.results.value == '<i>no hits</i>'

def test_explorer_on_sample_data():
    from multis.documents.indexer import index_directory
    with Store(':memory:') as st:
        index_directory(st, DATA, progress=False)
        ex = Explorer(st)
        ex.query.value = 'water'
        assert ex.hits and ex.status.value.startswith(f"{len(ex.hits)} of ")
        assert 'application/vnd.jupyter.widget-view+json' in ex._repr_mimebundle_()

@pytest.fixture
def hybrid_store(store):
    "The store with hash:64 vectors and the hash embedder attached, blend weight 0.6"
    attach_embedder(store, {'embeddings': {'provider': 'hash', 'model': '64', 'weight': 0.6}})
    from multis.retrieval.vectors import embed_pending
    embed_pending(store, store.embedder)
    return store

def test_hybrid_table_columns_and_blend_helper():
    c1, c2 = DocChunk('/n/a.md', 'A', 'alpha'), DocChunk('/n/b.md', 'B', 'beta')
    hits = [Hit(c1, 4.0, vector=0.1), Hit(c2, 2.0, vector=0.5)]
    assert update_kind('vector_weight') == 'blend'
    blended = with_vector_weight(hits, 0.5)
    assert [h.hybrid for h in blended] == [pytest.approx(0.5), pytest.approx(0.75)]   # (0 + 1)/2, (1 + 0.5)/2
    assert [h.hybrid for h in hits] == [None, None]                                   # input untouched
    df = hits_table(rerank(blended, actr_scorer(2.0)), hybrid=True)
    assert list(df.columns) == HYBRID_COLUMNS and df['name'].tolist() == ['B', 'A']
    assert df.iloc[0][['vector', 'hybrid', 'score']].tolist() == [0.5, 0.75, 3.0]     # 0.75 * scale 4

def css_classes(w)->set:
    "The CSS classes of a widget and of everything inside it"
    return set(getattr(w, '_dom_classes', ())).union(*[css_classes(c) for c in getattr(w, 'children', ())])

def test_no_embedder_no_slider_no_columns(store):
    def keyword_only(ex):
        ex.query.value = 'water tomatoes'
        assert ex.vector_weight is None and list(ex.table.columns) == TABLE_COLUMNS
        assert all(h.vector is None and h.hybrid is None for h in ex.hits)
        assert '<th>vector</th>' not in ex.results.value and 'multis-vector-weight' not in css_classes(ex.widget)
        return [(h.chunk_id, h.score) for h in ex.hits]
    plain = keyword_only(Explorer(store, now=NOW))
    attach_embedder(store, {'embeddings': {'provider': 'hash', 'model': '64'}})
    assert keyword_only(Explorer(store, embedder=False, now=NOW)) == plain
    assert 'multis-vector-weight' in css_classes(Explorer(store, now=NOW).widget)

def test_vector_weight_slider_reblends_without_refetch(hybrid_store):
    counter = CountingEmbedder(64)
    ex = Explorer(hybrid_store, now=NOW, embedder=counter)
    vw = ex.vector_weight
    assert (vw.value, vw.min, vw.max, vw.step) == (0.6, 0, 1, 0.05)
    assert ex.vector_weight in ex.widget.children[1].children[0].children
    ex.query.value = 'when to water tomatoes'
    assert list(ex.table.columns) == HYBRID_COLUMNS and '<th>hybrid</th>' in ex.results.value
    same = hybrid_store.search('when to water tomatoes', now=NOW, embedder=counter)
    parts = lambda hits: [(h.chunk_id, h.score, h.vector, h.hybrid) for h in hits]
    assert parts(ex.hits) == parts(same)
    fetches, queries, scores = ex.fetches, counter.queries, [h.score for h in ex.hits]
    ex.vector_weight.value = 0.0
    kw = Explorer(hybrid_store, embedder=False, now=NOW)
    kw.query.value = ex.query.value
    assert [h.chunk_id for h in ex.hits][:len(kw.hits)] == [h.chunk_id for h in kw.hits]
    assert [h.score for h in ex.hits][:len(kw.hits)] == pytest.approx([h.score for h in kw.hits])
    assert [h.score for h in ex.hits] != scores
    ex.vector_weight.value = 1.0
    assert [h.vector for h in ex.hits] == sorted((h.vector for h in ex.hits), reverse=True)
    assert (ex.fetches, counter.queries, ex.activation_queries) == (fetches, queries, 0)
    assert ' blend in ' in ex.status.value

def test_hybrid_keeps_the_other_update_rules(hybrid_store):
    ex = Explorer(hybrid_store, now=NOW)
    ex.query.value = 'water the tomatoes'
    ex.vector_weight.value = 0.3
    blend = {h.chunk_id: h.hybrid for h in ex.candidates}
    ex.activation_weight.value, ex.decay.value = 4.0, 0.7
    assert (ex.fetches, ex.activation_queries) == (1, 1)
    assert {h.chunk_id: h.hybrid for h in ex.candidates} == blend
    watering = next(h.chunk_id for h in ex.candidates if h.name == 'Watering')
    ex.use_hit(watering)
    assert ex.hits[0].chunk_id == watering and ex.fetches == 1 and ex.hits[0].hybrid == blend[watering]
    ex.bm25_content.value = 2.0                                  # refetch: blended at the slider's weight
    assert ex.fetches == 2 and {h.hybrid for h in ex.candidates} != set(blend.values())
    fresh = hybrid_store.search('water the tomatoes', now=NOW, vector_weight=0.3, bm25_weights=(1.0, 2.0, 0.5),
                                activation_weight=4.0, decay=0.7)
    assert [h.chunk_id for h in ex.hits] == [h.chunk_id for h in fresh]
    ex.scopes.value = ('kb',)
    assert ex.fetches == 3 and {h.scope for h in ex.hits} == {'kb'}
