"""MCP driven by the official client of the same SDK, over stdio (a real `multis mcp` subprocess) and over Streamable
HTTP (`/mcp` of a real `multis serve` subprocess): the same tools, the same scopes, the same errors"""
import json, os, random, sqlite3, subprocess, sys, tempfile, urllib.request
from contextlib import AsyncExitStack
from pathlib import Path
import anyio, httpx2, pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from multis.testing.service import ServeProcess, free_port
from multis.retrieval.store import Store
from multis.documents.indexer import index_directory, index_file
from multis.governance.audit import read_audit
from multis.run.guard import service_token, token_id

MULTIS = str(Path(sys.executable).parent/'multis')
DATA = Path(__file__).parents[1]/'data'
SCOPES = ['kb', 'admin', 'user:7', 'user:8', 'user:9']
# token -> (read, write); the same callers over stdio are `--token NAME` or `--scope S...` (read = write = S)
LIMITED = 'limited-token-for-mcp-tests'
TOKENS = {LIMITED: (['kb', 'user:7'], ['user:7']), 'kb-token-for-mcp-tests': (['kb'], ['kb']),
          'u7-token-for-mcp-tests': (['user:7'], ['user:7']), 'u89-token-for-mcp-tests': (['user:8', 'user:9'], []),
          'admin-reader-for-mcp-tests': (['admin'], [])}
WHO = {'owner': None, 'limited': LIMITED, 'kb': 'kb-token-for-mcp-tests', 'u7': 'u7-token-for-mcp-tests'}
STDIO_WHO = {'owner': (), 'limited': ('--token', LIMITED), 'kb': ('--scope', 'kb'), 'u7': ('--scope', 'user:7')}

@pytest.fixture(scope='module')
def home(tmp_path_factory):
    "A home with data/ in kb, a secret in admin, a quokka note in every scope, limited tokens and one allowed folder"
    root = tmp_path_factory.mktemp('mcp')
    home, allowed, outside, notes = root/'home', root/'allowed', root/'outside', root/'notes'
    for d in (home, allowed, outside, notes): d.mkdir()
    (allowed/'boats.md').write_text('# Boats\nA sailing boat called Zephyrine.\n')
    (outside/'secret.md').write_text('# Secret\nThe admiral keeps the zanzibar code.\n')
    (home/'governance.json').write_text(json.dumps({'allowed_roots': [str(allowed)]}))
    (home/'config.json').write_text(json.dumps({'service': {'tokens': {t: {'read': r, 'write': w} for t, (r, w) in TOKENS.items()}}}))
    with Store(home/'multis.db') as st:
        index_directory(st, DATA, 'kb', progress=False)
        index_file(st, outside/'secret.md', 'admin')
        for s in SCOPES:
            p = notes/f"{s.replace(':', '-')}.md"
            p.write_text(f"# Quokka {s}\nThe quokka of {s} eats leaves; wombat and quokka share the island.\n")
            index_file(st, p, s)
    return dict(home=home, allowed=allowed, outside=outside, owner=service_token(home))

@pytest.fixture(scope='module')
def server(home):
    "A real `multis serve` on a free port, stopped with SIGTERM at the end"
    with ServeProcess(home['home']) as srv: yield srv.url

async def _open(stack:AsyncExitStack, transport:str, who:str, home:dict, server:str|None, err=None)->ClientSession:
    "A ClientSession for `who` over `transport`, closed with `stack`"
    if transport == 'stdio':
        params = StdioServerParameters(command=MULTIS, args=['mcp', *STDIO_WHO[who]], env={'MULTIS_HOME': str(home['home'])})
        r, w = await stack.enter_async_context(stdio_client(params, errlog=err or sys.stderr))
    else:
        tok = home['owner'] if who == 'owner' else WHO.get(who, who)
        hc = await stack.enter_async_context(httpx2.AsyncClient(headers={'Authorization': f'Bearer {tok}'}, timeout=60))
        r, w, *_ = await stack.enter_async_context(streamable_http_client(server + '/mcp', http_client=hc))
    s = await stack.enter_async_context(ClientSession(r, w))
    await s.initialize()
    return s

