"`multis migrate` through its Python API: backups, in-place upgrades of schema 0 and 2, rebuilds, bad inputs, interruptions"
import json, os, shutil, sqlite3, sys, types
from datetime import datetime
from pathlib import Path
import numpy as np
import pytest
import multis.retrieval.migrate as mm
import multis.documents.indexer as ix
from multis.core import DocChunk, MultisError
from multis.retrieval.store import SCHEMA_VERSION, Store, StoreError
from multis.retrieval.vectors import text_hash, vector_text
from multis.documents.indexer import index_file, index_upload
from multis.retrieval.migrate import MigrationReport, migrate, db_counts, backup_path

DATA = Path(__file__).resolve().parents[1]/'data'
T = datetime(2026, 1, 2, 3, 4, 5)
NEW_COLS = ('chunk_index', 'chunk_total', 'token_count')

MEMORY = DocChunk('/chats/42/memory.md', 'Memory 2026-01-01', 'Alice prefers green tea in the morning.',
                  element_type='memory_summary', document_type='conversation', scope='user:42',
                  section_path=['Memory', '2026-01-01'], metadata={'chat_id': '42'})
MESSAGE = DocChunk('/chats/admin/log/2026-01-01.jsonl', 'you, today, 09:00', 'Remind me to water the ferns.',
                   element_type='paragraph', document_type='conversation', scope='admin')

def counts(p:Path)->dict:
    con = sqlite3.connect(p)
    try: return db_counts(con)
    finally: con.close()

def rows(p:Path, where:str='1', args=())->list:
    "Every column but `id` of the chunks matching `where`, sorted by chunk id"
    con = sqlite3.connect(p); con.row_factory = sqlite3.Row
    try: return sorted(({k: r[k] for k in r.keys() if k != 'id'} for r in con.execute(f'SELECT * FROM chunks WHERE {where}', args)),
                       key=lambda d: d['chunk_id'])
    finally: con.close()

def downgrade(p:Path, version:int=2):
    "Make a current database look like one of schema 2, as nbs/21_retrieval.store.ipynb's `_downgrade` does"
    con = sqlite3.connect(p, isolation_level=None)
    for t in ('embeddings_ai', 'embeddings_ad', 'embeddings_au'): con.execute(f'DROP TRIGGER {t}')
    for t in ('embeddings', 'vector_state'): con.execute(f'DROP TABLE {t}')
    for c in NEW_COLS: con.execute(f'ALTER TABLE chunks DROP COLUMN {c}')
    con.execute(f'PRAGMA user_version = {version}'); con.close()

def legacy_db(p:Path, file_path:str='/n/a.md')->Path:
    "A database of the Node.js multis (no schema version), as in nbs/21_retrieval.store.ipynb"
    con = sqlite3.connect(p)
    con.executescript(f"""CREATE TABLE chunks (chunk_id TEXT PRIMARY KEY, file_path TEXT, page_start INT, page_end INT,
      element_type TEXT, name TEXT, content TEXT, parent_chunk_id TEXT, section_path TEXT, section_level INT,
      document_type TEXT, metadata TEXT, scope TEXT DEFAULT 'kb', activation REAL DEFAULT 0.0,
      access_count INTEGER DEFAULT 0, last_accessed TEXT, created_at TEXT, updated_at TEXT);
    CREATE VIRTUAL TABLE chunks_fts USING fts5(chunk_id UNINDEXED, name, content, section_path, tokenize='porter unicode61');
    CREATE TABLE access_history (chunk_id TEXT, accessed_at TEXT, query TEXT);
    INSERT INTO chunks VALUES ('doc:1', '{file_path}', NULL, NULL, 'section', 'Bees', 'Bees like lavender.', NULL,
      '["Garden","Bees"]', 2, 'md', '{{}}', 'kb', 0.5, 1, '2025-01-01T00:00:00Z', '2025-01-01', '2025-01-01');
    INSERT INTO chunks VALUES ('doc:2', '/chats/7/memory.md', NULL, NULL, 'memory_summary', 'Memory', 'Bob likes sailing.',
      NULL, '["Memory"]', 0, 'conversation', '{{}}', 'user:7', 0, 0, NULL, '2025-01-01', '2025-01-01');
    INSERT INTO access_history VALUES ('doc:1', '2025-01-01T00:00:00Z', 'bees');
    INSERT INTO access_history VALUES ('doc:2', '2025-01-02T00:00:00Z', 'sailing');""")
    con.commit(); con.close()
    return p

