"The store and search against real SQLite files: scopes as a hard boundary, bad queries, bad databases"
import json, math, sqlite3, subprocess, sys, textwrap, time
from pathlib import Path
import pytest
from hypothesis import given, settings, strategies as stx, HealthCheck
from multis.core import DocChunk, MultisError
from multis.retrieval.store import Store, StoreError, SCHEMA_VERSION
from multis.retrieval.search import query_terms, check_scopes

WORDS = 'water tomato garden secret salary password plan trip bees compost roses admin kb user name content'.split()
SCOPES = ['kb', 'admin', 'user:1', 'user:2', 'user:42', 'user:-100123']

def _chunks():
    out = []
    for i in range(120):
        scope = SCOPES[i % len(SCOPES)]
        words = ' '.join(WORDS[(i*7 + j) % len(WORDS)] for j in range(12))
        out.append(DocChunk(f'/docs/f{i%9}.md', f'{scope} note {i}', f'{words} belongs to {scope}', scope=scope,
                            section_path=['Notes', scope]))
    return out

@pytest.fixture(scope='module')
def store(tmp_path_factory):
    st = Store(tmp_path_factory.mktemp('db')/'multis.db')
    st.save(_chunks())
    yield st
    st.close()

def test_file_store_round_trip(tmp_path):
    p = tmp_path/'multis.db'
    with Store(p) as st: st.save(_chunks()[:10])
    with Store(p) as st:
        assert st.stats()['chunks'] == 10
        assert st._sql('PRAGMA journal_mode').fetchone()[0] == 'wal'
        assert st._sql('PRAGMA user_version').fetchone()[0] == SCHEMA_VERSION

@pytest.mark.parametrize('scopes', [['kb'], ['kb', 'user:1'], ['user:42'], ['admin'], ['kb', 'user:-100123']])
def test_scope_is_a_hard_boundary(store, scopes):
    for q in WORDS + ['admin secret', 'user:2', 'scope admin', "kb' OR scope='admin", 'name:admin', 'section_path:admin']:
        assert {h.scope for h in store.search(q, limit=50, scopes=scopes)} <= set(scopes), q

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scopes=stx.lists(stx.sampled_from(SCOPES), min_size=1, max_size=3),
       query=stx.lists(stx.sampled_from(list('"*():-^+\'') + WORDS + ['AND', 'OR', 'NOT', 'NEAR', 'user:1', ' ']),
                       max_size=12).map(''.join) | stx.text(max_size=60))
def test_random_queries_never_cross_scopes(store, scopes, query):
    hits = store.search(query, limit=20, scopes=scopes)
    assert all(h.scope in scopes for h in hits)

