"Issue 17 item 1: every command works on the store that `--db`, `MULTIS_DATABASE_URL` or `store.url` names, and never prints its password"
import json, os, shutil, subprocess, sys, time
from pathlib import Path
import anyio, httpx, pytest
from conftest import REPO
from multis.config import DATABASE_ENV
from multis.retrieval.store import Store
from multis.documents.indexer import index_directory
from multis.testing.service import ServeProcess

MULTIS = shutil.which('multis', path=str(Path(sys.executable).parent)) or shutil.which('multis')
DATA = REPO/'data'
SECRET = 's3cret-pw-4417'
PG = f"postgresql://kb:{SECRET}@127.0.0.1:9/kb"   # nothing listens on port 9: never reachable


def run(*args, home, env=None, input=None, cwd=None, check=None, timeout=300):
    "`multis *args` as a user runs it, with this home and environment (no store URL of the caller's leaks in)"
    e = {k: v for k, v in os.environ.items() if k not in (DATABASE_ENV, 'ANTHROPIC_API_KEY', 'OPENAI_API_KEY')}
    e.update({'MULTIS_HOME': str(home), **(env or {})})
    r = subprocess.run([MULTIS, *args], input=input, capture_output=True, text=True, env=e, cwd=cwd, timeout=timeout)
    if check is not None: assert r.returncode == check, (r.stdout, r.stderr)
    return r


def chunks(path)->int:
    with Store(path) as st: return st.stats()['chunks']


def one_line(r)->str:
    "The single stderr line of a failed command"
    assert r.returncode == 1 and 'Traceback' not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr.strip()


@pytest.fixture
def other(tmp_path):
    "A home, and the environment naming a store outside it"
    home, db = tmp_path/'home', tmp_path/'other.db'
    return dict(home=home, db=db, env={DATABASE_ENV: f"sqlite:///{db}"})


def test_index_search_ask_docs_status_chat_migrate_on_the_url(other):
    home, db, env = other['home'], other['db'], other['env']
    m = lambda *a, **kw: run(*a, home=home, env=env, **kw)
    assert '4 indexed' in m('index', str(DATA), '--scope', 'kb', '--quiet', check=0).stdout
    n = chunks(db)
    assert n > 0 and json.loads(m('docs', '--json', check=0).stdout)['stats']['chunks'] == n
    hits = json.loads(m('search', 'pairing code', '--json', check=0).stdout)
    assert hits and hits[0]['file_path'] == str(DATA/'multis-handbook.pdf')
    answer = json.loads(m('ask', 'how do I pair my phone?', '--json', check=0).stdout)
    assert answer['hits'] and answer['hits'][0]['file_path'].startswith(str(DATA))
    st = m('status')
    assert st.returncode == 3 and f"  store: sqlite:///{db}: 4 files, {n} chunks" in st.stdout.splitlines()
    out = m('chat', input='/search pairing\n/quit\n', check=0).stdout
    assert '1. [multis-handbook.pdf' in out
    assert json.loads(m('migrate', '--json', check=0).stdout)['db'] == str(db)   # the in-place upgrade, on that file
    assert not (home/'multis.db').exists()


def test_eval_keeps_its_corpus_in_a_store_url(tmp_path):
    beir, db = tmp_path/'beir', tmp_path/'beir.db'
    (beir/'qrels').mkdir(parents=True)
    (beir/'corpus.jsonl').write_text('\n'.join(json.dumps({'_id': i, 'title': t, 'text': x}) for i, t, x in
        [('d1', 'Tomatoes', 'Water tomatoes deeply twice a week.'), ('d2', 'Roses', 'Prune roses in early spring.')]))
    (beir/'queries.jsonl').write_text(json.dumps({'_id': 'q1', 'text': 'watering tomatoes'}))
    (beir/'qrels'/'test.tsv').write_text('query-id\tcorpus-id\tscore\nq1\td1\t1\n')
    r = run('eval', str(beir), '--db', f"sqlite:///{db}", '--json', home=tmp_path/'home', check=0)
    assert json.loads(r.stdout)['ndcg@10'] == 1.0 and chunks(db) == 2
    assert not (tmp_path/'home'/'multis.db').exists()


def test_serve_searches_the_url(other):
    home, db = other['home'], other['db']
    with Store(db) as st: index_directory(st, DATA, 'kb', progress=False)
    env = {**{k: v for k, v in os.environ.items() if k != DATABASE_ENV}, **other['env']}
    with ServeProcess(home, env=env, timeout=30) as srv:
        auth = {'Authorization': f"Bearer {(home/'service-token').read_text().strip()}"}
        hits = httpx.post(f'{srv.url}/search', json={'query': 'pairing code'}, headers=auth).json()
        assert hits and hits[0]['file_path'] == str(DATA/'multis-handbook.pdf')
    assert srv.proc.returncode == 0
    assert not (home/'multis.db').exists()


def test_mcp_searches_the_url(other):
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    home, db = other['home'], other['db']
    home.mkdir()
    with Store(db) as st: index_directory(st, DATA, 'kb', progress=False)
    async def go():
        params = StdioServerParameters(command=MULTIS, args=['mcp'], env={'MULTIS_HOME': str(home), **other['env']})
        with open(os.devnull, 'w') as err:
            async with stdio_client(params, errlog=err) as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    return (await s.call_tool('search', {'query': 'pairing code', 'limit': 2})).structured_content
    hits = anyio.run(go)['result']
    assert hits and hits[0]['file_path'] == str(DATA/'multis-handbook.pdf')
    assert not (home/'multis.db').exists()