@pytest.fixture(params=['stdio', 'http'])
def mcp(request, home):
    "`mcp(fn, who='owner')`: run `fn(session)` against a fresh session of this transport; returns fn's result"
    server = request.getfixturevalue('server') if request.param == 'http' else None
    def run(fn, who='owner'):
        async def go():
            async with AsyncExitStack() as stack: return await fn(await _open(stack, request.param, who, home, server))
        return anyio.run(go)
    run.transport = request.param
    return run

def call(mcp, name:str, args:dict, who='owner'):
    "One tool call: (is_error, text of the first content, structured content)"
    async def fn(s):
        r = await s.call_tool(name, args)
        return r.is_error, r.content[0].text if r.content else '', r.structured_content
    return mcp(fn, who)

def last_mcp_audit(home:dict)->dict: return [r for r in read_audit(home['home']) if r['event'] == 'mcp'][-1]

def test_lists_tools_with_schemas(mcp):
    async def fn(s):
        return (await s.list_tools()).tools, (await s.list_prompts()).prompts, (await s.list_resource_templates()).resource_templates
    tools, prompts, templates = mcp(fn)
    assert {t.name for t in tools} == {'search', 'ask', 'remember', 'memory', 'forget', 'facts', 'index', 'docs'}
    for t in tools: assert t.description and t.input_schema['type'] == 'object'
    assert {t.uri_template for t in templates} == {'multis://chunk/{chunk_id}', 'multis://memory/{chat}'}
    assert [p.name for p in prompts] == ['answer_from_documents']

def test_stdio_stdout_is_pure_protocol(home):
    bad, err = [], tempfile.TemporaryFile('w+')
    async def go():
        params = StdioServerParameters(command=MULTIS, args=['mcp'], env={'MULTIS_HOME': str(home['home'])})
        async def handler(m):
            if isinstance(m, Exception): bad.append(m)
        async with stdio_client(params, errlog=err) as (r, w):
            async with ClientSession(r, w, message_handler=handler) as s:
                await s.initialize(); await s.list_tools(); await s.call_tool('docs', {})
    anyio.run(go)
    err.seek(0)
    assert bad == []                                   # every stdout line parsed as JSON-RPC
    assert 'multis mcp: serving' in err.read()         # the log line went to stderr

def test_search_returns_hits_with_citations(mcp):
    is_err, text, out = call(mcp, 'search', {'query': 'tomatoes', 'limit': 3})
    hits = out['result']
    assert not is_err and 0 < len(hits) <= 3
    for h in hits:
        assert h['citation'].startswith(Path(h['file_path']).name) and h['scope'] == 'kb'
        assert {'section_path', 'page_start', 'page_end', 'score', 'bm25', 'activation', 'excerpt'} <= set(h)
    assert any('tomato' in h['excerpt'].lower() for h in hits)

def test_search_owner_sees_admin_others_do_not(mcp):
    _, _, out = call(mcp, 'search', {'query': 'zanzibar'})
    assert [h['scope'] for h in out['result']] == ['admin']
    is_err, text, out = call(mcp, 'search', {'query': 'zanzibar'}, 'kb')
    assert not is_err and out['result'] == []

def test_scope_refusal_is_one_line_error(mcp, home):
    is_err, text, _ = call(mcp, 'search', {'query': 'zanzibar', 'scopes': ['admin']}, 'u7')
    assert is_err and text == "Error executing tool search: this token may not read scope 'admin'"
    rec = last_mcp_audit(home)
    assert rec['tool'] == 'search' and rec['outcome'] == 'refused' and rec['transport'] == mcp.transport
    assert rec['user'] == ('mcp-scoped' if mcp.transport == 'stdio' else token_id(WHO['u7']))

def test_bad_argument_is_an_error(mcp, home):
    is_err, text, _ = call(mcp, 'search', {'query': '', 'limit': 1000})
    assert is_err and text.startswith('bad arguments for search: query (') and 'limit (' in text and '\n' not in text
    is_err, text, _ = call(mcp, 'facts', {'chat_id': '7'})
    assert is_err and text == 'bad arguments for facts: topic (Field required)'
    is_err, text, _ = call(mcp, 'nosuch', {})
    assert is_err and text == "unknown tool 'nosuch'"
    rec = last_mcp_audit(home)
    assert rec['tool'] == 'nosuch' and rec['outcome'] == 'invalid'

