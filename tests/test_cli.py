"The installed `multis` command, run as a user runs it"
import json, os, re, shutil, subprocess, sys
from pathlib import Path
import pytest
from conftest import REPO

MULTIS = shutil.which('multis', path=str(Path(sys.executable).parent)) or shutil.which('multis')

def multis(*args, home, check=None):
    r = subprocess.run([MULTIS, *args], capture_output=True, text=True, env={**os.environ, 'MULTIS_HOME': str(home)},
                       timeout=300)
    if check is not None: assert r.returncode == check, (r.stdout, r.stderr)
    return r

def test_command_is_installed():
    assert MULTIS, 'the multis console script is not installed'
    r = subprocess.run([MULTIS, '--help'], capture_output=True, text=True)
    assert r.returncode == 0
    for verb in ('init', 'start', 'stop', 'status', 'chat', 'index', 'search', 'ask', 'docs', 'eval', 'serve'): assert verb in r.stdout

@pytest.mark.parametrize('verb', ['init', 'start', 'stop', 'status', 'chat', 'index', 'search', 'ask', 'docs', 'eval', 'serve'])
def test_verb_help_comes_from_docments(verb):
    r = subprocess.run([MULTIS, verb, '--help'], capture_output=True, text=True)
    assert r.returncode == 0 and 'usage: multis ' + verb in r.stdout

def test_main_job_on_data(tmp_path):
    "The README's main job: index data/ and search it"
    home = tmp_path/'home'
    out = multis('index', str(REPO/'data'), '--scope', 'kb', '--quiet', home=home, check=0).stdout
    assert re.search(r'^4 indexed \(\d+ chunks\), 0 unchanged, 0 failed', out, re.M), out
    again = multis('index', str(REPO/'data'), '--scope', 'kb', '--quiet', home=home, check=0).stdout
    assert '0 indexed (0 chunks), 4 unchanged, 0 failed' in again
    assert (home/'multis.db').exists()
    hits = json.loads(multis('search', 'pairing code', '--json', home=home, check=0).stdout)
    assert hits and 'pair' in (hits[0]['name'] + hits[0]['content']).lower()
    assert hits[0]['file_path'] == str(REPO/'data'/'multis-handbook.pdf')
    assert hits[0]['page_start'] >= 1 and hits[0]['bm25'] > 0
    text = multis('search', 'pairing code', '--limit', '3', home=home, check=0).stdout
    assert text.startswith('1. ') and 'score ' in text and 'multis-handbook.pdf' in text
    docs = multis('docs', home=home, check=0).stdout
    assert '4 files' in docs and 'garden-guide.md' in docs

def test_search_records_accesses(tmp_path):
    home = tmp_path/'home'
    multis('index', str(REPO/'data'), '--scope', 'kb', '--quiet', home=home, check=0)
    first = json.loads(multis('search', 'tomatoes', '--json', home=home, check=0).stdout)
    assert first and all(h['activation'] == 0 for h in first)
    again = json.loads(multis('search', 'tomatoes', '--json', '--no-record', home=home, check=0).stdout)
    assert all(h['activation'] > 0 for h in again)

def test_scope_option_limits_search(tmp_path):
    home = tmp_path/'home'
    notes = tmp_path/'private'; notes.mkdir()
    (notes/'salary.md').write_text('# Salary\nMy salary review is in March.\n')
    multis('index', str(REPO/'data'), '--scope', 'kb', '--quiet', home=home, check=0)
    multis('index', str(notes), '--scope', 'admin', '--quiet', home=home, check=0)
    kb = json.loads(multis('search', 'salary review', '--scope', 'kb', '--json', home=home, check=0).stdout)
    assert all(h['scope'] == 'kb' for h in kb)
    owner = json.loads(multis('search', 'salary review', '--json', home=home, check=0).stdout)
    assert owner[0]['scope'] == 'admin'

@pytest.mark.parametrize('args,msg', [
    (['index', 'data'], 'say who may search these documents'),
    (['index', 'no/such/file.pdf', '--scope', 'kb'], 'file.pdf: no such file'),
    (['search', 'water', '--scope', 'user:1 OR 1'], "unknown scope 'user:1 OR 1'"),
    (['search', 'water', '--limit', '0'], 'limit must be at least 1'),
    (['eval', 'no/such/folder'], 'BEIR folder not found'),
])
def test_bad_input_is_one_clear_line(tmp_path, args, msg):
    r = multis(*args, home=tmp_path/'home')
    assert r.returncode == 1
    assert r.stderr.startswith('multis: ') and msg in r.stderr and 'Traceback' not in r.stderr

