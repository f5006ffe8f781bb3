"""Indexing a folder with a pool of parsing workers (issue 23): same results as one worker, Ctrl-C leaves a consistent
database, bombs stay bounded, a small folder starts no other process"""
import json, os, shutil, signal, sqlite3, subprocess, sys, time
from pathlib import Path
import pytest
from conftest import REPO
import multis.documents.indexer as ix
from multis.retrieval.store import Store
from multis.documents.indexer import IndexLimits, index_directory
from multis.core import ParseError
from multis.documents.worker import parse_worker
from test_bombs import pdf_stream_bomb
from test_indexer import long_docx

def notes(folder:Path, n:int, size:int=100_000)->list:
    "n Markdown notes of about `size` characters, each with a word of its own"
    folder.mkdir(exist_ok=True)
    body = ''.join(f'## Part {j}\nBees visit lavender and thyme in the garden, part {j}. ' * 3 + '\n' for j in range(size // 200))
    for i in range(n): (folder/f'n{i:04d}.md').write_text(f'# Note {i}\nword{i}\n\n{body}')
    return sorted(folder.glob('*.md'))

def stored(st:Store)->list:
    "Every stored chunk's id, file, scope, name, section path and text, in a stable order"
    return sorted((c.chunk_id, c.file_path, c.scope, c.name, tuple(c.section_path), c.content, c.chunk_index, c.chunk_total)
                  for f in st.files() for c in st.file_chunks(f['file_path']))

@pytest.fixture
def pools(monkeypatch):
    "The parsing pools made while the test runs"
    made, Pool = [], ix.ParsePool
    def record(size): made.append(Pool(size)); return made[-1]
    monkeypatch.setattr(ix, 'ParsePool', record)
    return made

def test_a_pool_stores_what_one_worker_stores(tmp_path, pools):
    d = tmp_path/'docs'; notes(d, 30, 450_000)                  # 13.5 MB: worth 3 workers (`START_BYTES`)
    for p in (REPO/'data').iterdir(): shutil.copy(p, d/p.name)
    (d/'empty.txt').write_text('')
    with Store(tmp_path/'one.db') as one, Store(tmp_path/'three.db') as three:
        s1 = index_directory(one, d, progress=False, limits=IndexLimits(workers=1))
        s3 = index_directory(three, d, progress=False, limits=IndexLimits(workers=3))
        assert [p.size for p in pools] == [1, 3] and len(pools[1].workers) == 3
        assert [(r.path, r.chunks) for r in s3.indexed] == [(r.path, r.chunks) for r in s1.indexed]
        assert [r.path for r in s3.indexed] == sorted(r.path for r in s3.indexed)     # in the files' order
        assert [r.error for r in s3.failed] == [r.error for r in s1.failed] == ['empty.txt: empty file']
        assert stored(three) == stored(one) and len(stored(one)) > 300
        assert three.search('word17')[0].file_path == str(d/'n0017.md')
        assert all(w.pid is None for w in pools[1].workers[1:])                      # the pool's own workers stopped
        assert len(index_directory(three, d, progress=False, limits=IndexLimits(workers=3)).unchanged) == len(s3.indexed)

def test_a_small_folder_starts_no_other_process(tmp_path, pools):
    d = tmp_path/'docs'; d.mkdir()
    for i in range(3): (d/f'{i}.md').write_text(f'# Note {i}\nBees {i}\n')
    with Store(tmp_path/'m.db') as st:
        assert len(index_directory(st, d, progress=False, limits=IndexLimits(workers=4)).indexed) == 3
        assert pools[0].workers == []                                   # plain notes: parsed in this process
        (d/'3.md').write_text('# Note 3\n- a list\n')                   # not plain Markdown: to a worker
        s = index_directory(st, d, progress=False, limits=IndexLimits(workers=4))
        assert (len(s.indexed), len(s.unchanged)) == (1, 3) and st.search('list')[0].file_path == str(d/'3.md')
    assert [p.size for p in pools] == [1, 1] and pools[1].workers == [parse_worker()]   # this process's own worker only

def test_plain_notes_are_parsed_here_while_the_workers_start(tmp_path, pools, monkeypatch):
    "A big folder of plain notes: the first parsed in this process until a worker is up, the rest by the workers; the same rows"
    d = tmp_path/'docs'; notes(d, 300, 20_000)                              # 6 MB: the pool is warmed (`START_BYTES`)
    here, parse_here = [], ix.parse_here
    monkeypatch.setattr(ix, 'parse_here', lambda p, *a: here.append(p) or parse_here(p, *a))
    parse_worker().stop()                                                   # as in a new `multis index` process
    with Store(tmp_path/'mixed.db') as mixed, Store(tmp_path/'workers.db') as workers:
        s = index_directory(mixed, d, progress=False, limits=IndexLimits(workers=2))
        assert pools[0].warming and len(s.indexed) == 300 and 0 < len(here) < 300
        assert here == [p for p in sorted(d.glob('*.md'))][:len(here)]     # the first files, until a worker was up
        monkeypatch.setattr(ix, 'cheap_to_parse', lambda *a: False)
        index_directory(workers, d, progress=False, limits=IndexLimits(workers=2))
        assert len(here) == len(set(here)) and stored(mixed) == stored(workers)

# --- Ctrl-C in the middle of a pooled run

def workers_of(home:Path)->list:
    "Processes still running with this multis home in their environment (the parsing workers inherit it)"
    mine = f"MULTIS_HOME={home}".encode()
    found = []
    for p in Path('/proc').iterdir():
        try:
            if p.name.isdigit() and mine in (p/'environ').read_bytes().split(b'\0'): found.append(int(p.name))
        except OSError: pass
    return found

def consistency(db:Path)->dict:
    "SQLite's checks, and every stored file's chunks as its `files` row counts them"
    con = sqlite3.connect(db)
    try:
        con.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
        files = dict(con.execute('SELECT file_path, chunks FROM files'))
        chunks = dict(con.execute('SELECT file_path, count(*) FROM chunks GROUP BY file_path'))
        fts = con.execute('SELECT count(*) FROM chunks_fts').fetchone()[0]
        return dict(check=con.execute('PRAGMA quick_check').fetchone()[0], files=files, chunks=chunks,
                    fts=fts, rows=sum(chunks.values()))
    finally: con.close()

def test_ctrl_c_in_a_pooled_run_leaves_a_consistent_database(tmp_path):
    home, d = tmp_path/'home', tmp_path/'docs'; home.mkdir()
    (home/'config.json').write_text(json.dumps({'indexing': {'workers': 2}}))
    ns = [str(f) for f in notes(d, 1500, 8_000)]; n = len(ns)
    env, db = {**os.environ, 'MULTIS_HOME': str(home)}, home/'multis.db'
    cmd = [str(Path(sys.executable).parent/'multis'), 'index', str(d), '--scope', 'kb', '--quiet']
    # Ctrl-C's default action in the child, even when these tests run with SIGINT ignored (started with `&` by a shell
    # without job control, as a CI script may be): an ignored signal stays ignored through exec
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    def files_stored():
        try:
            con = sqlite3.connect(f'file:{db}?mode=ro', uri=True)
            try: return con.execute('SELECT count(*) FROM files').fetchone()[0]
            finally: con.close()
        except sqlite3.Error: return 0
    deadline = time.monotonic() + 120
    while files_stored() < 50 and p.poll() is None and time.monotonic() < deadline: time.sleep(0.01)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode != 0 and 'KeyboardInterrupt' in err, (p.returncode, out, err[-2000:])
    c = consistency(db)
    assert c['check'] == 'ok' and c['files'] == c['chunks'] and c['fts'] == c['rows']
    assert 0 < len(c['files']) < n and sorted(c['files']) == ns[:len(c['files'])]   # whole files, in order, and not all
    t = time.monotonic()
    while workers_of(home) and time.monotonic() - t < 10: time.sleep(0.05)
    assert workers_of(home) == []                                                   # no parsing process left behind
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"{n - len(c['files'])} indexed" in r.stdout and f"{len(c['files'])} unchanged" in r.stdout
    assert len(consistency(db)['files']) == n

# --- bombs in a pool: each file under its own memory and time caps

SCRIPT = '''
import json, resource, sys
from multis.retrieval.store import Store
from multis.documents.indexer import IndexLimits, index_directory
import multis.documents.indexer as ix
sizes, Pool = [], ix.ParsePool
def hwm():   # this process's peak memory in MB (ru_maxrss would also count the pytest process this one was forked from)
    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')) / 1024
ix.ParsePool = lambda n: sizes.append(n) or Pool(n)
with Store(sys.argv[1]) as st:
    s = index_directory(st, sys.argv[2], 'kb', progress=False,
                        limits=IndexLimits(workers=2, max_memory_mb=200, timeout=5, max_zip_ratio=10**6))
print(json.dumps(dict(indexed=[r.path for r in s.indexed], failed=[r.error for r in s.failed], sizes=sizes,
                      worker_mb=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                      parent_mb=hwm())))
'''

def test_bombs_in_a_pool_fail_alone_and_stay_bounded(tmp_path):
    "A memory bomb and a slow file, between notes, in a pool of two: each fails alone, its worker is replaced"
    d = tmp_path/'docs'; good = notes(d, 24, 400_000)
    pdf_stream_bomb(d/'n0003-bomb.pdf', 20)                       # ~700 MB to parse: over the 200 MB cap
    long_docx(d/'n0010-slow.docx', 80_000)                        # parses for 8 s or more (the bomb fails in 1-2 s)
    r = subprocess.run([sys.executable, '-c', SCRIPT, str(tmp_path/'m.db'), str(d)], capture_output=True, text=True, timeout=300)
    res = json.loads(r.stdout)
    assert res['sizes'] == [2]
    assert res['failed'] == ['n0003-bomb.pdf: needs more than 200 MB to parse (indexing.max_parse_memory_mb)',
                             'n0010-slow.docx: parsing took longer than 5 s; skipped (indexing.parse_timeout)']
    assert res['indexed'] == [str(p) for p in good]                # every note, those after the bombs too
    assert res['worker_mb'] < 450 and res['parent_mb'] < 300

# --- embedding overlaps with parsing and storing

def test_vectors_are_made_while_files_are_parsed_and_stored(tmp_path):
    from multis.retrieval.embed import HashEmbedder
    import threading
    d, events = tmp_path/'docs', []
    notes(d, 30)
    with Store(tmp_path/'m.db') as st:
        st.embedder, store = HashEmbedder(16), st.replace_files
        embed = st.embedder.embed
        st.embedder.embed = lambda texts: events.append(('embed', threading.current_thread().name)) or embed(texts)
        st.replace_files = lambda files, **kw: events.append(('store', kw)) or store(files, **kw)
        s = index_directory(st, d, progress=False, per_transaction=5, limits=IndexLimits(workers=2))
        assert st.vector_counts() == {'hash:16': s.chunks} and s.chunks > 300
        assert all(kw == {'embed': False} for k, kw in events if k == 'store')            # not embedded inside the transaction
        assert {name for k, name in events if k == 'embed'} == {'multis-embed-index'}
        stores = [i for i, (k, _) in enumerate(events) if k == 'store']
        assert len(stores) == 6 and events.index(('embed', 'multis-embed-index')) < stores[-1]   # embedding began before the last batch
        events.clear()
        assert len(index_directory(st, d, progress=False).unchanged) == 30 and events == []

# --- a worker that reads only text does not load MuPDF or python-docx

@pytest.mark.skipif(not Path('/proc/self/maps').exists(), reason='needs /proc')
def test_a_text_only_worker_does_not_load_mupdf(tmp_path):
    from multis.documents.worker import ParseWorker
    (tmp_path/'a.md').write_text('# Bees\nBees like lavender.\n')
    w = ParseWorker()
    try:
        chunks, sha = w.parse(tmp_path/'a.md', IndexLimits(), 'kb', True)
        assert [c.name for c in chunks] == ['Bees'] and len(sha) == 64
        assert 'mupdf' not in Path(f'/proc/{w.pid}/maps').read_text().lower()
        with pytest.raises(ParseError, match='not a readable PDF'):
            (tmp_path/'b.pdf').write_bytes(b'%PDF-1.4 broken'); w.parse(tmp_path/'b.pdf', IndexLimits())
        assert 'mupdf' in Path(f'/proc/{w.pid}/maps').read_text().lower()      # loaded by the first file that needs it
    finally: w.stop()

def test_a_batch_of_files_fails_one_file_at_a_time(tmp_path):
    "Files sent as one job: a file over its time limit fails alone, the process is replaced, the files after it are parsed"
    from multis.documents.worker import ParseWorker
    fs = [tmp_path/f'{i}.md' for i in range(4)]
    for i, f in enumerate(fs): f.write_text(f'# Note {i}\nBees.\n')
    fs[1].write_text(''.join(f'# H{i}\n' + '- item *a* `b` [c](d)\n' * 20 for i in range(20_000)))   # parses for seconds
    w = ParseWorker()
    try:
        w.parse(fs[0], IndexLimits()); pid = w.pid
        res = w.parse_many(fs, IndexLimits(timeout=0.3), 'kb', True)
        assert [r[0][0].name if isinstance(r, tuple) else str(r) for r in res] == \
            ['Note 0', '1.md: parsing took longer than 0.3 s; skipped (indexing.parse_timeout)', 'Note 2', 'Note 3']
        assert w.pid not in (None, pid)
    finally: w.stop()
