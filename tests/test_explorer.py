"The search explorer: its plain functions, and its callbacks driven by setting widget values"
from pathlib import Path
import pytest
pytest.importorskip('ipywidgets'); pytest.importorskip('pandas')
from multis.core import DocChunk
from multis.ranking import Hit, rerank, actr_scorer
from multis.store import Store
from multis.explorer import Explorer, hits_table, highlight, update_kind, with_activations, scope_choice, TABLE_COLUMNS

DATA = Path(__file__).resolve().parents[1]/'data'
NOW = 1_000_000.0

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
    from multis.indexer import index_directory
    with Store(':memory:') as st:
        index_directory(st, DATA, progress=False)
        ex = Explorer(st)
        ex.query.value = 'water'
        assert ex.hits and ex.status.value.startswith(f"{len(ex.hits)} of ")
        assert 'application/vnd.jupyter.widget-view+json' in ex._repr_mimebundle_()
