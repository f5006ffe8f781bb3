"Vectors in the store: chunk metadata, incremental embedding, model changes, memory, scopes in hybrid search"
import json, shutil, sqlite3, subprocess, sys
from pathlib import Path
import pytest
from hypothesis import given, settings, strategies as hst, HealthCheck
from multis.core import DocChunk
from multis.retrieval.store import Store
from multis.retrieval.embed import HashEmbedder
from multis.documents.indexer import index_directory, index_file
from multis.retrieval.vectors import attach_embedder, embed_pending, VectorIndex
from multis.retrieval.store import open_store
from multis.memory.chat import ChatMemory
from multis.memory.capture import capture, index_message
from multis.testing.providers import FakeProvider

REPO = Path(__file__).resolve().parents[1]
HASH = {'embeddings': {'provider': 'hash', 'model': '64'}}

class Counting(HashEmbedder):
    "A hash embedder that remembers every text it embedded"
    def __init__(self, dim=64): super().__init__(dim); self.seen = []
    def _embed(self, texts): self.seen += texts; return super()._embed(texts)

def _doc(n_sections:int, edit:int|None=None)->str:
    return '\n\n'.join(f"# Section {i}\n\nThe section about topic {i} says {'CHANGED ' if i == edit else ''}thing {i}."
                       for i in range(n_sections))

def test_chunk_metadata_of_indexed_files(tmp_path):
    with Store(tmp_path/'m.db') as st:
        index_directory(st, REPO/'data', 'kb', progress=False)
        for f in st.files():
            cs = st.file_chunks(f['file_path'])
            assert [c.chunk_index for c in cs] == list(range(len(cs)))
            assert {c.chunk_total for c in cs} == {len(cs)}
            assert all(c.token_count > 0 for c in cs if c.content.strip())
        row = st._sql('SELECT chunk_index, chunk_total, token_count, document_type FROM chunks LIMIT 1').fetchone()
        assert row['document_type'] in ('pdf', 'docx', 'md', 'txt')

def test_incremental_embedding_only_changed_sections(tmp_path):
    folder = tmp_path/'notes'; folder.mkdir()
    (folder/'a.md').write_text(_doc(6)); (folder/'b.md').write_text(_doc(3))
    e = Counting()
    with Store(tmp_path/'m.db') as st:
        st.embedder = e
        index_directory(st, folder, 'kb', progress=False)
        assert len(e.seen) == 9 and st.vector_counts() == {'hash:64': 9}
        e.seen.clear()
        (folder/'a.md').write_text(_doc(6, edit=2))                      # one section edited
        index_directory(st, folder, 'kb', progress=False)
        assert len(e.seen) == 1 and 'CHANGED' in e.seen[0]
        e.seen.clear()
        (folder/'a.md').write_text(_doc(4))                              # the file got shorter
        index_directory(st, folder, 'kb', progress=False)
        assert e.seen == ['Section 2\n\nThe section about topic 2 says thing 2.']   # back to its first text; 0, 1, 3 kept
        assert st.stats()['chunks'] == 7 and st.vector_counts() == {'hash:64': 7}
        assert st._sql('SELECT count(*) FROM embeddings e LEFT JOIN chunks c USING (chunk_id) '
                       'WHERE c.chunk_id IS NULL').fetchone()[0] == 0
        (folder/'b.md').unlink()
        index_directory(st, folder, 'kb', progress=False)
        assert st.vector_counts() == {'hash:64': 4}

def test_model_change_reembeds_instead_of_mixing(tmp_path):
    with Store(tmp_path/'m.db') as st:
        st.save([DocChunk('/n/a.md', f'S{i}', f'text number {i}') for i in range(5)])
        assert embed_pending(st, HashEmbedder(64)) == 5
        new = HashEmbedder(32)
        assert len(st.pending_vectors(new.name)) == 5
        assert embed_pending(st, new) == 5
        assert st.vector_counts() == {'hash:32': 5}
        hits = st.search('text number 3', embedder=new)
        assert hits[0].name == 'S3' and hits[0].vector is not None
        with pytest.raises(Exception, match='dimensions'):
            VectorIndex(st, new.name).top(HashEmbedder(64).embed_query('x'), 1)

def test_memory_summaries_and_messages_get_vectors(tmp_path):
    with open_store(tmp_path/'m.db', HASH) as st:
        mem = ChatMemory('42', home=tmp_path/'home')
        c = index_message(st, mem, 'user', 'I am moving to Lisbon in May', now=1_700_000_000)
        assert st.pending_vectors('hash:64') == []
        assert st._sql('SELECT scope FROM embeddings WHERE chunk_id=?', (c.chunk_id,)).fetchone()[0] == 'user:42'
        hits = st.search('relocating to Lisbon', scopes=['user:42'])
        assert hits and hits[0].chunk_id == c.chunk_id and hits[0].vector > 0
        assert st.search('relocating to Lisbon', scopes=['kb', 'user:7']) == []

