"The PostgreSQL store on a real server: BM25 equal to SQLite's, rows out and in, and its error paths"
import random, time
import pytest
from multis.core import DocChunk
from multis.retrieval.contract import StoreError
from multis.retrieval.embed import HashEmbedder
from multis.retrieval.store import Store, open_store

WORDS = ('garden water tomato roses running runs ran spring budget travel passport invoice salary doctor recipe bread '
         'café naïve полив томатов東京 Über straße').split()

def _corpus(rng, n=150):
    return [DocChunk(f'/c/{i % 11}.md', ' '.join(rng.choices(WORDS, k=rng.randint(1, 3))),
                     ' '.join(rng.choices(WORDS, k=rng.randint(2, 40))), scope=rng.choice(['kb', 'admin', 'user:1']),
                     section_path=rng.sample(WORDS, 2)) for i in range(n)]

def test_bm25_equals_sqlite_fts5(pg_url, tmp_path):
    "Same chunks, same queries: the same candidates, in the same order, with the same BM25 (to rounding)"
    rng = random.Random(7)
    chunks = _corpus(rng)
    with Store(tmp_path/'s.db') as lite, open_store(pg_url) as pg:
        lite.save(chunks); pg.save(chunks)
        for _ in range(80):
            q = ' '.join(rng.choices(WORDS + ['the', 'of'], k=rng.randint(1, 5)))
            scopes = rng.choice([None, ['kb'], ['kb', 'user:1']])
            w = rng.choice([(1.0, 1.0, 0.5), (10.0, 1.0, 5.0)])
            a = lite.candidates(q, 7, scopes, bm25_weights=w, now=1.0)
            b = pg.candidates(q, 7, scopes, bm25_weights=w, now=1.0)
            assert [round(h.bm25, 9) for h in a] == [round(h.bm25, 9) for h in b], q
            assert {h.chunk_id for h in a if h.bm25 > a[-1].bm25 + 1e-9} <= {h.chunk_id for h in b}, q

def test_statistics_follow_updates_and_deletes(pg_url, tmp_path):
    rng = random.Random(3)
    chunks = _corpus(rng, 60)
    with Store(tmp_path/'s.db') as lite, open_store(pg_url) as pg:
        for st in (lite, pg):
            st.save(chunks); st.delete_file('/c/3.md')
            st.save([DocChunk(c.file_path, c.name, 'bread ' * 5, scope=c.scope, chunk_id=c.chunk_id) for c in chunks[:9]])
        n, df = pg.doc_freqs(['bread', 'garden'])
        assert (n, df) == lite.doc_freqs(['bread', 'garden'])
        assert [round(h.bm25, 9) for h in pg.search('bread garden', limit=20, now=1.0)] == \
               [round(h.bm25, 9) for h in lite.search('bread garden', limit=20, now=1.0)]

def test_rows_out_and_in(pg_url, pg_server):
    "dump_rows of every kind, loaded into an empty store, gives the same rows and the same search"
    from multis.retrieval.pgdump import DUMP_KINDS
    other = pg_url.replace('/multis_t', '/copy_multis_t').split('?')[0]
    other = pg_server.new_database(other.rsplit('/', 1)[1]) + '?multis_vectors=array'
    with open_store(pg_url) as a, open_store(other) as b:
        a.embedder = HashEmbedder(16)
        a.replace_file('/c/1.md', _corpus(random.Random(1), 30), {'size': 3, 'scope': 'kb'})
        a.record_access([a.file_chunks('/c/1.md')[0].chunk_id], 'garden', now=5.0)
        a.save_facts([('c', 'name', 'single', 0, 'Anna', 1.0, 'x')])
        for kind in DUMP_KINDS:
            for rows in a.dump_rows(kind, batch=7): b.load_rows(kind, rows)
        for kind in DUMP_KINDS: assert [r for bt in a.dump_rows(kind) for r in bt] == [r for bt in b.dump_rows(kind) for r in bt], kind
        assert b.vector_counts() == {'hash:16': 30}
        b.embedder = a.embedder
        assert [(h.chunk_id, h.score) for h in a.search('garden water', now=9.0)] == [(h.chunk_id, h.score) for h in b.search('garden water', now=9.0)]
        with pytest.raises(StoreError, match="unknown kind of rows 'nope'"): next(a.dump_rows('nope'))
        with pytest.raises(StoreError, match='files, chunks'): b.load_rows('nope', [])

def test_bad_url_is_one_clear_error():
    with pytest.raises(StoreError) as e: open_store('postgresql://ann:s3cret@127.0.0.1:1/kb?nonsense=1')
    assert 'bad PostgreSQL URL' in str(e.value) and 's3cret' not in str(e.value)

def test_server_down_is_one_clear_error():
    import socket
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    with pytest.raises(StoreError) as e: open_store(f'postgresql://ann:s3cret@127.0.0.1:{port}/kb', timeout=1)
    assert str(e.value).startswith(f'postgresql://ann@127.0.0.1:{port}/kb:') and 's3cret' not in str(e.value)

def test_wrong_password_never_shows_it(pg_server):
    if pg_server.kind != 'debian': pytest.skip('the pgserver wheel trusts local connections: no password to get wrong')
    url = pg_server.url('postgres', password='wrong-pw-123')
    with pytest.raises(StoreError, match='refused the login') as e: open_store(url)
    assert 'wrong-pw-123' not in str(e.value)
    with open_store(pg_server.new_database('multis_pw')) as st: assert 'multis-test-pw' not in st.path + repr(st)

def test_a_dropped_connection_is_retried(pg_url):
    import psycopg
    with open_store(pg_url) as st:
        st.save(_corpus(random.Random(2), 20))
        pid = st._sql('SELECT pg_backend_pid()').fetchone()[0]
        with psycopg.connect(pg_url.split('?')[0], autocommit=True) as c: c.execute('SELECT pg_terminate_backend(%s)', (pid,))
        assert st.search('garden water', now=1.0) and st._sql('SELECT pg_backend_pid()').fetchone()[0] != pid
        with pytest.raises(StoreError):                       # inside a transaction the work is lost: one clear error
            with st.transaction():
                pid = st._sql('SELECT pg_backend_pid()').fetchone()[0]
                with psycopg.connect(pg_url.split('?')[0], autocommit=True) as c: c.execute('SELECT pg_terminate_backend(%s)', (pid,))
                st.save_facts([('c', 'name', 'single', 0, 'Anna', 1.0, '')])
        assert st.fact_rows('c') == []

def test_a_server_gone_for_good_is_one_clear_error():
    from multis.testing.postgres import TempPostgres
    srv = TempPostgres().start()
    if not srv.ok: pytest.skip(srv.why)
    try:
        st = open_store(srv.new_database('gone'), timeout=1)
        st.save(_corpus(random.Random(4), 5))
    finally: srv.stop()
    t = time.monotonic()
    with pytest.raises(StoreError, match='cannot be reached'): st.search('garden')
    assert time.monotonic() - t < 30
