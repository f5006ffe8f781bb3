"`multis mcp` as a real stdio subprocess, driven by the official MCP client of the same SDK"
import json, os, shutil, subprocess, sys, tempfile
from pathlib import Path
import anyio, pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from multis.config import load_config
from multis.retrieval.store import Store
from multis.documents.indexer import index_directory, index_file
from multis.governance.audit import read_audit

MULTIS = str(Path(sys.executable).parent/'multis')
DATA = Path(__file__).parents[1]/'data'
LIMITED = 'limited-token-for-mcp-tests'

@pytest.fixture(scope='module')
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp('mcp')
    home, allowed, outside = root/'home', root/'allowed', root/'outside'
    for d in (home, allowed, outside): d.mkdir()
    (allowed/'boats.md').write_text('# Boats\nA sailing boat called Zephyrine.\n')
    (outside/'secret.md').write_text('# Secret\nThe admiral keeps the zanzibar code.\n')
    (home/'governance.json').write_text(json.dumps({'allowed_roots': [str(allowed)]}))
    cfg = json.loads((home/'config.json').read_text()) if (home/'config.json').exists() else {}
    cfg.setdefault('service', {})['tokens'] = {LIMITED: {'read': ['kb', 'user:7'], 'write': ['user:7']}}
    (home/'config.json').write_text(json.dumps(cfg))
    with Store(home/'multis.db') as st:
        index_directory(st, DATA, 'kb', progress=False)
        index_file(st, outside/'secret.md', 'admin')
    return dict(home=home, allowed=allowed, outside=outside)

def session(home:Path, *args:str, messages:list|None=None):
    "Run `fn(client_session)` against a fresh `multis mcp *args`; returns (fn's result, the server's stderr)"
    def run(fn):
        async def go(err):
            params = StdioServerParameters(command=MULTIS, args=['mcp', *args], env={'MULTIS_HOME': str(home)})
            async def handler(m):
                if messages is not None and isinstance(m, Exception): messages.append(m)
            async with stdio_client(params, errlog=err) as (r, w):
                async with ClientSession(r, w, message_handler=handler) as s:
                    await s.initialize()
                    return await fn(s)
        with tempfile.TemporaryFile('w+') as err:
            res = anyio.run(go, err)
            err.seek(0); return res, err.read()
    return run

def call(home, name:str, args:dict, *opts:str):
    "One tool call: (is_error, text of the first content, structured content)"
    async def fn(s):
        r = await s.call_tool(name, args)
        return r.is_error, r.content[0].text if r.content else '', r.structured_content
    return session(home['home'], *opts)(fn)[0]

def test_lists_tools_with_schemas_and_stdout_is_pure_protocol(home):
    bad = []
    async def fn(s):
        return (await s.list_tools()).tools, (await s.list_prompts()).prompts, (await s.list_resource_templates()).resource_templates
    (tools, prompts, templates), err = session(home['home'], messages=bad)(fn)
    names = {t.name for t in tools}
    assert names == {'search', 'ask', 'remember', 'memory', 'forget', 'facts', 'index', 'docs'}
    for t in tools: assert t.description and t.input_schema['type'] == 'object'
    assert {t.uri_template for t in templates} == {'multis://chunk/{chunk_id}', 'multis://memory/{chat}'}
    assert [p.name for p in prompts] == ['answer_from_documents']
    assert bad == []                                  # every stdout line parsed as JSON-RPC
    assert 'multis mcp: serving' in err               # the log line went to stderr

def test_search_returns_hits_with_citations(home):
    is_err, text, out = call(home, 'search', {'query': 'tomatoes', 'limit': 3})
    hits = out['result']
    assert not is_err and 0 < len(hits) <= 3
    for h in hits:
        assert h['citation'].startswith(Path(h['file_path']).name) and h['scope'] == 'kb'
        assert {'section_path', 'page_start', 'page_end', 'score', 'bm25', 'activation', 'excerpt'} <= set(h)
    assert any('tomato' in h['excerpt'].lower() for h in hits)

def test_search_owner_sees_admin_scoped_does_not(home):
    _, _, out = call(home, 'search', {'query': 'zanzibar'})
    assert [h['scope'] for h in out['result']] == ['admin']
    is_err, text, out = call(home, 'search', {'query': 'zanzibar'}, '--scope', 'kb')
    assert not is_err and out['result'] == []

def test_scope_refusal_is_one_line_error(home):
    is_err, text, _ = call(home, 'search', {'query': 'zanzibar', 'scopes': ['admin']}, '--scope', 'user:7')
    assert is_err and text == "Error executing tool search: this token may not read scope 'admin'"
    rec = [r for r in read_audit(home['home']) if r['event'] == 'mcp'][-1]
    assert rec['tool'] == 'search' and rec['outcome'] == 'refused' and rec['user'] == 'mcp-scoped'