def test_capture_summary_is_embedded(tmp_path):
    home = tmp_path/'home'
    with open_store(tmp_path/'m.db', HASH) as st:
        mem = ChatMemory('7', home=home)
        for i, t in enumerate(['My sister Ana lives in Porto', 'She is a marine biologist']):
            mem.append_message('user', t, 1_700_000_000 + i)
        summary = capture(mem, FakeProvider(['- Ana, the user\'s sister, is a marine biologist in Porto.']), st, now=1_700_000_100)
        assert summary and 'Porto' in summary
        row = st._sql("SELECT c.chunk_id, e.model FROM chunks c JOIN embeddings e USING (chunk_id) "
                      "WHERE c.element_type='memory_summary'").fetchone()
        assert row is not None and row['model'] == 'hash:64'

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(allowed=hst.lists(hst.sampled_from(['kb', 'admin', 'user:1', 'user:2', 'user:3']), min_size=1, max_size=3, unique=True),
       query=hst.sampled_from(['garden water', 'budget march', 'bees lavender', 'the', 'trip passport photo', 'xyz']),
       weight=hst.sampled_from([0.0, 0.3, 0.7, 1.0]), fusion=hst.sampled_from(['linear', 'rrf']))
def test_hybrid_search_never_leaves_its_scopes(scoped_store, allowed, query, weight, fusion):
    for h in scoped_store.search(query, scopes=allowed, vector_weight=weight, fusion=fusion, limit=20):
        assert h.scope in allowed

@pytest.fixture(scope='module')
def scoped_store(tmp_path_factory):
    st = open_store(tmp_path_factory.mktemp('scopes')/'m.db', HASH)
    texts = ['Water the garden early', 'The budget is due in March', 'Bees visit lavender', 'Renew the passport',
             'Pack for the trip', 'Photo of the garden']
    st.save([DocChunk(f'/n/{s}.md', f'{s} {i}', f'{t} ({s})', scope=s)
             for s in ['kb', 'admin', 'user:1', 'user:2', 'user:3'] for i, t in enumerate(texts)])
    assert st.pending_vectors('hash:64') == []
    yield st
    st.close()

def test_cli_index_and_search_hybrid(tmp_path):
    home = tmp_path/'home'; home.mkdir()
    (home/'config.json').write_text(json.dumps(HASH))
    env = {'MULTIS_HOME': str(home), 'PATH': str(Path(sys.executable).parent)}
    multis = str(Path(sys.executable).parent/'multis')
    run = lambda *a: subprocess.run([multis, *a], capture_output=True, text=True, env=env, timeout=120)
    r = run('index', str(REPO/'data'), '--scope', 'kb', '--quiet')
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith('vectors: ') and 'hash:64' in r.stdout
    hits = json.loads(run('search', 'pairing code', '--json', '--limit', '3').stdout)
    assert hits and all(h['vector'] is not None and 0 <= h['hybrid'] <= 1 for h in hits)
    again = run('index', str(REPO/'data'), '--scope', 'kb', '--quiet')
    assert 'vectors: 0 chunks embedded' in again.stdout

def test_bad_embeddings_config_keeps_search_working(tmp_path, caplog):
    with open_store(tmp_path/'m.db', {'embeddings': {'provider': 'hash', 'model': 'huge'}}) as st:
        assert st.embedder is None
        st.save([DocChunk('/n/a.md', 'A', 'apples and pears')])
        assert st.search('apples')[0].name == 'A'
    assert 'semantic search is off' in caplog.text

def test_service_searches_hybrid_and_embeds_chat_messages(tmp_path):
    import httpx
    from multis.config import load_config
    from multis.run.service import create_app, ServiceThread
    from multis.run.guard import service_token
    home = tmp_path/'home'; home.mkdir()
    cfg = load_config(home/'config.json', env=False)
    cfg['embeddings'].update(provider='hash', model='64')
    with open_store(home/'multis.db', cfg) as st:
        st.save([DocChunk('/n/ferry.md', 'Ferry', 'The ferry leaves at nine from pier four.')])
    srv = ServiceThread(create_app(home/'multis.db', cfg, home)).start()
    try:
        with httpx.Client(base_url=srv.url, headers={'Authorization': f'Bearer {service_token(home)}'}, timeout=30) as c:
            hits = c.post('/search', json={'query': 'ferry pier'}).json()
            assert hits[0]['name'] == 'Ferry' and hits[0]['vector'] > 0 and 0 <= hits[0]['hybrid'] <= 1
            assert c.post('/memory/7/messages', json={'role': 'user', 'content': 'my boat is called Marlin'}).status_code == 200
            hits = c.post('/search', json={'query': 'boat Marlin', 'scopes': ['user:7']}).json()
            assert hits and hits[0]['scope'] == 'user:7' and hits[0]['vector'] is not None
    finally: srv.stop()
    with Store(home/'multis.db') as st: assert st.pending_vectors('hash:64') == []
