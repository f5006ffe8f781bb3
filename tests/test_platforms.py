"The platform contract from outside: a toy platform installed through the `multis.platforms` entry point runs in the daemon; secrets declared once"
import json, logging, os, shutil, signal, subprocess, sys, time
from pathlib import Path
import pytest
from multis.config import DEFAULT_CONFIG, deep_merge, load_config, save_config, secret_keys, secret_values
from multis.retrieval.store import Store
from multis.documents.indexer import index_directory
from multis.run.daemon import RedactingFormatter, log_path, state_path
from multis.governance.audit import read_audit

TOY = Path(__file__).parent/'plugins'/'toy_platform'/'toy_platform.py'
DATA = Path(__file__).parent.parent/'data'
CODE, TOKEN = 'TIGER-42', 'toy-secret-token-1234'


@pytest.fixture
def plugin(tmp_path):
    "A folder on which `importlib.metadata` finds the toy platform as an installed distribution"
    d = tmp_path/'site'
    info = d/'toy_platform-0.1.dist-info'
    info.mkdir(parents=True)
    shutil.copy(TOY, d/'toy_platform.py')
    (info/'METADATA').write_text('Metadata-Version: 2.1\nName: toy_platform\nVersion: 0.1\n')
    (info/'entry_points.txt').write_text('[multis.platforms]\ntoy = toy_platform:ToyPlatform\n')
    return d


def _env(home, plugin, **kw):
    return {**os.environ, 'MULTIS_HOME': str(home), 'PYTHONPATH': os.pathsep.join([str(plugin), *sys.path]), **kw}


def _py(code, env): return subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=60)


def test_the_entry_point_registers_the_platform_everywhere(tmp_path, plugin):
    "Found by name; its defaults in the config, its secret in the one declaration (filled from its environment variable)"
    home = tmp_path/'home'; home.mkdir()
    code = ("import json; from multis.chat.platform import get_platform; from multis.config import load_config, platform_names, secret_keys\n"
            "cfg = load_config()\n"
            "print(json.dumps([platform_names(), get_platform('toy').__name__, cfg['platforms']['toy'], secret_keys()['platforms.toy.token']]))")
    r = _py(code, _env(home, plugin, TOY_TOKEN=TOKEN))
    assert r.returncode == 0, r.stderr
    names, cls, section, envs = json.loads(r.stdout)
    assert names[:2] == ['telegram', 'beeper'] and 'toy' in names and cls == 'ToyPlatform'
    assert section == {'enabled': False, 'folder': '', 'token': TOKEN, 'poll_interval': 0.05} and envs == ['TOY_TOKEN']
    r = _py("from multis.config import platform_names; print(platform_names())", {**os.environ, 'MULTIS_HOME': str(home)})
    assert 'toy' not in r.stdout                                                        # not installed: unknown


def _push(box, n, chat, text):
    with open(box/'inbox.jsonl', 'a') as f: f.write(json.dumps({'chat': chat, 'sender': chat, 'text': text, 'id': n}) + '\n')


