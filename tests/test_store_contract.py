"The store contract, run against every backend: each method the contract names is exercised here, and scopes never leak"
import random
import pytest
from multis.core import DocChunk, MultisError
from multis.retrieval.contract import DUMP_COLUMNS, DUMP_KINDS, StoreContract, StoreError, contract_members, store_class
from multis.retrieval.embed import HashEmbedder
from multis.retrieval.store import open_store
from multis.retrieval.vectors import embed_pending, text_hash, vector_text

# A backend is a function (tmp_path, request) -> the URL of a fresh, empty store; every test below runs against each.
# PostgreSQL runs twice: vectors in real[] scored in memory, and in pgvector (its fixtures are in conftest.py; they
# skip, saying why, when no PostgreSQL server or no pgvector can run here).
BACKENDS = {'sqlite': lambda tmp, req: f"sqlite:///{tmp}/multis.db",
            'postgresql': lambda tmp, req: req.getfixturevalue('pg_new')(),
            'postgresql-pgvector': lambda tmp, req: req.getfixturevalue('pgvector_new')()}

@pytest.fixture(params=sorted(BACKENDS))
def url(request, tmp_path): return BACKENDS[request.param](tmp_path, request)

@pytest.fixture
def store(url):
    with open_store(url) as st: yield st

COVERED = set()

def covers(*names):
    "Mark a test as exercising these contract members (checked by `test_every_contract_member_is_exercised`)"
    def deco(f):
        COVERED.update(names)
        return f
    return deco

def doc(path, name, content, scope='kb', **kw): return DocChunk(path, name, content, scope=scope, **kw)

GARDEN = [doc('/n/garden.md', 'Tomatoes', 'Water tomatoes deeply twice a week.', section_path=['Garden', 'Tomatoes']),
          doc('/n/garden.md', 'Roses', 'Prune roses in early spring.', section_path=['Garden', 'Roses'])]
TRIP = doc('/n/trip.md', 'Packing', 'Pack a rain jacket for the garden tour.', scope='admin')

def test_every_contract_member_is_exercised():
    assert sorted(set(contract_members()) - COVERED) == []

@covers('from_url', 'path', 'close', '__enter__', '__exit__', 'schema_version', 'embedder', 'vector_weight',
        'memory_vector_weight')
def test_opening_closing_and_identity(url):
    cls = store_class(url)
    with cls.from_url(url) as st:
        assert isinstance(st, StoreContract)
        assert isinstance(st.path, str) and st.path
        assert isinstance(st.schema_version(), int) and st.schema_version() >= 1
        assert st.embedder is None and 0 <= st.vector_weight <= 1 and 0 <= st.memory_vector_weight <= 1
        st.save(GARDEN)
    with cls.from_url(url) as again: assert again.get(GARDEN[0].chunk_id) == GARDEN[0]   # data outlives the connection
    st = cls.from_url(url); st.close()
    with pytest.raises(Exception): st.get(GARDEN[0].chunk_id)                            # closed means closed

@covers('reopen')
def test_reopen_shares_data_and_embedder(store):
    store.embedder = HashEmbedder(16)
    with store.reopen() as other:
        other.save(GARDEN)
        assert other.embedder is store.embedder and other.path == store.path
    assert store.get(GARDEN[1].chunk_id) == GARDEN[1]

@covers('save', 'get', 'file_chunks', 'delete_file')
def test_save_get_and_delete(store):
    assert store.save(GARDEN + [TRIP]) == 3
    assert store.get(GARDEN[0].chunk_id) == GARDEN[0] and store.get('doc:missing') is None
    assert [c.name for c in store.file_chunks('/n/garden.md')] == ['Tomatoes', 'Roses']
    changed = doc('/n/garden.md', 'Tomatoes', 'Water tomatoes every morning.', chunk_id=GARDEN[0].chunk_id)
    assert store.save([changed]) == 1 and store.get(changed.chunk_id).content == 'Water tomatoes every morning.'
    assert [h.name for h in store.search('morning')] == ['Tomatoes']      # the index follows an update
    assert store.save([]) == 0
    assert store.delete_file('/n/garden.md') == 2
    assert store.file_chunks('/n/garden.md') == [] and store.search('tomatoes') == []
    assert store.delete_file('/n/nothing.md') == 0