@pytest.fixture
def library(tmp_path):
    "The sample documents copied to a folder, indexed into kb, with chat memory, an upload and accesses (schema 3)"
    docs = tmp_path/'docs'; docs.mkdir()
    for p in DATA.iterdir(): shutil.copy(p, docs/p.name)
    db = tmp_path/'multis.db'
    with Store(db) as st:
        for p in sorted(docs.iterdir()): index_file(st, p, 'kb')
        index_upload(st, b'# Packing\n\nTake a rain jacket.\n', 'packing.md', 'user:42')
        st.save([MEMORY, MESSAGE])
        garden = st.file_chunks(str(docs/'garden-guide.md'))
        st.record_access([garden[0].chunk_id, garden[-1].chunk_id, MEMORY.chunk_id], 'tea', now=1000.0)
        st.record_access([garden[0].chunk_id], 'bees', now=2000.0)
    return db, docs, garden

def fresh_chunks(path:Path)->int:
    "How many chunks indexing this file now gives"
    with Store(':memory:') as st: return index_file(st, path, 'kb').chunks

def no_temp_files(folder:Path)->bool:
    return not [p for p in folder.iterdir() if '.rebuild-' in p.name or p.name.endswith('.part')]

# ---------------------------------------------------------------- in place

def test_v2_upgraded_in_place_with_a_backup(library):
    db, docs, garden = library
    downgrade(db)
    old, old_rows = counts(db), rows(db)
    r = migrate(db, now=T)
    assert isinstance(r, MigrationReport) and not r.rebuilt
    bak = db.with_name('multis.db.backup-20260102-030405')
    assert r.backup == str(bak) and counts(bak) == old and rows(bak) == old_rows
    new = counts(db)
    assert (old['schema'], new['schema']) == (2, SCHEMA_VERSION)
    assert new['chunks'] == old['chunks'] and new['access_history'] == old['access_history'] == 4
    assert new['files'] == old['files'] == 5 and new['embeddings'] == 0
    assert (r.before, r.after) == (old, new)
    assert str(r).splitlines() == ['backed up to multis.db.backup-20260102-030405',
                                   f"schema 2 -> 3: kept {sum(old['chunks'].values())} chunks in 3 scopes, 5 files, 4 accesses"]
    assert json.loads(json.dumps(r.to_json()))['before']['schema'] == 2
    with Store(db) as st:
        assert [(c.chunk_index, c.chunk_total) for c in st.file_chunks(str(docs/'garden-guide.md'))] == [(i, len(garden)) for i in range(len(garden))]
        assert [h.chunk_id for h in st.search('green tea', scopes=['user:42'], record=False)] == [MEMORY.chunk_id]

def test_twice_is_safe(library):
    db, _, _ = library
    downgrade(db)
    r1, r2 = migrate(db, now=T), migrate(db, now=T)
    assert Path(r2.backup).name == 'multis.db.backup-20260102-030405-2' and Path(r1.backup).exists()
    assert r2.before == r2.after == r1.after
    assert 'already at schema 3, nothing to change' in str(r2)
    assert counts(Path(r2.backup)) == r1.after

def test_legacy_node_database(tmp_path):
    db = legacy_db(tmp_path/'old.db')
    r = migrate(db, now=T)
    assert (r.before['schema'], r.after['schema']) == (0, SCHEMA_VERSION)
    assert r.before['chunks'] == r.after['chunks'] == {'kb': 1, 'user:7': 1}
    assert r.before['files'] is None and r.after['access_history'] == 2
    assert counts(Path(r.backup))['schema'] == 0
    with Store(db) as st:
        assert st.get('doc:1').section_path == ['Garden', 'Bees']
        assert [h.chunk_id for h in st.search('lavender', record=False)] == ['doc:1']

def test_backup_holds_writes_still_in_the_wal(tmp_path):
    "A database copied mid-session (its -wal file holding the latest writes) is backed up with them"
    live, db = tmp_path/'live', tmp_path/'copy'
    live.mkdir(); db.mkdir()
    with Store(live/'multis.db') as st:
        st.save([MEMORY, MESSAGE])
        assert (live/'multis.db-wal').stat().st_size > 0
        for n in ('multis.db', 'multis.db-wal'): shutil.copy(live/n, db/n)
    r = migrate(db/'multis.db', now=T)
    assert counts(Path(r.backup))['chunks'] == {'admin': 1, 'user:42': 1} == r.after['chunks']