def test_remember_then_memory(mcp):
    chat = '7' if mcp.transport == 'stdio' else '9'
    async def fn(s):
        a = await s.call_tool('remember', {'chat_id': chat, 'note': f'The boat is moored at pier four ({mcp.transport})'})
        b = await s.call_tool('memory', {'chat_id': chat})
        c = await s.read_resource(f'multis://memory/{chat}')
        return a, b, c
    a, b, c = mcp(fn, 'u7' if chat == '7' else 'owner')
    assert not a.is_error and a.structured_content['scope'] == f'user:{chat}'
    assert f'pier four ({mcp.transport})' in b.structured_content['memory']
    assert f'pier four ({mcp.transport})' in json.loads(c.contents[0].text)['memory']

def test_store_then_get_a_fact(mcp):
    topic = f'favourite colours {mcp.transport}'
    async def fn(s):
        await s.call_tool('facts', {'chat_id': '7', 'topic': topic, 'values': ['blue', 'green', 'red']})
        one = await s.call_tool('facts', {'chat_id': '7', 'topic': topic, 'rank': 2})
        all_ = await s.call_tool('facts', {'chat_id': '7', 'topic': topic})
        return one.structured_content['result'], all_.structured_content['result']
    one, all_ = mcp(fn, 'limited')
    assert [f['value'] for f in one] == ['green']
    assert [f['value'] for f in all_] == ['blue', 'green', 'red']
    is_err, text, _ = call(mcp, 'facts', {'chat_id': '8', 'topic': topic, 'value': 'x'}, 'limited')
    assert is_err and "may not write scope 'user:8'" in text

def test_index_refused_outside_allowed_roots(mcp, home):
    is_err, text, _ = call(mcp, 'index', {'path': str(home['outside']/'secret.md')})
    assert is_err and 'allowed' in text and '\n' not in text
    is_err, text, out = call(mcp, 'index', {'path': str(home['allowed']/'boats.md')})
    assert not is_err and out['results'][0]['status'] in ('indexed', 'unchanged')

@pytest.mark.parametrize('who', ['kb', 'limited'])
def test_index_refused_for_non_owner(mcp, home, who):
    is_err, text, _ = call(mcp, 'index', {'path': str(home['allowed']/'boats.md')}, who)
    assert is_err and text == 'Error executing tool index: only the owner may index files'

def test_docs_and_chunk_resource_stay_in_scope(mcp):
    _, _, docs = call(mcp, 'docs', {}, 'kb')
    assert set(docs['by_scope']) == {'kb'} and {d['scope'] for d in docs['documents']} == {'kb'}
    _, _, out = call(mcp, 'search', {'query': 'zanzibar'})
    cid = out['result'][0]['chunk_id']
    async def fn(s):
        try: return await s.read_resource(f'multis://chunk/{cid}')
        except Exception as e: return e
    owner = mcp(fn)
    assert json.loads(owner.contents[0].text)['citation'] == 'secret.md, Secret'
    limited = mcp(fn, 'kb')
    assert isinstance(limited, Exception) and 'in your scopes' in str(limited)

def test_ask_without_model_gives_passages(mcp):
    is_err, _, out = call(mcp, 'ask', {'question': 'how do I grow tomatoes?'})
    assert not is_err and out['model'] is None and out['note'].startswith('no model configured') and out['passages']

def test_every_call_is_audited_without_secrets(mcp, home):
    n = len(read_audit(home['home']))
    call(mcp, 'docs', {}, 'limited')
    recs = [r for r in read_audit(home['home'])[n:] if r['event'] == 'mcp']
    assert len(recs) == 1 and recs[0]['tool'] == 'docs' and recs[0]['outcome'] == 'ok'
    assert [r for r in read_audit(home['home'])[n:] if r['event'] != 'mcp'] == []   # HTTP: no second line per request
    text = (home['home']/'audit.log').read_text()
    assert all(t not in text for t in [*TOKENS, home['owner']])