def test_usage_errors_exit_2(tmp_path):
    r = multis('index', 'data', '--scope', 'everyone', home=tmp_path/'home')
    assert r.returncode == 2 and 'invalid choice' in r.stderr
    assert multis('frobnicate', home=tmp_path/'home').returncode == 2

def test_failed_files_are_reported(tmp_path):
    d = tmp_path/'docs'; d.mkdir()
    (d/'good.md').write_text('# Good\nfine text\n')
    (d/'bad.pdf').write_bytes(b'%PDF-1.4 garbage')
    (d/'empty.txt').write_text('')
    r = multis('index', str(d), '--scope', 'kb', '--quiet', home=tmp_path/'home')
    assert r.returncode == 1
    assert '1 indexed' in r.stdout and '2 failed' in r.stdout
    assert 'bad.pdf:' in r.stdout and 'empty.txt: empty file' in r.stdout

def test_corrupt_database_is_a_clear_error(tmp_path):
    home = tmp_path/'home'; home.mkdir()
    (home/'multis.db').write_bytes(b'garbage' * 1000)
    r = multis('search', 'water', home=home)
    assert r.returncode == 1 and 'not a usable multis database' in r.stderr
    assert (home/'multis.db').read_bytes() == b'garbage' * 1000

def test_eval_scifact(scifact, tmp_path):
    r = multis('eval', str(scifact), '--split', 'test', '--json', home=tmp_path/'home', check=0)
    res = json.loads(r.stdout)
    assert res['queries'] == 300
    assert res['ndcg@10'] >= 0.69    # 0.6916 with the tuned name weight (0.6865 before)

def test_malformed_config_is_named_with_its_line(tmp_path):
    home = tmp_path/'home'; home.mkdir()
    (home/'config.json').write_text('{\n  "search": {\n    "decay": 0.5,\n  }\n}\n')
    r = multis('search', 'water', home=home)
    assert r.returncode == 1 and 'Traceback' not in r.stderr
    assert f"{home/'config.json'}: invalid JSON at line 4" in r.stderr

def test_config_type_errors_name_the_key(tmp_path):
    home = tmp_path/'home'; home.mkdir()
    (home/'config.json').write_text('{"search": {"activation_weight": "lots"}}')
    r = multis('search', 'water', home=home)
    assert r.returncode == 1 and "search.activation_weight must be a number, got 'lots'" in r.stderr

def test_config_settings_change_the_search(tmp_path):
    home = tmp_path/'home'; home.mkdir()
    multis('index', str(REPO/'data'), '--scope', 'kb', '--quiet', home=home, check=0)
    multis('search', 'tomatoes', '--limit', '3', home=home, check=0)   # records accesses
    (home/'config.json').write_text('{"search": {"activation_weight": 0}}')
    hits = json.loads(multis('search', 'tomatoes', '--json', '--no-record', home=home, check=0).stdout)
    assert all(h['score'] == h['bm25'] for h in hits) and any(h['activation'] > 0 for h in hits)