def test_bad_argument_is_an_error(home):
    is_err, text, _ = call(home, 'search', {'query': '', 'limit': 1000})
    assert is_err and text.startswith('bad arguments for search: query (') and 'limit (' in text and '\n' not in text
    is_err, text, _ = call(home, 'facts', {'chat_id': '7'})
    assert is_err and text == 'bad arguments for facts: topic (Field required)'
    is_err, text, _ = call(home, 'nosuch', {})
    assert is_err and text == "unknown tool 'nosuch'"
    rec = [r for r in read_audit(home['home']) if r['event'] == 'mcp'][-1]
    assert rec['tool'] == 'nosuch' and rec['outcome'] == 'invalid'

def test_remember_then_memory(home):
    async def fn(s):
        a = await s.call_tool('remember', {'chat_id': '7', 'note': 'The boat is moored at pier four'})
        b = await s.call_tool('memory', {'chat_id': '7'})
        c = await s.read_resource('multis://memory/7')
        return a, b, c
    (a, b, c), _ = session(home['home'], '--scope', 'user:7')(fn)
    assert not a.is_error and a.structured_content['scope'] == 'user:7'
    assert 'pier four' in b.structured_content['memory']
    assert 'pier four' in json.loads(c.contents[0].text)['memory']

def test_store_then_get_a_fact(home):
    async def fn(s):
        await s.call_tool('facts', {'chat_id': '7', 'topic': 'favourite colours', 'values': ['blue', 'green', 'red']})
        one = await s.call_tool('facts', {'chat_id': '7', 'topic': 'favourite colours', 'rank': 2})
        all_ = await s.call_tool('facts', {'chat_id': '7', 'topic': 'favourite colours'})
        return one.structured_content['result'], all_.structured_content['result']
    (one, all_), _ = session(home['home'], '--token', LIMITED)(fn)
    assert [f['value'] for f in one] == ['green']
    assert [f['value'] for f in all_] == ['blue', 'green', 'red']

def test_index_refused_outside_allowed_roots(home):
    is_err, text, _ = call(home, 'index', {'path': str(home['outside']/'secret.md')})
    assert is_err and 'allowed' in text and '\n' not in text
    is_err, text, out = call(home, 'index', {'path': str(home['allowed']/'boats.md')})
    assert not is_err and out['chunks'] >= 1

@pytest.mark.parametrize('opts', [('--scope', 'kb'), ('--token', LIMITED)])
def test_index_refused_for_non_owner(home, opts):
    is_err, text, _ = call(home, 'index', {'path': str(home['allowed']/'boats.md')}, *opts)
    assert is_err and text == 'Error executing tool index: only the owner may index files'

def test_docs_and_chunk_resource_stay_in_scope(home):
    _, _, docs = call(home, 'docs', {}, '--scope', 'kb')
    assert set(docs['by_scope']) == {'kb'} and {d['scope'] for d in docs['documents']} == {'kb'}
    _, _, out = call(home, 'search', {'query': 'zanzibar'})
    cid = out['result'][0]['chunk_id']
    async def fn(s):
        try: return await s.read_resource(f'multis://chunk/{cid}')
        except Exception as e: return e
    owner, _ = session(home['home'])(fn)
    assert json.loads(owner.contents[0].text)['citation'] == 'secret.md, Secret'
    limited, _ = session(home['home'], '--scope', 'kb')(fn)
    assert isinstance(limited, Exception) and 'in your scopes' in str(limited)

def test_ask_without_model_gives_passages(home):
    is_err, _, out = call(home, 'ask', {'question': 'how do I grow tomatoes?'})
    assert not is_err and out['model'] is None and out['note'].startswith('no model configured') and out['passages']

def test_every_call_is_audited_without_secrets(home):
    call(home, 'docs', {}, '--token', LIMITED)
    recs = [r for r in read_audit(home['home']) if r['event'] == 'mcp']
    assert recs and all({'tool', 'outcome', 'user', 'platform'} <= set(r) for r in recs)
    assert LIMITED not in (home['home']/'audit.log').read_text()

def test_unknown_token_and_missing_sdk_are_one_line(home):
    r = subprocess.run([MULTIS, 'mcp', '--token', 'nope'], capture_output=True, text=True, timeout=60,
                       env={**os.environ, 'MULTIS_HOME': str(home['home'])}, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and r.stdout == '' and '--token: not one of service.tokens' in r.stderr
    code = "import sys; sys.modules['mcp'] = None; from multis.cli import main; sys.argv = ['multis', 'mcp']; main()"
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, 'MULTIS_HOME': str(home['home'])}, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1].endswith('pip install -e ".[mcp]"')