@covers('replace_file', 'replace_files', 'file_state', 'files', 'stats')
def test_files_their_state_and_stats(store):
    store.replace_file('/n/garden.md', GARDEN, {'size': 10, 'mtime': 1.0, 'sha256': 'abc', 'scope': 'kb', 'document_type': 'md'})
    st = store.file_state('/n/garden.md')
    assert (st['size'], st['sha256'], st['scope'], st['chunks']) == (10, 'abc', 'kb', 2)
    assert store.file_state('/n/none.md') is None
    store.record_access([GARDEN[0].chunk_id], 'tomatoes', now=100.0)
    shorter = [GARDEN[0]]
    assert store.replace_files([('/n/garden.md', shorter, {'size': 5, 'scope': 'kb'}), ('/n/trip.md', [TRIP], {'scope': 'admin'})]) == 2
    assert store.file_state('/n/garden.md')['chunks'] == 1 and store.get(GARDEN[1].chunk_id) is None
    assert store.activations([GARDEN[0].chunk_id], now=101.0)[GARDEN[0].chunk_id] > 0   # unchanged chunk keeps its history
    assert [(f['file_path'], f['scope'], f['chunks']) for f in store.files()] == [('/n/garden.md', 'kb', 1), ('/n/trip.md', 'admin', 1)]
    assert [f['file_path'] for f in store.files(['kb'])] == ['/n/garden.md'] and store.files([]) == []
    s = store.stats()
    assert (s['files'], s['chunks'], s['by_scope']) == (2, 2, {'admin': 1, 'kb': 1})

@covers('transaction', 'in_transaction')
def test_transactions_are_all_or_nothing(store):
    assert store.in_transaction is False
    with store.transaction():
        assert store.in_transaction is True
        store.save_facts([('c', 'name', 'single', 0, 'Anna', 1.0, '')])
    assert store.in_transaction is False and len(store.fact_rows('c')) == 1
    with pytest.raises(ZeroDivisionError):
        with store.transaction():
            store.delete_facts('c')
            store.save_facts([('c', 'favorite_film', 'ranked', 1, 'Alien', 2.0, '')])
            1/0
    assert [r[4] for r in store.fact_rows('c')] == ['Anna'] and store.in_transaction is False

@covers('record_access', 'activations')
def test_accesses_and_activation(store):
    store.save(GARDEN)
    a, b = (c.chunk_id for c in GARDEN)
    assert store.activations([a, b], now=10.0) == {} and store.activations([]) == {}
    store.record_access([a, a], 'tomatoes', now=1000.0)       # a repeat in one call counts once
    store.record_access([a], 'tomatoes', now=1005.0)
    acts = store.activations([a, b], now=1010.0)
    assert set(acts) == {a} and acts[a] > 0
    assert store.activations([a], now=1010.0, decay=0.9)[a] < acts[a]
    with pytest.raises(ValueError): store.activations([a], decay=0)
    store.record_access([], 'nothing')

@covers('search', 'candidates')
def test_keyword_search_and_candidates(store):
    store.save(GARDEN + [TRIP, doc('/n/notes.md', 'Note', 'Unrelated text about the weather and the sea.')])
    hits = store.search('water the tomatoes', now=1000.0)
    assert hits[0].name == 'Tomatoes' and hits[0].bm25 > 0 and hits[0].score >= hits[-1].score
    assert [h.name for h in store.search('garden', scopes=['kb'])] != [] and all(h.scope == 'kb' for h in store.search('garden', scopes=['kb']))
    assert store.search('"; DROP TABLE chunks; --') == [] and store.search('') == []
    cands = store.candidates('garden tour jacket', limit=2, now=1000.0)
    assert cands and all(h.activation == 0 for h in cands) and cands[0].name == 'Packing'
    with pytest.raises(MultisError): store.search('garden', scopes=['everything'])
    with pytest.raises(MultisError): store.candidates('garden', limit=0)
    shown = store.search('prune roses', limit=1, record=True, now=2000.0)
    assert store.activations([shown[0].chunk_id], now=2001.0)[shown[0].chunk_id] > 0