# ---- HTTP only: tokens, Host and Origin

def _post(server:str, headers:dict, body:dict|None=None):
    body = body or {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list'}
    h = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream', **headers}
    req = urllib.request.Request(server + '/mcp', json.dumps(body).encode(), h, method='POST')
    try:
        with urllib.request.urlopen(req, timeout=30) as r: return r.status, r.read().decode()
    except urllib.error.HTTPError as e: return e.code, e.read().decode()

def test_http_needs_a_known_token(server, home):
    status, body = _post(server, {})
    assert status == 401 and json.loads(body)['detail'].startswith('missing bearer token')
    status, body = _post(server, {'Authorization': 'Bearer not-a-token'})
    assert status == 401 and json.loads(body) == {'detail': 'unknown token'}
    rec = last_mcp_audit(home)
    assert rec['outcome'] == 'refused' and rec['transport'] == 'http' and 'not-a-token' not in json.dumps(rec)

def test_http_checks_host_and_origin(server, home):
    auth = {'Authorization': f"Bearer {home['owner']}"}
    init = {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18', 'capabilities': {},
            'clientInfo': {'name': 't', 'version': '1'}}}
    status, body = _post(server, {**auth, 'Host': 'evil.example'}, init)
    assert status == 421 and 'evil.example' in json.loads(body)['detail']
    for origin in ('https://evil.example', 'null', 'http://localhost.evil.example'):
        status, body = _post(server, {**auth, 'Origin': origin}, init)
        assert status == 403 and json.loads(body)['detail'].startswith('Origin'), origin
    status, body = _post(server, {**auth, 'Origin': 'http://localhost:3000'}, init)
    assert status == 200 and 'multis' in body

def test_http_session_of_one_token_cannot_be_used_by_another(server, home):
    "Stateless: each request is checked with its own token; no session id carries another caller's rights"
    async def go():
        async with AsyncExitStack() as stack:
            s = await _open(stack, 'http', 'kb', home, server)
            return (await s.call_tool('search', {'query': 'zanzibar', 'scopes': ['admin']})).is_error
    assert anyio.run(go) is True

# ---- errors of the store

def test_locked_database_is_one_line_error(mcp, home):
    con = sqlite3.connect(home['home']/'multis.db', timeout=30)
    con.execute('BEGIN EXCLUSIVE')
    try: is_err, text, _ = call(mcp, 'remember', {'chat_id': '8', 'note': 'while locked'}, 'owner')
    finally: con.rollback(); con.close()
    assert is_err and 'locked' in text and '\n' not in text and len(text) < 400

def test_corrupt_database_is_one_line_error(tmp_path):
    home = tmp_path/'home'; home.mkdir()
    (home/'multis.db').write_bytes(b'this is not a database' * 400)
    async def go():
        async with AsyncExitStack() as stack:
            params = StdioServerParameters(command=MULTIS, args=['mcp'], env={'MULTIS_HOME': str(home)})
            r, w = await stack.enter_async_context(stdio_client(params, errlog=tempfile.TemporaryFile('w+')))
            s = await stack.enter_async_context(ClientSession(r, w)); await s.initialize()
            res = await s.call_tool('search', {'query': 'anything'})
            return res.is_error, res.content[0].text
    is_err, text = anyio.run(go)
    assert is_err and 'multis.db' in text and 'not a database' in text and '\n' not in text
    assert (home/'multis.db').read_bytes() == b'this is not a database' * 400     # nothing written over it

# ---- the randomized scope test: 1,000 calls per transport never return a chunk outside the caller's scopes

def _allowed(transport:str, who:str)->list:
    if who == 'owner': return list(SCOPES)
    if transport == 'stdio' and STDIO_WHO[who][0] == '--scope': return [STDIO_WHO[who][1]]
    return TOKENS[WHO.get(who, who)][0]

RANDOM_WHO = {'stdio': ['owner', 'limited', 'kb', 'u7'], 'http': ['owner', *TOKENS]}