def _replies(box, n, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        p = box/'outbox.jsonl'
        got = [json.loads(l) for l in p.read_text().splitlines()] if p.exists() else []
        if len(got) >= n: return got
        time.sleep(0.05)
    pytest.fail(f'{n} replies expected, got {got}')


def test_the_daemon_runs_a_plugin_platform(tmp_path, plugin):
    "`multis start --foreground` starts the toy platform, routes its messages (pairing, a question, a stranger) and replies"
    home, box = tmp_path/'home', tmp_path/'box'
    with Store(home/'multis.db') as st: index_directory(st, DATA, 'kb', progress=False)
    save_config(deep_merge(DEFAULT_CONFIG, {'pairing_code': CODE, 'platforms': {'toy': {'enabled': True, 'folder': str(box)}}}),
                home/'config.json')
    env = _env(home, plugin, TOY_TOKEN=TOKEN)
    proc = subprocess.Popen([sys.executable, '-c', 'from multis.cli import main; main()', 'start', '--foreground'], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 30
        while not (state_path(home).exists() and json.loads(state_path(home).read_text() or '{}').get('pid') == proc.pid):
            assert proc.poll() is None and time.monotonic() < end, proc.stderr.read() if proc.poll() is not None else 'not ready'
            time.sleep(0.05)
        assert json.loads(state_path(home).read_text())['platforms'] == {'toy': 'running'}
        _push(box, 1, '100', f'/start {CODE}')
        assert _replies(box, 1)[0] == {'chat': '100', 'text': 'Paired: you are the owner; send /help to see what you can do.'}
        _push(box, 2, '100', 'how do I pair my phone?')
        answer = _replies(box, 2)[1]['text']
        assert 'multis-handbook.pdf' in answer                                              # answered from the sample docs
        _push(box, 3, '200', 'hello?')
        assert _replies(box, 3)[2] == {'chat': '200', 'text': 'Send /start <code> to pair with this multis (the owner has the code).'}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None: proc.kill()
    out = proc.stdout.read()
    assert '  toy: running' in out and '  telegram: off' in out
    log = log_path(home).read_text()
    assert 'toy connected with token ***' in log and TOKEN not in log                    # the platform's declared secret
    assert [r['platform'] for r in read_audit(home, 'pair')] == ['toy']


def test_embeddings_key_from_the_environment(tmp_path, monkeypatch):
    "`embeddings.api_key` is a declared secret: filled from .env, and from the environment first"
    home = tmp_path/'home'; home.mkdir()
    save_config({'embeddings': {'provider': 'openai'}}, home/'config.json')
    (home/'.env').write_text('OPENAI_API_KEY=sk-from-dotenv-123\n')
    monkeypatch.delenv('OPENAI_API_KEY', raising=False)
    assert load_config(home/'config.json')['embeddings']['api_key'] == 'sk-from-dotenv-123'
    monkeypatch.setenv('OPENAI_API_KEY', 'sk-from-environ-456')
    assert load_config(home/'config.json')['embeddings']['api_key'] == 'sk-from-environ-456'
    save_config({'embeddings': {'provider': 'ollama'}}, home/'config.json')
    assert load_config(home/'config.json')['embeddings']['api_key'] == ''              # only for a provider that takes it


def test_service_tokens_are_redacted_in_logs_and_the_audit_log(tmp_path):
    from multis.chat.router import Router
    svc = 'svc-token-abcdef123456'
    assert 'service.tokens' in secret_keys()
    cfg = deep_merge(DEFAULT_CONFIG, {'pairing_code': CODE, 'service': {'tokens': {svc: {'read': ['kb']}}}})
    assert svc in secret_values(cfg)
    f = RedactingFormatter('%(message)s', secret_values(cfg))
    assert f.format(logging.LogRecord('x', logging.INFO, '', 0, 'request with %s', (svc,), None)) == 'request with ***'
    from multis.governance.audit import audit
    with Store(':memory:') as st: Router(st, cfg, home=tmp_path).close()                  # the router hands the audit log its secrets
    audit('search', home=tmp_path, query=f'find {svc} please')
    text = (tmp_path/'audit.log').read_text()
    assert 'find [redacted] please' in text and svc not in text


# --- multis init names no platform: a plugin's questions are its flags and wizard questions

TOY_INIT = '''from toy_platform import ToyPlatform
from multis.config import InitQuestion

class ToyWithInit(ToyPlatform):
    "The toy platform, with the `multis init` questions a plugin may declare"
    questions = (InitQuestion('toy_token', 'token', 'Toy token', 'the toy token (turns Toy on)', secret=True, enables=True, order=60),
                 InitQuestion('toy_folder', 'folder', 'Toy folder', 'where the toy inbox lives', order=61))
'''

@pytest.fixture
def init_plugin(plugin):
    "The toy platform with init questions, installed through the entry point"
    (plugin/'toy_init.py').write_text(TOY_INIT)
    (plugin/'toy_platform-0.1.dist-info'/'entry_points.txt').write_text('[multis.platforms]\ntoy = toy_init:ToyWithInit\n')
    return plugin


def _init(home, plugin, *args, stdin=None):
    code = 'import sys; from multis.cli import main; sys.exit(main(["init"] + sys.argv[1:]))'
    return subprocess.run([sys.executable, '-c', code, *args], env=_env(home, plugin), input=stdin, capture_output=True,
                          text=True, timeout=60, start_new_session=True)


def test_a_plugin_platform_gets_its_init_flags_and_questions(tmp_path, init_plugin):
    home = tmp_path/'home'
    r = _init(home, init_plugin, '--help')
    assert r.returncode == 0 and '--toy-token TOY_TOKEN' in r.stdout and 'the toy token (turns Toy on)' in r.stdout, r.stdout
    assert r.stdout.index('--beeper-token') < r.stdout.index('--toy-token') < r.stdout.index('--force')
    r = _init(home, init_plugin, '--non-interactive', '--toy-token', TOKEN, '--toy-folder', str(tmp_path/'box'))
    assert r.returncode == 0, r.stderr
    toy = json.loads((home/'config.json').read_text())['platforms']['toy']
    assert toy == {'enabled': True, 'folder': str(tmp_path/'box'), 'token': TOKEN, 'poll_interval': 0.05}
    assert '  toy: on (token set)' in r.stdout and TOKEN not in r.stdout + r.stderr
    assert r.stdout.index('  beeper: off') < r.stdout.index('  toy: on')
    # the wizard asks the toy's questions after the built-in ones (Matrix: no; Enter keeps the token, a new folder)
    r = _init(home, init_plugin, stdin='\n\nnone\nno\nno\n\nelsewhere\n')
    assert r.returncode == 0, r.stderr
    toy = json.loads((home/'config.json').read_text())['platforms']['toy']
    assert (toy['token'], toy['folder'], toy['enabled']) == (TOKEN, 'elsewhere', True)


def test_without_the_plugin_init_has_no_toy_flag(tmp_path):
    r = subprocess.run([sys.executable, '-c', 'import sys; from multis.cli import main; sys.exit(main(["init", "--non-interactive", "--toy-token", "x"]))'],
                       env={**os.environ, 'MULTIS_HOME': str(tmp_path/'home')}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and 'unrecognized arguments: --toy-token' in r.stderr