@covers('hybrid_candidates')
def test_hybrid_search(store):
    store.embedder = HashEmbedder(64)
    store.save(GARDEN + [TRIP])                                 # an embedder's store embeds what it saves
    assert store.vector_counts() == {'hash:64': 3}
    hit = store.search('tomatoes', now=1000.0)[0]
    assert hit.vector is not None and hit.hybrid is not None
    assert store.search('tomatoes', embedder=False, now=1000.0)[0].vector is None
    kw = store.candidates('tomatoes', 5, ['kb'], now=1000.0)
    both = store.hybrid_candidates('tomatoes', kw, 5, ['kb'], store.embedder, 0.7, (10.0, 1.0, 5.0), 0.5, 1000.0)
    assert {h.chunk_id for h in both} >= {h.chunk_id for h in kw} and all(h.scope == 'kb' for h in both)
    with pytest.raises(MultisError): store.hybrid_candidates('x', [], 5, None, store.embedder, 1.5, (10.0, 1.0, 5.0), 0.5, 1.0)

@covers('pending_vectors', 'save_vectors', 'vector_counts', 'drop_orphan_vectors')
def test_vectors_and_their_state(store):
    hv = HashEmbedder(32)
    store.save(GARDEN + [TRIP])
    assert sorted(r[0] for r in store.pending_vectors(hv.name)) == sorted(c.chunk_id for c in GARDEN + [TRIP])
    assert [r[0] for r in store.pending_vectors(hv.name, [TRIP.chunk_id])] == [TRIP.chunk_id]
    cid, scope, name, content = store.pending_vectors(hv.name, [GARDEN[0].chunk_id])[0]
    t = vector_text(name, content)
    assert store.save_vectors(hv.name, [(cid, scope, text_hash(t), hv.embed([t])[0])]) == 1
    assert store.save_vectors(hv.name, [('doc:gone', 'kb', 'h', hv.embed(['x'])[0])]) == 0     # no such chunk: nothing
    assert store.vector_counts() == {hv.name: 1}
    assert embed_pending(store, hv) == 2 and store.pending_vectors(hv.name) == []
    store.save([doc('/n/garden.md', 'Tomatoes', 'New text.', chunk_id=GARDEN[0].chunk_id)])   # changed text: re-embed
    assert [r[0] for r in store.pending_vectors(hv.name)] == [GARDEN[0].chunk_id]
    assert store.drop_orphan_vectors() == 0
    moved = doc('/n/trip.md', 'Packing', TRIP.content, scope='user:5', chunk_id=TRIP.chunk_id)
    store.save([moved])                                          # moved scope: its vector is an orphan
    assert store.drop_orphan_vectors() == 1 and store.vector_counts() == {hv.name: 1}

@covers('save_facts', 'fact_rows', 'delete_facts')
def test_facts(store):
    assert store.fact_rows('c') == []
    rows = [('c', 'favorite_film', 'ranked', 1, 'Alien', 5.0, 'src'), ('c', 'favorite_film', 'ranked', 2, 'Up', 5.0, ''),
            ('c', 'name', 'single', 0, 'Anna', 5.0, ''), ('d', 'name', 'single', 0, 'Bo', 5.0, '')]
    assert store.save_facts(rows) == 4
    assert store.save_facts([('c', 'name', 'single', 0, 'Older', 4.0, '')]) == 0      # older never replaces newer
    assert store.save_facts([('c', 'name', 'single', 0, 'Ann', 6.0, '')]) == 1
    assert store.fact_rows('c', 'name') == [('c', 'name', 'single', 0, 'Ann', 6.0)]
    assert [r[4] for r in store.fact_rows('c')] == ['Alien', 'Up', 'Ann']               # by topic, kind, rank
    assert [r[4] for r in store.fact_rows('c', 'favorite_film', 'ranked', 2)] == ['Up']
    assert [r[4] for r in store.fact_rows('d')] == ['Bo']                                # chats never mix
    assert store.delete_facts('c', 'favorite_film', 'ranked', until=4.0) == 0
    assert store.delete_facts('c', 'favorite_film', 'ranked', until=5.0) == 2
    assert store.delete_facts('c') == 1 and store.fact_rows('d') != []

