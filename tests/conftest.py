import os, sys
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent/'shared'

@pytest.fixture
def home(tmp_path, monkeypatch):
    "A fresh multis home for one test"
    h = tmp_path/'home'
    monkeypatch.setenv('MULTIS_HOME', str(h))
    return h

@pytest.fixture
def shared_docs():
    d = SHARED/'docs'
    if not d.is_dir(): pytest.skip('../shared/docs is absent')
    return d

@pytest.fixture
def scifact():
    d = SHARED/'eval'/'scifact'
    if not d.is_dir(): pytest.skip('../shared/eval/scifact is absent')
    return d

@pytest.fixture
def data_store(tmp_path):
    "A Store on a real database file with the sample documents of data/ indexed into kb"
    from multis.retrieval.store import Store
    from multis.documents.indexer import index_directory
    with Store(tmp_path/'multis.db') as st:
        index_directory(st, REPO/'data', 'kb', progress=False)
        yield st

# --- a real PostgreSQL for the PostgreSQL store (see multis.testing.postgres) ---

def _psycopg_missing():
    try: import psycopg, psycopg_pool
    except ImportError as e: return f'psycopg is not installed ({e}); pip install -e ".[postgresql]"'
    return None

@pytest.fixture(scope='session')
def pg_server():
    "A PostgreSQL server for the whole session: Debian's, else pgserver's; skips saying why neither runs"
    if why := _psycopg_missing(): pytest.skip(why)
    from multis.testing.postgres import TempPostgres
    srv = TempPostgres().start()
    if not srv.ok: pytest.skip(srv.why)
    yield srv
    from multis.retrieval.postgresql import close_pools
    close_pools(); srv.stop()

@pytest.fixture(scope='session')
def pgvector_server(pg_server):
    "A server with pgvector: the session's if it has it, else the pgserver wheel's"
    if pg_server.has_pgvector(): yield pg_server; return
    from multis.testing.postgres import TempPostgres
    try: import pgserver  # noqa: F401
    except ImportError: pytest.skip('pgvector is not installed for the Debian server and the pgserver wheel is absent')
    srv = TempPostgres().start(kinds=('pgserver',))
    if not srv.ok: pytest.skip(srv.why)
    yield srv
    from multis.retrieval.postgresql import close_pools
    close_pools(); srv.stop()

_DBS = iter(range(1, 10**6))

def with_option(url:str, opt:str)->str: return url + ('&' if '?' in url else '?') + opt

@pytest.fixture
def pg_new(pg_server):
    "A function giving the URL of a new, empty PostgreSQL database each call (vectors as real[], scored in memory)"
    return lambda: with_option(pg_server.new_database(f'multis_t{next(_DBS)}'), 'multis_vectors=array')

@pytest.fixture
def pgvector_new(pgvector_server):
    "A function giving the URL of a new, empty PostgreSQL database with pgvector each call"
    return lambda: pgvector_server.new_database(f'multis_v{next(_DBS)}')

@pytest.fixture
def pg_url(pg_new): return pg_new()

@pytest.fixture
def pgvector_url(pgvector_new): return pgvector_new()