@given(scope=stx.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_odd_scope_strings_are_refused_or_exact(scope):
    "Any string is either refused, or searches exactly that one scope"
    try: ok = check_scopes([scope])
    except MultisError as e:
        assert 'unknown scope' in str(e); return
    assert ok == [scope]
    assert scope in ('kb', 'admin') or scope.startswith('user:')

def test_odd_scopes_give_clear_errors(store):
    for s in ["kb' OR '1'='1", 'user:1) OR (1=1', 'KB', 'user:', '%', 'admin;--', 'user:1 ', ' kb']:
        with pytest.raises(MultisError, match='unknown scope'): store.search('water', scopes=[s])

@pytest.mark.parametrize('q', ['', 'the of and what is', '"', '*', 'NEAR(', 'AND OR NOT', 'name:secret', 'x'*10_000,
                               '🌱🍅', 'полив томатов', '東京', '-water', 'water*', '^water', '(water'])
def test_bad_queries_never_raise(store, q):
    hits = store.search(q, scopes=['kb'])
    assert all(h.scope == 'kb' for h in hits)

def test_stopword_and_empty_queries_return_nothing(store):
    assert store.search('', scopes=None) == []
    assert store.search('what is the', scopes=None) == []
    assert store.search('AND OR NOT', scopes=None) == []

def test_column_filter_is_a_word(store):
    "name:secret searches the words name and secret, in every column"
    assert query_terms('name:secret') == ['name', 'secret']
    assert store.search('name:secret', limit=5)

def test_unicode_queries_find_unicode_text(tmp_path):
    with Store(tmp_path/'u.db') as st:
        st.save([DocChunk('/d/ru.md', 'Введение', 'Введение в docx4j и Open XML', scope='kb'),
                 DocChunk('/d/jp.md', '東京', '東京 タワー は 高い', scope='kb'),
                 DocChunk('/d/fr.md', 'Café', 'Le café crème du matin', scope='kb')] +
                [DocChunk(f'/d/x{i}.md', f'x{i}', f'unrelated filler {i}') for i in range(8)])
        assert [h.name for h in st.search('введение')] == ['Введение']
        assert [h.name for h in st.search('東京')] == ['東京']
        assert [h.name for h in st.search('cafe')] == ['Café']

def test_search_records_accesses_and_activation_reranks(tmp_path):
    with Store(tmp_path/'a.db') as st:
        st.save([DocChunk('/d/a.md', 'A', 'apple apple apple pie'), DocChunk('/d/b.md', 'B', 'apple crumble')] +
                [DocChunk(f'/d/x{i}.md', f'x{i}', f'filler text {i}') for i in range(8)])
        first = st.search('apple', now=1000.0)
        assert [h.name for h in first] == ['A', 'B'] and all(h.activation == 0 for h in first)
        b = first[1]
        for t in range(990, 1000): st.record_access([b.chunk_id], 'apple', now=float(t))
        again = st.search('apple', now=1000.0, record=True)
        assert again[0].name == 'B' and again[0].activation > 0
        assert again[0].score == pytest.approx(again[0].bm25 + 2.0 * again[0].activation)
        assert st._sql('SELECT count(*) FROM access_history WHERE accessed_at=1000.0').fetchone()[0] == 2

def test_access_does_not_touch_fts(tmp_path):
    "Recording an access changes no indexed column, so the FTS index stays byte-identical"
    with Store(tmp_path/'f.db') as st:
        st.save(_chunks()[:20])
        before = st._sql('SELECT * FROM chunks_fts_data ORDER BY id').fetchall()
        st.record_access([c.chunk_id for c in _chunks()[:20]], 'q')
        assert st._sql('SELECT * FROM chunks_fts_data ORDER BY id').fetchall() == before

def test_activation_query_matches_formula(tmp_path):
    from multis.retrieval.ranking import activation
    with Store(tmp_path/'act.db') as st:
        c = DocChunk('/d/a.md', 'A', 'text')
        st.save([c])
        times = [float(t) for t in range(0, 6000, 97)]   # 62 accesses: only the last 50 count
        for t in times: st.record_access([c.chunk_id], now=t)
        got = st.activations([c.chunk_id], now=7000.0, decay=0.4)[c.chunk_id]
        assert got == pytest.approx(activation(times, 7000.0, decay=0.4))
        assert got == pytest.approx(math.log(1 + sum(max(7000.0 - t, 1) ** -0.4 for t in times[-50:])))

def test_corrupt_database_is_left_untouched(tmp_path):
    p = tmp_path/'multis.db'
    data = b'SQLite format 3\x00' + bytes(range(256)) * 40
    p.write_bytes(data)
    with pytest.raises(StoreError, match='not a usable multis database'): Store(p)
    assert p.read_bytes() == data

def test_newer_schema_refused(tmp_path):
    p = tmp_path/'multis.db'
    con = sqlite3.connect(p); con.execute('PRAGMA user_version = 999'); con.close()
    with pytest.raises(StoreError, match='newer multis'): Store(p)

def test_locked_by_another_process(tmp_path, caplog):
    p = tmp_path/'multis.db'
    Store(p).close()
    holder = subprocess.Popen([sys.executable, '-c', textwrap.dedent(f"""
        import sqlite3, sys, time
        c = sqlite3.connect({str(p)!r}, isolation_level=None); c.execute('BEGIN EXCLUSIVE')
        print('locked', flush=True); time.sleep(30)""")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'locked'
        t = time.monotonic()
        with Store(p, timeout=0.5) as st:
            with pytest.raises(StoreError, match='locked by another process'):
                st.save([DocChunk('/d/a.md', 'A', 'text')])
        assert time.monotonic() - t >= 0.4   # it waited before giving up
        assert any('is locked by another process; waiting up to 0.5 s' in r.getMessage() for r in caplog.records)
    finally: holder.kill(); holder.wait()
    with Store(p) as st: assert st.save([DocChunk('/d/a.md', 'A', 'text')]) == 1

def test_node_database_migrates(tmp_path):
    p = tmp_path/'old.db'
    con = sqlite3.connect(p)
    con.executescript("""CREATE TABLE chunks (chunk_id TEXT PRIMARY KEY, file_path TEXT, page_start INT, page_end INT,
      element_type TEXT, name TEXT, content TEXT, parent_chunk_id TEXT, section_path TEXT, section_level INT,
      document_type TEXT, metadata TEXT, scope TEXT DEFAULT 'kb', activation REAL DEFAULT 0.0,
      access_count INTEGER DEFAULT 0, last_accessed TEXT, created_at TEXT, updated_at TEXT);
    CREATE VIRTUAL TABLE chunks_fts USING fts5(chunk_id UNINDEXED, name, content, section_path, tokenize='porter unicode61');
    CREATE TABLE access_history (chunk_id TEXT, accessed_at TEXT, query TEXT);""")
    for i in range(30):
        con.execute("INSERT INTO chunks(chunk_id, file_path, name, content, section_path, scope) VALUES (?,?,?,?,?,?)",
                    (f'doc:{i}', '/n/a.md', f'N{i}', f'hello world {i}', '["A"]', 'kb' if i % 2 else 'admin'))
    con.commit(); con.close()
    with Store(p) as st:
        assert st.stats()['chunks'] == 30
        assert {h.scope for h in st.search('hello', limit=50, scopes=['kb'])} == {'kb'}
        assert len(st.search('hello', limit=50)) == 30
    with Store(p) as st: assert st.stats()['chunks'] == 30   # opening again changes nothing