def test_backup_keeps_private_permissions(library):
    db, _, _ = library
    os.chmod(db, 0o600)
    r = migrate(db, now=T)
    assert Path(r.backup).stat().st_mode & 0o777 == 0o600
    r = migrate(db, rebuild=True, now=T)
    assert Path(r.backup).stat().st_mode & 0o777 == 0o600 and db.stat().st_mode & 0o777 == 0o600

# ---------------------------------------------------------------- rebuild

def test_rebuild_from_files(library):
    db, docs, garden = library
    vec = np.ones(4, dtype=np.float32).tobytes()
    with Store(db) as st, st.transaction():
        for c, h in [(garden[0], text_hash(vector_text(garden[0].name, garden[0].content))), (MEMORY, 'stale'), (garden[-1], 'x')]:
            st._sql('INSERT INTO embeddings(chunk_id, scope, model, text_hash, vector) VALUES (?,?,?,?,?)',
                    (c.chunk_id, c.scope, 'hash-4', h, vec))
    old, kept_rows = counts(db), rows(db, "scope != 'kb' OR file_path LIKE '%recipes.txt' OR file_path LIKE '%travel-notes.docx'")
    text = (docs/'garden-guide.md').read_text()
    (docs/'garden-guide.md').write_text(text[:len(text)//2])        # shorter: its last chunks go
    (docs/'recipes.txt').unlink()                                    # missing: its chunks are kept
    (docs/'travel-notes.docx').write_bytes(b'no longer a docx')      # unreadable: its chunks are kept
    r = migrate(db, rebuild=True, now=T)
    assert no_temp_files(db.parent) and not Path(f'{db}-wal').exists() and not Path(f'{db}-shm').exists()
    assert r.rebuilt and r.before == old and counts(Path(r.backup)) == old
    assert sorted(Path(p).name for p in r.reindexed) == ['garden-guide.md', 'multis-handbook.pdf']
    assert [Path(p).name for p in r.missing] == ['recipes.txt']
    assert [Path(p).name for p, _ in r.failed] == ['travel-notes.docx'] and 'travel-notes.docx' in r.failed[0][1]
    assert rows(db, "scope != 'kb' OR file_path LIKE '%recipes.txt' OR file_path LIKE '%travel-notes.docx'") == kept_rows
    assert r.kept == len(kept_rows)
    after = counts(db)
    assert after == r.after and after['schema'] == SCHEMA_VERSION
    n_garden = fresh_chunks(docs/'garden-guide.md')
    assert n_garden < len(garden)
    assert after['chunks']['kb'] == old['chunks']['kb'] - len(garden) + n_garden
    assert {k: v for k, v in after['chunks'].items() if k != 'kb'} == {k: v for k, v in old['chunks'].items() if k != 'kb'}
    with Store(db) as st:
        assert [c.chunk_total for c in st.file_chunks(str(docs/'garden-guide.md'))] == [n_garden] * n_garden
        assert st.get(garden[-1].chunk_id) is None
        hist = st._sql('SELECT chunk_id, accessed_at FROM access_history ORDER BY accessed_at, chunk_id').fetchall()
        assert [tuple(h) for h in hist] == sorted([(garden[0].chunk_id, 1000.0), (MEMORY.chunk_id, 1000.0), (garden[0].chunk_id, 2000.0)], key=lambda t: (t[1], t[0]))
        assert st._sql('SELECT access_count, last_accessed FROM chunks WHERE chunk_id=?', (garden[0].chunk_id,)).fetchone()[:] == (2, 2000.0)
        assert [r_[0] for r_ in st._sql('SELECT chunk_id FROM embeddings')] == [garden[0].chunk_id]
        assert st._sql("SELECT gen FROM vector_state WHERE scope='kb'").fetchone()[0] > 1
        assert [h.chunk_id for h in st.search('green tea', scopes=['user:42'], record=False)] == [MEMORY.chunk_id]
        assert st.search('rain jacket', scopes=['user:42'], record=False)[0].file_path == 'upload:user:42/packing.md'
        assert st.file_state('upload:user:42/packing.md')['scope'] == 'user:42'
        assert st._sql('PRAGMA journal_mode').fetchone()[0] == 'wal'
    s = str(r)
    assert 'rebuilt (schema 3 -> 3) from 2 files: 1 missing, 1 unreadable' in s and f"missing: {docs/'recipes.txt'}" in s

def test_rebuild_of_a_v2_database_twice(library):
    db, docs, _ = library
    downgrade(db)
    old = counts(db)
    for n in ('multis.db.rebuild-tmp', 'multis.db.rebuild-src', 'multis.db.rebuild-tmp-wal'):
        (db.parent/n).write_bytes(b'left by a run that was killed')
    r1 = migrate(db, rebuild=True, now=T)
    assert (r1.before['schema'], r1.after['schema']) == (2, SCHEMA_VERSION)
    assert r1.after['chunks'] == old['chunks'] and r1.after['access_history'] == old['access_history']
    assert len(r1.reindexed) == 4 and r1.missing == r1.failed == []
    r2 = migrate(db, rebuild=True, now=T)
    assert r2.before == r1.after == r2.after and no_temp_files(db.parent)

def test_rebuild_of_a_legacy_database(tmp_path):
    "Without a files table, the files that non-conversation chunks came from are read again; memory is copied"
    src = tmp_path/'garden-guide.md'; shutil.copy(DATA/'garden-guide.md', src)
    db = legacy_db(tmp_path/'old.db', str(src))
    r = migrate(db, rebuild=True, now=T)
    assert r.reindexed == [str(src)] and r.kept == 1
    assert r.after['chunks'] == {'kb': fresh_chunks(src), 'user:7': 1}
    assert r.after['access_history'] == 1   # the memory's; doc:1 was a chunk id the current indexer does not make
    with Store(db) as st: assert st.search('sailing', record=False)[0].chunk_id == 'doc:2'

# ---------------------------------------------------------------- bad inputs

def test_missing_database(tmp_path):
    with pytest.raises(MultisError, match=r'nothing\.db: no such database; nothing to migrate'):
        migrate(tmp_path/'nothing.db')
    assert list(tmp_path.iterdir()) == []

@pytest.mark.parametrize('rebuild', [False, True])
def test_not_a_database_is_left_untouched(tmp_path, rebuild):
    p = tmp_path/'multis.db'
    p.write_bytes(b'SQLite format 2? no: just notes\n' * 200)
    with pytest.raises(StoreError, match='not a usable multis database.*left untouched'): migrate(p, rebuild=rebuild)
    assert p.read_bytes() == b'SQLite format 2? no: just notes\n' * 200 and list(tmp_path.iterdir()) == [p]

@pytest.mark.parametrize('rebuild', [False, True])
def test_newer_schema_is_refused(tmp_path, rebuild):
    p = tmp_path/'multis.db'
    Store(p).close()
    con = sqlite3.connect(p); con.execute(f'PRAGMA user_version = {SCHEMA_VERSION + 1}'); con.close()
    data = p.read_bytes()
    with pytest.raises(StoreError, match=f'made by a newer multis \\(schema {SCHEMA_VERSION + 1}'): migrate(p, rebuild=rebuild)
    assert p.read_bytes() == data and sorted(x.name for x in tmp_path.iterdir()) == ['multis.db']

def test_a_stranger_database_gets_no_tables(tmp_path):
    p = tmp_path/'photos.db'
    con = sqlite3.connect(p); con.execute('CREATE TABLE photos(x)'); con.commit(); con.close()
    with pytest.raises(MultisError, match='no multis tables'): migrate(p)
    con = sqlite3.connect(p)
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ['photos']; con.close()

def test_backup_names_never_collide(tmp_path):
    db = tmp_path/'multis.db'
    for n in ('multis.db.backup-20260102-030405', 'multis.db.backup-20260102-030405-2'): (tmp_path/n).touch()
    assert backup_path(db, T).name == 'multis.db.backup-20260102-030405-3'

def test_odd_paths_and_symlinks(tmp_path):
    "A folder name with URI characters works; a symlinked database is rebuilt in place of its target, keeping the link"
    d = tmp_path/'my db #1?'; d.mkdir()
    real = legacy_db(d/'real.db'); link = tmp_path/'multis.db'; link.symlink_to(real)
    r = migrate(link, rebuild=True, now=T)
    assert link.is_symlink() and r.db == str(real) and counts(link)['schema'] == SCHEMA_VERSION
    assert Path(r.backup).parent == d

def test_database_being_written_by_another_process(library, monkeypatch):
    "A rebuild waits for the write lock, then gives up clearly before making anything"
    db, _, _ = library
    lock = mm._write_lock
    monkeypatch.setattr(mm, '_write_lock', lambda p: lock(p, timeout=0.2))
    other = sqlite3.connect(db, isolation_level=None); other.execute('BEGIN IMMEDIATE')
    try:
        with pytest.raises(StoreError, match='locked by another process'): migrate(db, rebuild=True, now=T)
    finally: other.execute('ROLLBACK'); other.close()
    assert sorted(p.name for p in db.parent.iterdir() if p.name.startswith('multis.db')) == ['multis.db']

def test_backup_that_cannot_be_written(library, monkeypatch):
    db, _, _ = library
    downgrade(db)
    data = db.read_bytes()
    def full(src, dst): raise sqlite3.OperationalError('database or disk is full')
    monkeypatch.setattr(mm, '_copy_db', full)
    with pytest.raises(MultisError, match=r'cannot make the backup \(database or disk is full\); nothing was changed'): migrate(db, now=T)
    assert db.read_bytes() == data and sorted(p.name for p in db.parent.iterdir() if p.name.startswith('multis.db')) == ['multis.db']

# ---------------------------------------------------------------- interruptions

def test_interrupted_rebuild_leaves_the_original(library, monkeypatch):
    db, _, _ = library
    downgrade(db)
    data, calls, read = db.read_bytes(), [], ix._read
    def read_then_stop(parse, path, *args):
        calls.append(path)
        if len(calls) == 2: raise KeyboardInterrupt       # Ctrl-C while the pool reads the second file
        return read(parse, path, *args)
    monkeypatch.setattr(ix, '_read', read_then_stop)
    with pytest.raises(KeyboardInterrupt): migrate(db, rebuild=True, now=T)
    assert db.read_bytes() == data and no_temp_files(db.parent)
    monkeypatch.undo()
    r = migrate(db, rebuild=True, now=T)
    assert r.before['schema'] == 2 and r.after['chunks'] == counts(Path(r.backup))['chunks']

def test_failed_check_leaves_the_original(library, monkeypatch):
    db, _, _ = library
    data = db.read_bytes()
    monkeypatch.setattr(mm, '_check_new', lambda *a: (_ for _ in ()).throw(MultisError('check failed')))
    with pytest.raises(MultisError, match='check failed'): migrate(db, rebuild=True, now=T)
    assert db.read_bytes() == data and no_temp_files(db.parent)

def test_interrupted_upgrade_in_place_is_rolled_back(library, monkeypatch):
    db, _, _ = library
    downgrade(db)
    old = counts(db)
    def stop(self): raise KeyboardInterrupt
    monkeypatch.setattr(Store, '_fill_chunk_metadata', stop)
    with pytest.raises(KeyboardInterrupt): migrate(db, now=T)
    assert counts(db) == old
    monkeypatch.undo()
    assert migrate(db, now=T).after['schema'] == SCHEMA_VERSION

def test_upgrade_that_loses_rows_is_undone(library, monkeypatch):
    db, _, _ = library
    downgrade(db)
    old, old_rows = counts(db), rows(db)
    monkeypatch.setattr(Store, '_fill_chunk_metadata', lambda self: self._sql("DELETE FROM chunks WHERE scope = 'admin'"))
    with pytest.raises(MultisError, match=r'admin chunks 1 -> 0\); restored the database from multis\.db\.backup-20260102-030405'):
        migrate(db, now=T)
    assert counts(db) == old and rows(db) == old_rows

# ---------------------------------------------------------------- vectors

class Embedder:
    "The least an embedder needs here"
    name, dim = 'hash-4', 4

def test_embedder_is_run_on_the_new_store(library, monkeypatch):
    "With an embedder, `multis.retrieval.vectors.embed_pending(store, embedder)` runs on the new store (a stand-in module here)"
    db, _, _ = library
    seen = []
    def embed_pending(st, embedder, **kw):
        seen.append((st.path, embedder)); return st._sql('SELECT count(*) FROM chunks').fetchone()[0]
    monkeypatch.setitem(sys.modules, 'multis.retrieval.vectors', types.SimpleNamespace(embed_pending=embed_pending))
    e = Embedder()
    r = migrate(db, rebuild=True, now=T, embedder=e)
    assert seen == [(str(db.with_name('multis.db.rebuild-tmp')), e)] and r.embedded == sum(r.after['chunks'].values())
    r = migrate(db, now=T, embedder=e)
    assert seen[-1] == (str(db), e) and f'embedded {r.embedded} chunks' in str(r)

def test_real_vectors(library):
    pytest.importorskip('multis.retrieval.vectors'); embed = pytest.importorskip('multis.retrieval.embed')
    db, _, _ = library
    downgrade(db)
    r = migrate(db, rebuild=True, now=T, embedder=embed.HashEmbedder(16))
    assert r.embedded == sum(r.after['chunks'].values()) == r.after['embeddings']