def test_main_job_chat_through_stdin(tmp_path):
    "The README's main job ends in `multis chat`: a question, a search and /help typed on stdin"
    home = tmp_path/'home'
    multis('index', str(REPO/'data'), '--scope', 'kb', '--quiet', home=home, check=0)
    r = subprocess.run([MULTIS, 'chat'], input='how do I pair my phone?\n/search tomatoes\n/help\n/quit\n', capture_output=True,
                       text=True, timeout=120, env={**os.environ, 'MULTIS_HOME': str(home)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith('multis chat:')
    assert 'No language model is configured' in r.stdout and '[multis-handbook.pdf, page 4]' in r.stdout
    assert 'garden-guide.md' in r.stdout or 'recipes.txt' in r.stdout        # /search tomatoes
    assert '/exec' in r.stdout                                              # /help as the owner
    assert 'Traceback' not in r.stdout + r.stderr

def test_init_start_status_stop_through_the_cli(tmp_path):
    "The daemon's life cycle as a user drives it: init, start, status, a second start refused, stop"
    home = tmp_path/'home'
    r = multis('init', '--non-interactive', home=home, check=0)
    cfg = json.loads((home/'config.json').read_text())
    assert cfg['pairing_code'] and cfg['pairing_code'] in r.stdout
    assert (home/'config.json').stat().st_mode & 0o777 == 0o600
    try:
        multis('start', home=home, check=0)
        assert 'running' in multis('status', home=home, check=0).stdout
        assert multis('start', home=home).returncode == 1
    finally:
        multis('stop', home=home, check=0)
    st = multis('status', home=home)
    assert st.returncode == 3 and 'not running' in st.stdout


# --- issue 14: contract slips and one-line errors ---

def test_null_means_unset_in_config(tmp_path):
    "`null` is JSON's 'not set': for owner_id before anyone paired, and for any optional key, nested too"
    home = tmp_path/'home'; home.mkdir()
    (home/'config.json').write_text(json.dumps({'owner_id': None, 'pairing_code': None, 'allowed_users': None,
        'llm': {'provider': None, 'model': None, 'timeout': None}, 'search': {'decay': None}, 'service': None,
        'platforms': {'telegram': {'base_url': None}}}))
    r = multis('search', 'water', home=home)
    assert (r.returncode, r.stderr) == (0, ''), r.stderr
    r = multis('init', '--non-interactive', home=home, check=0)
    assert 'the first to pair becomes the owner' in r.stdout
    cfg = json.loads((home/'config.json').read_text())
    assert cfg['owner_id'] == '' and cfg['search']['decay'] == 0.5 and cfg['pairing_code']


def test_search_shows_ten_hits_by_default(tmp_path):
    home = tmp_path/'home'
    multis('index', str(REPO/'data'), '--scope', 'kb', '--quiet', home=home, check=0)
    many = json.loads(multis('search', 'the tomatoes garden water', '--json', '--limit', '50', '--no-record', home=home, check=0).stdout)
    assert len(many) > 10
    hits = json.loads(multis('search', 'the tomatoes garden water', '--json', '--no-record', home=home, check=0).stdout)
    assert len(hits) == 10
    text = multis('search', 'the tomatoes garden water', '--no-record', home=home, check=0).stdout
    assert re.search(r'^10\. ', text, re.M) and not re.search(r'^11\. ', text, re.M)


VERBS_ON_A_HOME = [('search', 'water'), ('chat',), ('index', str(REPO/'data'), '--scope', 'kb', '--quiet'), ('docs',),
                   ('ask', 'water?'), ('init', '--non-interactive'), ('start',), ('start', '--foreground'), ('migrate',),
                   ('serve', '--port', '0'), ('status',), ('stop',), ('eval', str(REPO/'data'))]


def _one_clear_line(r):
    "No traceback; a failure is one line on stderr, anything else (0, or 3: status says not running) none"
    assert 'Traceback' not in r.stdout + r.stderr, r.stderr
    if r.returncode == 1: assert r.stderr.startswith('multis: ') and len(r.stderr.strip().splitlines()) == 1, r.stderr
    else: assert r.returncode in (0, 3) and r.stderr == '', (r.returncode, r.stderr)


@pytest.mark.parametrize('args', VERBS_ON_A_HOME, ids=lambda a: ' '.join(a[:2]))
def test_home_that_is_a_file_is_one_line(tmp_path, args):
    home = tmp_path/'home'; home.write_text('not a folder')
    r = subprocess.run([MULTIS, *args], input='hello\n/quit\n', capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'MULTIS_HOME': str(home)})
    _one_clear_line(r)
    assert r.returncode == 1 and f"the multis home {home} is a file, not a folder: set MULTIS_HOME to a folder" in r.stderr
    assert home.read_text() == 'not a folder'


def _read_only():
    "Run as an ordinary user would: as root, drop the capabilities that ignore file permissions (in the child only)"
    if os.geteuid() != 0: return
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3): libc.prctl(24, cap, 0, 0, 0)     # PR_CAPBSET_DROP: DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER


@pytest.fixture
def read_only_home(tmp_path):
    home = tmp_path/'home'; home.mkdir()
    home.chmod(0o500)
    probe = subprocess.run([sys.executable, '-c', f"open({str(home/'x')!r}, 'w')"], preexec_fn=_read_only, capture_output=True)
    assert probe.returncode != 0, 'could not make a read-only home for the test'
    yield home
    home.chmod(0o700)


@pytest.mark.parametrize('args', VERBS_ON_A_HOME, ids=lambda a: ' '.join(a[:2]))
def test_read_only_home_is_one_line(read_only_home, args):
    r = subprocess.run([MULTIS, *args], input='hello\n/quit\n', capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'MULTIS_HOME': str(read_only_home)}, preexec_fn=_read_only)
    _one_clear_line(r)
    if args[0] not in ('status', 'stop', 'eval'): assert r.returncode == 1 and str(read_only_home) in r.stderr, r.stderr
    assert list(read_only_home.iterdir()) == []


def _stale_temp(home):
    "A temp file a killed write left in chat memory (its process is gone)"
    dead = subprocess.Popen([sys.executable, '-c', 'pass']); dead.wait()
    chat = home/'memory'/'chats'/'terminal'; chat.mkdir(parents=True)
    (chat/'recent.json').write_text('[]')
    tmp = chat/f'.recent.json.{dead.pid}.0a1b2c3d.tmp'; tmp.write_text('[{"half": ')
    return tmp