def test_start_the_daemon_and_its_watcher_on_a_relative_url(tmp_path):
    "`multis start` from a folder with a relative URL: the daemon (which runs in the home) indexes into that same file"
    home, watched = tmp_path/'home', tmp_path/'watched'
    home.mkdir(); watched.mkdir()
    (watched/'boats.md').write_text('# Boats\nA sailing boat called Zephyrine.\n')
    (home/'config.json').write_text(json.dumps({'watch': [{'path': str(watched), 'scope': 'kb'}]}))
    m = lambda *a, **kw: run(*a, home=home, env={DATABASE_ENV: 'sqlite:///rel.db'}, cwd=tmp_path, **kw)
    try:
        m('start', check=0)
        end = time.monotonic() + 30
        while not json.loads(m('search', 'Zephyrine', '--json', '--no-record', check=0).stdout):
            assert time.monotonic() < end, (home/'logs'/'daemon.log').read_text()
            time.sleep(0.2)
        assert f"store sqlite:///{tmp_path}/rel.db" in (home/'logs'/'daemon.log').read_text()
    finally: m('stop')
    assert chunks(tmp_path/'rel.db') == 1 and not (home/'multis.db').exists()


def test_store_url_in_config_is_relative_to_the_home(tmp_path):
    home = tmp_path/'home'; home.mkdir()
    (home/'config.json').write_text(json.dumps({'store': {'url': 'sqlite:///stores/kb.db'}}))
    run('index', str(DATA/'garden-guide.md'), '--scope', 'kb', home=home, check=0)
    assert chunks(home/'stores'/'kb.db') > 0 and not (home/'multis.db').exists()
    assert run('search', 'tomatoes', '--json', home=home, check=0).stdout.count('garden-guide.md') > 0


def test_precedence_db_over_environment_over_config(tmp_path):
    home = tmp_path/'home'; home.mkdir()
    cfg_db, env_db, cli_db = tmp_path/'config.db', tmp_path/'env.db', tmp_path/'cli.db'
    (home/'config.json').write_text(json.dumps({'store': {'url': f"sqlite:///{cfg_db}"}}))
    env = {DATABASE_ENV: f"sqlite:///{env_db}"}
    doc = str(DATA/'garden-guide.md')
    run('index', doc, '--scope', 'kb', '--db', str(cli_db), home=home, env=env, check=0)
    assert (chunks(cli_db) > 0, env_db.exists(), cfg_db.exists()) == (True, False, False)
    run('index', doc, '--scope', 'kb', home=home, env=env, check=0)
    assert (chunks(env_db) > 0, cfg_db.exists()) == (True, False)
    run('index', doc, '--scope', 'kb', home=home, check=0)
    assert chunks(cfg_db) > 0 and not (home/'multis.db').exists()
    count = lambda **kw: json.loads(run('docs', '--json', home=home, check=0, **kw).stdout)['stats']['files']
    assert count(env={DATABASE_ENV: f"sqlite:///{tmp_path}/empty.db"}) == 0 and count() == 1


def test_password_is_never_shown(other):
    home = other['home']
    for args in [('docs',), ('search', 'x'), ('index', str(DATA/'garden-guide.md'), '--scope', 'kb'), ('migrate',)]:
        r = run(*args, home=home, env={DATABASE_ENV: PG})
        assert SECRET not in one_line(r) + r.stdout, (args, r.stderr)
    st = run('status', home=home, env={DATABASE_ENV: PG})
    assert st.returncode == 3 and '  store: postgresql://kb:***@127.0.0.1:9/kb (cannot be opened: ' in st.stdout
    assert SECRET not in st.stdout + st.stderr
    r = run('migrate', '--to', PG, home=home, env=other['env'])
    assert r.returncode == 1 and SECRET not in r.stdout + r.stderr
    (home/'config.json').write_text(json.dumps({'store': {'url': PG.replace('postgresql', 'pgsql')}}))
    r = run('docs', home=home)
    assert one_line(r) == (f"multis: {home/'config.json'}: store.url: 'pgsql://kb:***@127.0.0.1:9/kb' has an unknown "
                           "scheme 'pgsql' (use sqlite:///path or postgresql://user@host:port/db)")


@pytest.mark.parametrize('where, args, env, says', [
    ('env', ('docs',), {DATABASE_ENV: 'mysql://kb:pw@db/kb'}, "MULTIS_DATABASE_URL: 'mysql://kb:***@db/kb' has an unknown scheme 'mysql'"),
    ('env', ('search', 'x'), {DATABASE_ENV: 'sqlite:/kb.db'}, "MULTIS_DATABASE_URL: 'sqlite:/kb.db' is not a URL ('//' missing after the scheme)"),
    ('--db', ('docs', '--db', 'sqlite://kb.db'), {}, "--db: 'sqlite://kb.db' needs three slashes"),
    ('--db', ('index', str(DATA), '--scope', 'kb', '--db', 'postgresql://kb@db:port/kb'), {}, "--db: 'postgresql://kb@db:port/kb' has a bad host or port"),
    ('--to', ('migrate', '--to', 'ftp://x/kb'), {}, "--to: 'ftp://x/kb' has an unknown scheme 'ftp'"),
])
def test_bad_url_is_one_clear_line(tmp_path, where, args, env, says):
    r = run(*args, home=tmp_path/'home', env=env)
    assert one_line(r) == f"multis: {says} (use sqlite:///path or postgresql://user@host:port/db)"
    assert not (tmp_path/'home'/'multis.db').exists()


def test_the_store_is_denied_to_read_and_exec_wherever_it_lives(other):
    home, db = other['home'], other['db']
    run('index', str(DATA/'garden-guide.md'), '--scope', 'kb', home=home, env=other['env'], check=0)
    out = run('chat', input=f'/read {db}\n/quit\n', home=home, env=other['env'], check=0).stdout
    assert f'path {db} is in a denied folder' in out, out
