"Watched folders with real files: the store follows creates, changes, renames and deletes"
import logging, time
from pathlib import Path
import pytest
from multis.core import MultisError
from multis.retrieval.store import Store
from multis.documents.watch import Watcher, watch_entries

DEBOUNCE = 0.3

def until(cond, timeout=8):
    "Poll `cond` until it is true or the deadline passes"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond(): return True
        time.sleep(0.05)
    return cond()

@pytest.fixture
def setup(tmp_path):
    w = tmp_path/'watched'; w.mkdir()
    (w/'a.md').write_text('# Alpha\nthe aardvark sleeps\n')
    cfg = {'watch': [{'path': str(w), 'scope': 'kb', 'recursive': True}], 'indexing': {'max_file_mb': 1}}
    st = Store(tmp_path/'m.db')
    yield w, cfg, st, tmp_path/'m.db'
    st.close()

def paths(st): return sorted(Path(f['file_path']).name for f in st.files())
def names(st, q): return [h.name for h in st.search(q)]

def test_initial_scan_and_changes(setup):
    w, cfg, st, db = setup
    with Watcher(db, cfg, debounce=DEBOUNCE) as wt:
        assert wt.ready.wait(10) and paths(st) == ['a.md']
        (w/'b.md').write_text('# Beta\nthe badger digs\n')                       # created
        assert until(lambda: names(st, 'badger') == ['Beta'])
        (w/'b.md').write_text('# Beta\nthe badger now swims\n')                  # modified
        assert until(lambda: names(st, 'swims') == ['Beta'])
        assert names(st, 'digs') == []
        (w/'b.md').rename(w/'c.md')                                               # renamed
        assert until(lambda: paths(st) == ['a.md', 'c.md'])
        assert st.search('swims')[0].file_path == str(w/'c.md')
        (w/'a.md').unlink()                                                       # deleted
        assert until(lambda: paths(st) == ['c.md'])
        assert names(st, 'aardvark') == []

def test_subfolders_hidden_and_unsupported(setup):
    w, cfg, st, db = setup
    with Watcher(db, cfg, debounce=DEBOUNCE) as wt:
        assert wt.ready.wait(10)
        (w/'sub').mkdir(); (w/'sub'/'d.md').write_text('# Delta\ndolphins\n')
        (w/'.hidden.md').write_text('# Hidden\ndolphins\n'); (w/'x.exe').write_bytes(b'MZ')
        (w/'~$lock.docx').write_bytes(b'lock')
        assert until(lambda: names(st, 'dolphins') == ['Delta'])
        time.sleep(DEBOUNCE * 3)
        assert paths(st) == ['a.md', 'd.md']
        (w/'sub').rename(w.parent/'away')                                        # a folder moved out
        assert until(lambda: paths(st) == ['a.md'])

def test_non_recursive(setup):
    w, cfg, st, db = setup
    cfg['watch'][0]['recursive'] = False
    (w/'sub').mkdir(); (w/'sub'/'deep.md').write_text('# Deep\nsubmarine\n')
    with Watcher(db, cfg, debounce=DEBOUNCE) as wt:
        assert wt.ready.wait(10) and paths(st) == ['a.md']
        (w/'top.md').write_text('# Top\nkite\n')
        assert until(lambda: paths(st) == ['a.md', 'top.md'])

def test_bad_file_logged_others_indexed(setup, caplog):
    w, cfg, st, db = setup
    with caplog.at_level(logging.ERROR, logger='multis.documents.watch'), Watcher(db, cfg, debounce=DEBOUNCE) as wt:
        assert wt.ready.wait(10)
        (w/'broken.pdf').write_bytes(b'%PDF-1.4 this is not a pdf')
        (w/'big.txt').write_text('x' * (2 * 2**20))
        (w/'good.md').write_text('# Good\ngiraffes\n')
        assert until(lambda: names(st, 'giraffes') == ['Good'])
        assert until(lambda: {Path(p).name for p, _ in wt.errors} >= {'broken.pdf', 'big.txt'})
        errs = dict((Path(p).name, e) for p, e in wt.errors)
        assert 'size cap' in errs['big.txt'] and errs['broken.pdf'].startswith('broken.pdf')
        assert any('broken.pdf' in r.getMessage() for r in caplog.records)
        (w/'late.md').write_text('# Late\nlemurs\n')                              # still running
        assert until(lambda: names(st, 'lemurs') == ['Late'])
        assert wt.worker.is_alive()

