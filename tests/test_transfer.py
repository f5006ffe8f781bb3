"Issue 17 item 5: `multis migrate --to URL` copies a whole store into an empty one, counts checked, the source untouched"
import hashlib, json, os, shutil, sqlite3, subprocess, sys
from pathlib import Path
import pytest
from conftest import REPO
from multis.config import DATABASE_ENV
from multis.core import DocChunk
from multis.retrieval.contract import DUMP_KINDS, StoreError
from multis.retrieval.embed import HashEmbedder
from multis.retrieval.store import Store, open_store
from multis.retrieval.transfer import copy_store
from multis.documents.indexer import index_directory

MULTIS = shutil.which('multis', path=str(Path(sys.executable).parent)) or shutil.which('multis')

# A target backend is a function (tmp_path, request) -> the URL of a store that does not exist yet or is empty; the
# PostgreSQL ones are new databases on the session's throwaway server (tests/conftest.py; they skip saying why without one).
TARGETS = {'sqlite': lambda tmp, request: f"sqlite:///{tmp}/target.db",
           'postgresql': lambda tmp, request: request.getfixturevalue('pg_new')(),
           'postgresql-pgvector': lambda tmp, request: request.getfixturevalue('pgvector_new')()}


@pytest.fixture(params=sorted(TARGETS))
def target(request, tmp_path): return TARGETS[request.param](tmp_path, request)


@pytest.fixture(scope='module')
def source(tmp_path_factory):
    "A SQLite store with every kind of row: data/ indexed with vectors, chat memory, accesses, facts"
    path = tmp_path_factory.mktemp('source')/'multis.db'
    with Store(path) as st:
        st.embedder = HashEmbedder(32)
        index_directory(st, REPO/'data', 'kb', progress=False)
        st.save([DocChunk('/chats/user:7/log', 'Chat', 'we talked about the pairing code', scope='user:7',
                          element_type='paragraph', document_type='conversation')])
        st.save([DocChunk('/n/private.md', 'Private', 'the admiral keeps the pairing code', scope='admin')])
        hits = st.search('pairing code', limit=5, now=1000.0)
        st.record_access([h.chunk_id for h in hits], 'pairing code', now=1000.0)
        st.save_facts([('7', 'colours', 'ranked', 1, 'blue', 5.0, 'chat'), ('7', 'name', 'single', 0, 'Ann', 6.0, '')])
    return path


def digest(path:Path)->str: return hashlib.sha256(Path(path).read_bytes()).hexdigest()

def dump(url)->dict:
    "Every row of every kind (in one order: backends may dump in different stable orders)"
    with open_store(url) as st: return {k: sorted((r for b in st.dump_rows(k) for r in b), key=repr) for k in DUMP_KINDS}

def searches(url)->list:
    with open_store(url) as st:
        return [[(h.chunk_id, round(h.score, 6)) for h in st.search(q, scopes=sc, now=2000.0, record=False, embedder=e)]
                for q in ('pairing code', 'tomatoes water') for sc in (None, ['kb'], ['user:7']) for e in (False, HashEmbedder(32))]


def test_copy_is_whole_checked_and_leaves_the_source_as_it_was(source, target):
    before, rows = digest(source), dump(source)
    r = copy_store(f"sqlite:///{source}", target, batch=7)
    assert r.copied == {k: len(v) for k, v in rows.items()} and all(r.copied.values())
    assert r.by_scope == {'admin': 1, 'kb': r.copied['chunks'] - 2, 'user:7': 1} and r.vectors == {'hash:32': r.copied['vectors']}
    assert dump(target) == rows and searches(target) == searches(source)
    assert digest(source) == before and dump(source) == rows


def test_copy_back_and_forth_is_identical(source, target, tmp_path):
    copy_store(source, target)
    back = f"sqlite:///{tmp_path}/back.db"
    copy_store(target, back)
    assert dump(back) == dump(source) and searches(back) == searches(source)


def test_a_target_that_is_not_empty_is_refused_and_left_alone(source, target):
    with open_store(target) as st: st.save([DocChunk('/x.md', 'X', 'already here')])
    with pytest.raises(StoreError, match=r'not empty \(it holds chunks\); copy only into an empty store'): copy_store(source, target)
    with open_store(target) as st: assert st.stats()['chunks'] == 1


class Failing(Store):
    "A SQLite store whose loading fails at one kind of row (a lost connection, a full disk, Ctrl-C)"
    fail_at, error = 'vectors', KeyboardInterrupt
    def load_rows(self, kind, rows):
        if kind == self.fail_at: raise self.error()
        return super().load_rows(kind, rows)


