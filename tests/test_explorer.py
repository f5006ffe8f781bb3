"The search explorer: its plain functions, and its callbacks driven by setting widget values"
from pathlib import Path
import importlib.util
import pytest
from multis.core import DocChunk
from multis.retrieval.ranking import Hit, rerank, actr_scorer
from multis.retrieval.store import Store

# the explorer (pandas, ipywidgets) is imported when a test runs, not at collection: a forked child's ru_maxrss starts
# at pytest's size, and tests/test_bombs.py measures a subprocess's memory that way
pytestmark = pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ('ipywidgets', 'pandas')),
                                reason='ipywidgets and pandas (the explorer extra) are not installed')

@pytest.fixture(autouse=True)
def explorer_names():
    "The explorer module's public names as this module's globals"
    import multis.workbench.explorer as ex
    globals().update({k: v for k, v in vars(ex).items() if not k.startswith('_')})
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
    ex = Explorer(hybrid_store, now=NOW, embedder=counter, floor=-1)   # every candidate, as Store.search
    vw = ex.vector_weight
    assert (vw.value, vw.min, vw.max, vw.step) == (0.6, 0, 1, 0.05)
    assert ex.vector_weight in ex.widget.children[2].children[0].children
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
    ex = Explorer(hybrid_store, now=NOW, floor=-1)
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

# ---- research (issue 21): judgements, per-query metrics, two settings compared, runs exported, reset, floor

import json

def write_garden(d:Path)->Path:
    "A BEIR folder: 'tomato watering' has its relevant document's words in the title, a distractor's in the text"
    (d/'qrels').mkdir(parents=True)
    docs = {'d1': ('Tomato watering', 'How often plants need it.'),
            'd2': ('Allotment diary', 'Tomato watering, tomato watering, tomato watering again.'),
            'd3': ('Bread', 'A slow rise makes better bread.'), 'd4': ('Roses', 'Prune roses in spring.'),
            'd5': ('Taxes', 'File the return by April.'), 'd6': ('Rose hips', 'Roses give hips in autumn; prune late.')}
    (d/'corpus.jsonl').write_text('\n'.join(json.dumps({'_id': k, 'title': t, 'text': x}) for k, (t, x) in docs.items()))
    qs = [('q1', 'tomato watering'), ('q2', 'prune roses'), ('q3', 'bread')]
    (d/'queries.jsonl').write_text('\n'.join(json.dumps({'_id': q, 'text': t}) for q, t in qs))
    (d/'qrels'/'train.tsv').write_text('query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td4\t2\nq2\td6\t1\nq3\td3\t0\n')
    (d/'qrels'/'test.tsv').write_text('query-id\tcorpus-id\tscore\nq3\td3\t1\n')
    return d

@pytest.fixture
def garden(tmp_path):
    pytest.importorskip('ranx')
    ex = Explorer(Store(':memory:'), now=NOW, export_dir=tmp_path/'runs')
    ex.load(str(write_garden(tmp_path/'garden')))
    yield ex
    ex.store.close()

def test_load_marks_judged_documents_and_metrics_follow_the_sliders(garden):
    ex = garden
    assert [v for _, v in ex.judged.options] == [None, 'q1', 'q2']      # q3 has nothing relevant in train
    ex.bm25_name.value = 1.0                                              # a light title (the default weighs it 3)
    ex.judged.value = 'q1'
    assert ex.table['rel'].tolist()[:2] == ['', '✓ 1'] and 'nDCG@10 0.631' in ex.metrics.value
    ex.bm25_name.value = 4.0
    assert ex.table['rel'].tolist()[0] == '✓ 1' and 'nDCG@10 1.000' in ex.metrics.value
    ex.query.value = 'prune roses'                                        # typed by hand: still judged
    assert ex.current_qid() == 'q2' and 'query q2 · 2 relevant' in ex.metrics.value
    ex.load(str(Path(ex.export_dir).parent/'garden'), 'test')
    assert [v for _, v in ex.judged.options] == [None, 'q3']

def test_widget_metrics_equal_the_variants_api(garden):
    "The widget's per-query figures (hand-written metrics at 10 hits) are ranx's for the same settings"
    from multis.workbench.variants import run_variants
    ex = garden
    exp = run_variants(ex.judgements, {'now': ex.search_options(ex.settings_now())})
    for q in ('q1', 'q2'):
        ex.judged.value = q
        row = exp.per_query.set_index('query').loc[q]
        for k in ('ndcg@10', 'recall@10', 'mrr@10'):
            assert f"{k.split('@')[0].replace('ndcg', 'nDCG').replace('recall', 'Recall').replace('mrr', 'MRR')}@10 {row[k]:.3f}" in ex.metrics.value

def test_pin_compares_two_settings_with_rank_changes(garden):
    ex = garden
    ex.judged.value = 'q1'
    ex.bm25_name.value = 4.0
    ex.pin_a()
    assert ex.pinned['bm25_weights'] == (4.0, 1.0, 0.5) and ex.pin.description == 'unpin A'
    ex.bm25_name.value = 0.5
    assert ex.table['Δ rank'].tolist()[:2] == ['▲1', '▼1']
    assert 'A: nDCG@10 1.000' in ex.metrics.value and 'B: nDCG@10 0.631' in ex.metrics.value
    a = ex.store.search('tomato watering', 10, now=NOW, bm25_weights=(4.0, 1.0, 0.5), embedder=False)
    assert [h.chunk_id for h in ex._hits_a()] == [h.chunk_id for h in a]
    assert 'A: pinned' in ex.results_a.value and 'B: the settings you move' in ex.results.value
    ex.pin_a()
    assert ex.pinned is None and ex.results_a.layout.display == 'none' and 'Δ rank' not in ex.table