def test_debounce_many_writes_one_index(setup):
    w, cfg, st, db = setup
    with Watcher(db, cfg, debounce=0.5) as wt:
        assert wt.ready.wait(10)
        for i in range(20):
            (w/'busy.md').write_text(f'# Busy\nversion {i} of the hummingbird\n')
            time.sleep(0.01)
        assert until(lambda: names(st, 'hummingbird') == ['Busy'])
        time.sleep(1.0)
        busy = [s for p, s in wt.done if Path(p).name == 'busy.md']
        assert busy == ['indexed']
        assert 'version 19' in st.search('hummingbird')[0].content

def test_unchanged_rule(setup):
    w, cfg, st, db = setup
    with Watcher(db, cfg, debounce=DEBOUNCE) as wt:
        assert wt.ready.wait(10); wt.done.clear()
        (w/'a.md').write_text((w/'a.md').read_text())   # saved again, same bytes: new mtime, hashed, skipped
        assert until(lambda: any(Path(p).name == 'a.md' for p, _ in wt.done))
    assert [s for p, s in wt.done if Path(p).name == 'a.md'] == ['unchanged']

def test_scan_removes_files_deleted_while_stopped(setup):
    w, cfg, st, db = setup
    with Watcher(db, cfg, debounce=DEBOUNCE) as wt: assert wt.ready.wait(10)
    assert paths(st) == ['a.md']
    (w/'a.md').unlink()
    with Watcher(db, cfg, debounce=DEBOUNCE) as wt: assert wt.ready.wait(10)
    assert paths(st) == []

def test_bad_entries_skipped(tmp_path, caplog):
    with caplog.at_level(logging.ERROR, logger='multis.documents.watch'):
        es = watch_entries({'watch': [{'path': str(tmp_path/'nope')}, {'path': str(tmp_path), 'scope': 'all'}, 'x',
                                      {'path': str(tmp_path), 'scope': 'admin', 'recursive': False}]})
    assert es == [dict(path=tmp_path, scope='admin', recursive=False)]
    assert len(caplog.records) == 3 and 'not a folder' in caplog.records[0].getMessage()

def test_stop_is_prompt(setup):
    w, cfg, st, db = setup
    wt = Watcher(db, cfg, debounce=5).start()
    assert wt.ready.wait(10)
    (w/'pending.md').write_text('# P\npending\n')
    t = time.monotonic(); wt.stop()
    assert time.monotonic() - t < 3 and not wt.worker.is_alive()

def test_path_check_refuses_links_into_denied_folders(setup, tmp_path):
    w, cfg, st, db = setup
    secret = tmp_path/'memory'; secret.mkdir()
    (secret/'memory.md').write_text('# Memory\nthe other chat said ocelot\n'); (secret/'later.md').write_text('# Later\nquokka\n')
    (w/'link.md').symlink_to(secret/'memory.md')
    seen = []
    def check(p:Path):
        seen.append(p)
        if p.is_relative_to(secret): raise MultisError(f"{p}: denied")
    with Watcher(db, cfg, debounce=DEBOUNCE, path_check=check) as wt:
        assert wt.ready.wait(10) and paths(st) == ['a.md']                   # the initial scan checked the link
        (w/'sub').mkdir(); (w/'sub'/'later.md').symlink_to(secret/'later.md')
        (w/'b.md').write_text('# Beta\nthe badger digs\n')
        assert until(lambda: names(st, 'badger') == ['Beta'])
        assert until(lambda: sum('later.md: denied' in e for _, e in wt.errors) >= 1)
        assert paths(st) == ['a.md', 'b.md'] and st.search('ocelot') == [] and st.search('quokka') == []
    assert (w/'b.md') in seen and all(p == p.resolve() for p in seen)

@pytest.mark.parametrize('backend', ['sqlite', 'postgresql'])
def test_a_folder_is_indexed_by_one_worker_at_a_time(setup, request, backend):
    "Two watchers (two services, or two machines) on one store: whoever holds the folder's lock indexes it; the other skips"
    from multis.retrieval.store import open_store
    w, cfg, st, db = setup
    url = f"sqlite:///{db}" if backend == 'sqlite' else request.getfixturevalue('pg_new')()
    with open_store(url) as holder, holder.exclusive(f"watch:{w}") as held:
        assert held
        with Watcher(url, cfg, debounce=DEBOUNCE) as wt:
            assert wt.ready.wait(10)
            assert list(wt.done) == [(str(w), 'skipped')] and holder.files() == []   # the other worker holds the folder
    with Watcher(url, cfg, debounce=DEBOUNCE) as wt:                             # the lock released: this one indexes
        assert wt.ready.wait(10)
        with open_store(url) as s2: assert [Path(f['file_path']).name for f in s2.files()] == ['a.md']