@covers('delete_conversation_chunks')
def test_conversation_chunks(store):
    conv = lambda scope, kind, ts: doc(f'/chats/{scope}/{kind}/{ts}', 'Chat', f'we talked about gardens {ts}', scope=scope,
                                       element_type=kind, document_type='conversation', metadata={'captured_at': ts})
    store.save([conv('user:1', 'paragraph', 10), conv('user:1', 'paragraph', 100), conv('user:2', 'paragraph', 10),
                conv('user:1', 'memory_summary', 10), conv('user:2', 'memory_summary', 10)] + GARDEN)
    store.record_access([store.file_chunks('/chats/user:1/paragraph/10')[0].chunk_id], 'gardens', now=5.0)
    assert store.delete_conversation_chunks('paragraph', 'user:1', before=50) == 1
    assert store.delete_conversation_chunks('memory_summary', 'user:1') == 1
    assert store.delete_conversation_chunks('paragraph', None, before=50) == 1          # every scope
    assert store.delete_conversation_chunks('memory_summary', 'user:*') == 1
    assert store.stats()['by_type'] == {'conversation': 1, 'txt': 2}                     # documents untouched
    with pytest.raises(MultisError): store.delete_conversation_chunks('paragraph', 'everyone')

# --- dump_rows / load_rows: a whole store copied through the contract (`multis migrate --to`) ---

@pytest.fixture
def empty(request, tmp_path):
    "A second fresh store of the backend `url` runs on"
    with open_store(BACKENDS[request.node.callspec.params['url']](tmp_path/'second', request)) as st: yield st

def _fill(store):
    "Something of every kind: files, chunks in three scopes, accesses, vectors, facts"
    store.embedder = HashEmbedder(32)
    store.replace_file('/n/garden.md', GARDEN, {'size': 120, 'mtime': 5.0, 'sha256': 'ab', 'scope': 'kb', 'document_type': 'md'})
    store.save([TRIP, doc('/chats/user:7/log', 'Chat', 'we talked about tomatoes', scope='user:7', element_type='paragraph',
                          document_type='conversation', metadata={'captured_at': 10})])
    store.record_access([GARDEN[0].chunk_id, TRIP.chunk_id], 'tomatoes', now=100.0)
    store.record_access([GARDEN[0].chunk_id], 'water', now=200.0)
    store.save_facts([('7', 'colours', 'ranked', 1, 'blue', 5.0, 'chat'), ('7', 'name', 'single', 0, 'Ann', 6.0, '')])
    store.embedder = None

def _dump(store)->dict: return {k: [r for b in store.dump_rows(k) for r in b] for k in DUMP_KINDS}

def _searches(store)->list:
    hv = HashEmbedder(32)
    return [[(h.chunk_id, round(h.score, 9), round(h.activation, 9)) for h in store.search(q, scopes=sc, now=1000.0, embedder=e)]
            for q in ('tomatoes', 'rain jacket garden', 'prune') for sc in (None, ['kb'], ['user:7']) for e in (False, hv)]

@covers('dump_rows', 'load_rows')
def test_dump_and_load_round_trip(store, empty):
    _fill(store)
    rows = _dump(store)
    assert {k: len(v) for k, v in rows.items()} == dict(files=1, chunks=4, accesses=3, vectors=4, facts=2)
    for k, v in rows.items(): assert all(isinstance(r, tuple) and len(r) == len(DUMP_COLUMNS[k]) for r in v)
    chunk = dict(zip(DUMP_COLUMNS['chunks'], rows['chunks'][0]))
    assert isinstance(chunk['created_at'], str) and chunk['section_path'] == '["Garden", "Tomatoes"]' and chunk['access_count'] == 2
    vec = dict(zip(DUMP_COLUMNS['vectors'], rows['vectors'][0]))
    assert isinstance(vec['vector'], bytes) and len(vec['vector']) == 32*4 and vec['model'] == 'hash:32'
    assert [len(b) for b in store.dump_rows('chunks', batch=3)] == [3, 1]
    before = _searches(empty)                                            # an empty store has searched (and cached) once
    for k in DUMP_KINDS:
        for b in store.dump_rows(k, batch=2): assert empty.load_rows(k, b) == len(b)
    assert _dump(empty) == rows == _dump(store)
    assert _searches(empty) == _searches(store) != before               # full-text index and vector caches in step
    assert empty.stats() == store.stats() and empty.vector_counts() == store.vector_counts() == {'hash:32': 4}
    assert empty.fact_rows('7') == store.fact_rows('7') and empty.file_state('/n/garden.md')['sha256'] == 'ab'
    assert empty.activations([GARDEN[0].chunk_id], now=300.0) == store.activations([GARDEN[0].chunk_id], now=300.0)