@pytest.mark.parametrize('fail_at, error', [('vectors', KeyboardInterrupt), ('facts', OSError), ('chunks', StoreError)])
def test_an_interrupted_copy_leaves_the_target_empty_and_runs_again(source, tmp_path, monkeypatch, fail_at, error):
    from multis.retrieval import contract
    monkeypatch.setitem(contract._BACKENDS, 'failing', Failing)
    monkeypatch.setattr(Failing, 'fail_at', fail_at); monkeypatch.setattr(Failing, 'error', error)
    monkeypatch.setattr(Failing, 'from_url', classmethod(lambda cls, url, timeout=5.0: cls(url.split('://', 1)[1], timeout)))
    with pytest.raises(error): copy_store(source, f"failing://{tmp_path}/t.db", batch=50)
    assert dump(tmp_path/'t.db') == {k: [] for k in DUMP_KINDS}      # rolled back: the target is as empty as it was
    copy_store(source, tmp_path/'t.db')                               # and the next run copies everything
    assert dump(tmp_path/'t.db') == dump(source)


def test_a_count_that_does_not_match_rolls_back(source, tmp_path, monkeypatch):
    from multis.retrieval import transfer
    monkeypatch.setattr(transfer, '_counted', lambda st, kind: 0 if kind == 'facts' else sum(len(b) for b in st.dump_rows(kind)))
    with pytest.raises(StoreError, match=r'does not match its source \(facts: 2 read, 0 in the target\); the target was rolled back'):
        copy_store(source, tmp_path/'t.db')
    assert dump(tmp_path/'t.db') == {k: [] for k in DUMP_KINDS}


def test_sources_a_copy_would_have_to_change_are_refused(tmp_path):
    with pytest.raises(Exception, match='no such database'): copy_store(tmp_path/'none.db', tmp_path/'t.db')
    assert not (tmp_path/'none.db').exists()
    old = tmp_path/'old.db'
    Store(old).close()
    con = sqlite3.connect(old); con.execute('PRAGMA user_version = 2'); con.close()
    before = digest(old)
    with pytest.raises(StoreError, match=r'schema 2, older than .*run `multis migrate --db .*old.db` first'): copy_store(old, tmp_path/'t.db')
    assert digest(old) == before
    ok = tmp_path/'ok.db'
    Store(ok).close()
    with pytest.raises(StoreError, match='in-memory store'): copy_store(ok, 'sqlite://')
    with pytest.raises(StoreError, match='in-memory store'): copy_store(':memory:', ok)
    with pytest.raises(StoreError, match='the source and the target are the same store'): copy_store(ok, f"sqlite:///{tmp_path}/x/../ok.db")


def multis(*args, home, env=None):
    e = {k: v for k, v in os.environ.items() if k != DATABASE_ENV}
    return subprocess.run([MULTIS, *args], capture_output=True, text=True, env={**e, 'MULTIS_HOME': str(home), **(env or {})}, timeout=300)


def test_the_command(source, tmp_path):
    home = tmp_path/'home'; home.mkdir()
    shutil.copy(source, home/'multis.db')
    before, to = digest(home/'multis.db'), f"sqlite:///{tmp_path}/copy.db"
    r = multis('migrate', '--to', to, home=home)
    assert r.returncode == 0 and r.stderr == '', r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"copied sqlite:///{home}/multis.db to {to} in ") and len(lines) == 3
    assert 'counts checked' in lines[2] and digest(home/'multis.db') == before
    again = multis('migrate', '--to', to, home=home)
    assert again.returncode == 1 and again.stderr == f"multis: {to}: not empty (it holds files, chunks, accesses, vectors, facts); copy only into an empty store\n"
    j = json.loads(multis('migrate', '--to', f"{tmp_path}/j.db", '--json', '--db', str(home/'multis.db'), home=home).stdout)
    assert j['copied'] == json.loads(multis('migrate', '--to', f"{tmp_path}/k.db", '--json', home=home).stdout)['copied']
    bad = multis('migrate', '--to', to, '--rebuild', home=home)
    assert bad.stderr == "multis: --to copies the store as it is; run --rebuild or --embed without --to\n"
    docs = json.loads(multis('docs', '--json', home=home, env={DATABASE_ENV: to}).stdout)
    assert docs['stats'] == json.loads(multis('docs', '--json', home=home).stdout)['stats']
    assert digest(home/'multis.db') == before


def test_the_command_to_postgresql_and_back(source, tmp_path, pg_new):
    "`multis migrate --to postgresql://...`, then every command on that store, then `--to sqlite:///` the other way"
    home = tmp_path/'home'; home.mkdir()
    shutil.copy(source, home/'multis.db')
    before, pg = digest(home/'multis.db'), pg_new()
    r = multis('migrate', '--to', pg, home=home)
    assert r.returncode == 0 and 'counts checked' in r.stdout and 'secret' not in r.stdout + r.stderr, r.stdout + r.stderr
    assert digest(home/'multis.db') == before
    on_pg = {DATABASE_ENV: pg}
    assert json.loads(multis('docs', '--json', home=home, env=on_pg).stdout)['stats'] == json.loads(multis('docs', '--json', home=home).stdout)['stats']
    back = f"sqlite:///{tmp_path}/back.db"
    r = multis('migrate', '--to', back, home=home, env=on_pg)
    assert r.returncode == 0, r.stderr
    assert dump(back) == dump(source)
    hits = json.loads(multis('search', 'pairing code', '--json', home=home, env=on_pg).stdout)   # (records accesses)
    assert hits and {h['scope'] for h in hits} <= {'kb', 'admin', 'user:7'}