def test_export_writes_trec_and_csv_runs_of_both_settings(garden, tmp_path):
    import ranx
    ex = garden
    ex.bm25_name.value = 4.0; ex.pin_a(); ex.bm25_name.value = 0.5
    paths = ex.export_run()
    assert {p.name for p in paths} == {'A.trec', 'A.csv', 'B.trec', 'B.csv', 'per_query.csv', 'means.csv'}
    assert 'exported 2 queries × 2 settings' in ex.status.value
    a = ranx.Run.from_file(str(tmp_path/'runs'/'A.trec'), kind='trec').to_dict()
    assert list(a['q1'])[0] == 'd1' and list(ranx.Run.from_file(str(tmp_path/'runs'/'B.trec'), kind='trec').to_dict()['q1'])[0] == 'd2'

def test_export_without_judgements_saves_the_query_shown(store, tmp_path):
    pytest.importorskip('ranx')
    ex = Explorer(store, now=NOW, export_dir=tmp_path/'out')
    ex.query.value = 'water tomatoes'
    paths = ex.export_run()
    lines = (tmp_path/'out'/'current.trec').read_text().splitlines()
    assert [p.name for p in paths] == ['current.trec', 'current.csv'] and len(lines) == len(ex.hits)
    assert [l.split()[2] for l in lines] == [h.chunk_id for h in ex.hits]

def test_reset_settings_json_and_bad_paths(garden):
    ex = garden
    ex.judged.value = 'q1'
    ex.decay.value, ex.bm25_section.value, ex.candidate_factor.value = 0.8, 2.0, 5
    assert json.loads(ex.settings.value) == {'search': {'activation_weight': 2.0, 'decay': 0.8, 'candidate_factor': 5,
                                                        'bm25_weights': [3.0, 1.0, 2.0]}}
    n = ex.fetches
    ex.reset.click()
    assert ex.fetches == n + 1 and json.loads(ex.settings.value)['search']['decay'] == 0.5
    ex.load('/nowhere/at/all')
    assert ex.status.value.startswith('<b>cannot load') and 'BEIR folder not found' in ex.status.value

def test_status_after_use_and_the_relevance_floor(hybrid_store):
    ex = Explorer(hybrid_store, now=NOW, floor=0.5)
    ex.query.value = 'water tomatoes'
    ex.use_hit(ex.hits[-1].chunk_id)
    assert ex.status.value.startswith(f"{len(ex.hits)} of {len(ex.candidates)} candidates · use in ")
    assert 'access recorded to' in ex.status.value
    ex.query.value = 'xqzv blorf'                          # no word of the corpus: only vector neighbours
    assert ex.hits == [] and 'under the relevance floor' in ex.status.value
    loose = Explorer(hybrid_store, now=NOW, floor=-1)
    loose.query.value = 'xqzv blorf'
    assert loose.hits and all(h.bm25 == 0 for h in loose.hits)

def test_score_is_explained_and_plotted(store):
    ex = Explorer(store, now=NOW)
    ex.query.value = 'water'
    assert '<b>score</b> = bm25 + activation weight × activation' in ex.help.value
    assert ex.plot.value.startswith('<svg') and ex.plot.value.count('<rect') >= 1

def test_locomo_judged_question_is_searched_in_its_chat(tmp_path):
    pytest.importorskip('ranx')
    turns = [('Ann', 'I adopted a puppy called Rex'), ('Bo', 'What breed is Rex?'), ('Ann', 'Rex is a border collie')]
    data = [{'sample_id': f's{i}', 'conversation': {'session_1_date_time': '1:56 pm on 8 May, 2023',
             'session_1': [{'speaker': a, 'dia_id': f'D1:{j}', 'text': t} for j, (a, t) in enumerate(turns, 1)]},
             'qa': [{'question': 'what breed is Rex?', 'evidence': ['D1:3'], 'category': 4}]} for i in range(2)]
    (tmp_path/'locomo10.json').write_text(json.dumps(data))
    ex = Explorer(Store(':memory:'))
    ex.load(tmp_path/'locomo10.json')
    ex.judged.value = '1-0'
    assert ex.scopes.value == ('user:locomo-1',) and {h.scope for h in ex.hits} == {'user:locomo-1'}
    assert '✓ 1' in ex.table['rel'].tolist() and 'query 1-0 · 1 relevant' in ex.metrics.value

def test_sample_demo_is_keyword_search_unless_a_real_embedder_is_configured():
    nb = json.loads((DATA.parent/'nbs'/'90_workbench.explorer.ipynb').read_text())
    last = ''.join(nb['cells'][-1]['source'])
    assert "'hash'" in last and "attach_embedder(st, cfg)" in last and 'not in (None, \'\', \'hash\')' in last