def test_chat_removes_temp_files_interrupted_writes_left(tmp_path):
    home = tmp_path/'home'
    tmp = _stale_temp(home)
    r = subprocess.run([MULTIS, 'chat'], input='/quit\n', capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'MULTIS_HOME': str(home)})
    assert r.returncode == 0, r.stderr
    assert not tmp.exists() and (tmp.parent/'recent.json').read_text() == '[]'


# --- issue 14 item 5: `multis index` of a folder does not follow symlinks into denied files ---

def test_index_refuses_symlinks_into_denied_files(tmp_path):
    home = tmp_path/'home'
    secret = home/'memory'/'chats'/'other'/'memory.md'; secret.parent.mkdir(parents=True)
    secret.write_text('# Other chat\nthe zebra vault code is 8812\n')
    (home/'config.json').write_text('{"pairing_code": "ZEBRACODE1"}')
    docs = tmp_path/'Documents'/'inbox'; docs.mkdir(parents=True)
    (docs/'good.md').write_text('# Good\nzebra crossings are striped\n')
    (docs/'notes.md').symlink_to(secret)
    (docs/'settings.txt').symlink_to(home/'config.json')
    r = multis('index', str(docs), '--scope', 'kb', '--quiet', home=home)
    assert r.returncode == 1 and 'Traceback' not in r.stderr, r.stderr
    assert '1 indexed' in r.stdout and '2 failed' in r.stdout, r.stdout
    failed = [l for l in r.stdout.splitlines() if 'failed:' in l]        # one line per refused file
    assert len(failed) == 2 and all('is in a denied folder' in l for l in failed), r.stdout
    assert any('config.json' in l for l in failed) and '8812' not in r.stdout
    hits = json.loads(multis('search', 'zebra', '--json', '--no-record', home=home, check=0).stdout)
    assert [h['name'] for h in hits] == ['Good'] and not any('8812' in h['content'] for h in hits)
    # the single file too
    r = multis('index', str(docs/'notes.md'), '--scope', 'kb', home=home)
    assert r.returncode == 1 and r.stderr.startswith('multis: ') and 'denied' in r.stderr and '8812' not in r.stdout

def _tiny_beir(d):
    "Two documents, one judged query whose relevant document BM25 puts second"
    (d/'qrels').mkdir(parents=True)
    (d/'corpus.jsonl').write_text('\n'.join(json.dumps(x) for x in [
        {'_id': 'd1', 'title': 'Water tomatoes', 'text': 'Water the tomatoes: tomatoes want water, water and more water.'},
        {'_id': 'd2', 'title': 'Greenhouse', 'text': 'In a greenhouse tomatoes need water every morning.'}]))
    (d/'queries.jsonl').write_text(json.dumps({'_id': 'q1', 'text': 'water tomatoes'}))
    (d/'qrels'/'test.tsv').write_text('query-id\tcorpus-id\tscore\nq1\td2\t1\n')
    return d

def test_eval_with_a_rerank_stage(tmp_path):
    from multis.testing.fake_llm import FakeLLMServer
    beir, home = _tiny_beir(tmp_path/'beir'), tmp_path/'home'
    home.mkdir()
    plain = json.loads(multis('eval', str(beir), '--json', home=home, check=0).stdout)
    with FakeLLMServer() as srv:
        srv.reply = '2, 1'
        (home/'config.json').write_text(json.dumps({'llm': {'provider': 'openai', 'api_key': 'sk-test', 'base_url': srv.url + '/v1', 'model': 'gpt-test'},
                                                    'search': {'rerank': {'provider': 'llm', 'top': 5}}}))
        reranked = json.loads(multis('eval', str(beir), '--json', home=home, check=0).stdout)
        r = multis('eval', str(beir), home=home, check=0)
        without = json.loads(multis('eval', str(beir), '--json', '--no-rerank', home=home, check=0).stdout)
    assert plain['mrr@10'] == 0.5 and without == plain
    assert reranked['mrr@10'] == 1.0 and reranked['rerank'] == 'llm:gpt-test'
    assert r.stdout.startswith('rerank: llm:gpt-test, the first 5 hits of each query')

def test_eval_with_a_cross_encoder_that_is_not_there(tmp_path):
    beir, home = _tiny_beir(tmp_path/'beir'), tmp_path/'home'
    home.mkdir()
    (home/'config.json').write_text(json.dumps({'search': {'rerank': {'provider': 'cross-encoder', 'model': str(tmp_path/'no-model')}}}))
    r = multis('eval', str(beir), home=home)
    assert r.returncode == 1 and 'Traceback' not in r.stderr
    assert 'multis never downloads it' in r.stderr and len(r.stderr.strip().splitlines()) == 1