async def _random_calls(transport:str, home:dict, server:str|None, n:int, seed:int)->dict:
    rng, seen = random.Random(seed), dict(hits=0, refused=0, ok=0, scopes=set())
    with Store(home['home']/'multis.db') as st: ids = {c.chunk_id: c.scope for s in SCOPES for c in st.search('quokka', 50, [s])}
    async with AsyncExitStack() as stack:
        sessions = {}
        for who in RANDOM_WHO[transport]:
            sessions[who] = await _open(stack, transport, who, home, server)
        for _ in range(n):
            who = rng.choice(list(sessions)); s, allowed = sessions[who], _allowed(transport, who)
            kind = rng.choice(['search', 'search', 'ask', 'chunk', 'docs'])
            asked = rng.choice([None, rng.sample(SCOPES, rng.randint(1, 3))])
            want = asked if asked is not None else allowed
            refuse = asked is not None and not set(asked) <= set(allowed)
            if kind in ('search', 'ask'):
                args = {'query' if kind == 'search' else 'question': rng.choice(['quokka', 'wombat island', 'zanzibar', 'leaves'])}
                if asked is not None: args['scopes'] = asked
                r = await s.call_tool(kind, args)
                assert r.is_error == refuse, (who, args, r.content)
                if r.is_error: seen['refused'] += 1; continue
                got = [h['scope'] for h in (r.structured_content['result'] if kind == 'search' else r.structured_content['passages'])]
            elif kind == 'chunk':
                cid = rng.choice(list(ids))
                try: got = [json.loads((await s.read_resource(f'multis://chunk/{cid}')).contents[0].text)['chunk']['scope']]
                except Exception as e:
                    assert ids[cid] not in allowed and 'in your scopes' in str(e), (who, cid, e)
                    seen['refused'] += 1; continue
                want = allowed
            else:
                got = [d['scope'] for d in (await s.call_tool('docs', {})).structured_content['documents']]
                want = allowed
            assert set(got) <= set(want) <= set(SCOPES), (who, kind, asked, got)
            seen['ok'] += 1; seen['hits'] += len(got); seen['scopes'] |= set(got)
    return seen

@pytest.mark.parametrize('transport', ['stdio', 'http'])
def test_random_calls_never_leave_the_callers_scopes(transport, home, request):
    server = request.getfixturevalue('server') if transport == 'http' else None
    seen = anyio.run(_random_calls, transport, home, server, 1000, 20261124)
    assert seen['ok'] + seen['refused'] == 1000
    assert seen['refused'] > 100 and seen['hits'] > 500 and seen['scopes'] == set(SCOPES)   # the test can see a leak

def test_unknown_token_and_missing_sdk_are_one_line(home):
    r = subprocess.run([MULTIS, 'mcp', '--token', 'nope'], capture_output=True, text=True, timeout=60,
                       env={**os.environ, 'MULTIS_HOME': str(home['home'])}, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and r.stdout == '' and '--token: not one of service.tokens' in r.stderr
    code = "import sys; sys.modules['mcp'] = None; from multis.cli import main; sys.argv = ['multis', 'mcp']; main()"
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, 'MULTIS_HOME': str(home['home'])}, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1].endswith('pip install -e ".[mcp]"')


def test_the_daemons_memory_service_serves_mcp_too(home):
    "`multis start` with service.enabled: /mcp answers there as it does under `multis serve`"
    from multis.config import load_config
    from multis.run.daemon import Daemon
    cfg = load_config(home['home']/'config.json')
    cfg['service'] = {**cfg.get('service', {}), 'enabled': True, 'port': free_port()}
    d = Daemon(home['home'], cfg=cfg)
    d.start_local()
    try:
        assert d.status['service'].startswith('running on http://127.0.0.1:')
        async def go():
            async with AsyncExitStack() as stack:
                s = await _open(stack, 'http', 'owner', home, d.service.url)
                r = await s.call_tool('search', {'query': 'the admiral keeps the zanzibar code'})
                return r.is_error, r.content[0].text
        err, text = anyio.run(go)
        assert not err and 'secret.md' in text              # the owner's token sees admin, as under `multis serve`
    finally: d.stop_local(); d.router.close()