@covers('dump_rows', 'load_rows')
def test_dump_and_load_refuse_what_they_cannot_do(store, empty):
    assert [list(store.dump_rows(k)) for k in DUMP_KINDS] == [[]] * len(DUMP_KINDS)     # an empty store dumps nothing
    with pytest.raises(StoreError, match="unknown kind of rows 'notes'.*files, chunks, accesses, vectors, facts"): store.dump_rows('notes')
    with pytest.raises(StoreError, match='notes'): store.load_rows('notes', [])
    assert store.load_rows('facts', []) == 0
    _fill(store)
    rows = [r for b in store.dump_rows('chunks') for r in b]
    with pytest.raises(Exception):
        with empty.transaction():                                       # the caller's transaction: all or nothing
            empty.load_rows('chunks', rows); raise RuntimeError('interrupted')
    assert empty.stats()['chunks'] == 0 and empty.search('tomatoes') == []
    with pytest.raises(StoreError): store.load_rows('chunks', rows[:1])                   # no deduplication: a collision

# --- scopes are a hard boundary: random stores, random searches ---

WORDS = 'garden water tomato rose budget travel passport invoice salary doctor recipe bread'.split()
USERS = [f'user:{i}' for i in range(1, 7)]

def _random_store(store, rng, n=240):
    scopes = ['kb', 'admin'] + USERS
    chunks = [doc(f'/r/{i % 17}.md', f'N{i}', ' '.join(rng.choices(WORDS, k=rng.randint(3, 12))), scope=rng.choice(scopes),
                  document_type=rng.choice(['txt', 'conversation'])) for i in range(n)]
    store.save(chunks)
    return scopes

@pytest.mark.parametrize('hybrid', [False, True])
def test_no_hit_outside_the_scopes_asked(store, hybrid):
    rng = random.Random(1515)
    if hybrid: store.embedder = HashEmbedder(32)
    scopes = _random_store(store, rng)
    for _ in range(60):
        asked = rng.sample(scopes, rng.randint(1, 4))
        q = ' '.join(rng.choices(WORDS, k=rng.randint(1, 4)))
        hits = store.search(q, limit=rng.randint(1, 30), scopes=asked, now=1000.0)
        assert {h.scope for h in hits} <= set(asked), (q, asked)
        assert {h.scope for h in store.candidates(q, 10, asked)} <= set(asked)
        assert {f['scope'] for f in store.files(asked)} <= set(asked)
    assert {h.scope for h in store.search('garden water tomato', limit=100, now=1000.0)} == set(scopes)  # the owner sees all

def test_a_non_owner_never_sees_admin_or_another_chat(store):
    rng = random.Random(42)
    store.embedder = HashEmbedder(32)
    _random_store(store, rng)
    for user in USERS:
        own = ['kb', user]
        for _ in range(15):
            q = ' '.join(rng.choices(WORDS, k=rng.randint(1, 3)))
            got = {h.scope for h in store.search(q, limit=50, scopes=own, now=1000.0, record=True)}
            assert 'admin' not in got and not (got - set(own)), (user, q, got)

@covers('exclusive')
def test_exclusive_is_one_holder_across_connections(store):
    "A store-wide lock: one connection (process, machine) holds it; the others are told at once, and may take it after"
    with store.reopen() as other:
        with store.exclusive('watch:/docs') as mine:
            with other.exclusive('watch:/docs') as theirs, other.exclusive('watch:/notes') as elsewhere:
                assert (mine, theirs, elsewhere) == (True, False, True)
        with other.exclusive('watch:/docs') as theirs: assert theirs is True
        with store.exclusive('watch:/docs') as mine, store.exclusive('watch:/docs') as again: assert (mine, again) == (True, False) or store.path == ':memory:'
