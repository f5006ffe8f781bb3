"multis init: --non-interactive with and without flags, re-runs, the wizard with scripted answers"
import json, os, re, subprocess, sys
from pathlib import Path
import pytest
from multis.config import load_config
from types import SimpleNamespace
from multis.cli import main as cli_main
from multis.run.onboarding import run_init, new_pairing_code, CODE_ALPHABET

INIT = 'import sys; from multis.cli import main; sys.exit(main(["init"] + sys.argv[1:]))'
TG = '123456789:AAH' + 'x'*32


def init_process(home, *args, stdin=None):
    "Run `multis init ARGS` in its own process and session (no terminal: getpass reads stdin)"
    return subprocess.run([sys.executable, '-c', INIT, *args], env={**os.environ, 'MULTIS_HOME': str(home)}, input=stdin,
                          capture_output=True, text=True, timeout=60, start_new_session=True)


@pytest.fixture
def init(monkeypatch, capsys):
    "init(home, *args) runs `multis init ARGS` in this process (faster); returns (returncode, stdout, stderr)"
    def run(home, *args):
        monkeypatch.setenv('MULTIS_HOME', str(home))
        try: code = cli_main(['init', *args])
        except SystemExit as e: code = e.code
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)
    return run


def saved(home): return json.loads((home/'config.json').read_text())


def code_in(out):
    m = re.search(r'^Pairing code: (\S+)$', out, re.M)
    return m and m.group(1)


def scripted(*answers):
    it = iter(answers)
    return lambda prompt: next(it)


def test_non_interactive_without_flags_writes_a_working_config(tmp_path):
    home = tmp_path/'home'
    r = init_process(home, '--non-interactive')
    assert r.returncode == 0, r.stderr
    cfg = saved(home)
    assert (home/'config.json').stat().st_mode & 0o777 == 0o600
    assert code_in(r.stdout) == cfg['pairing_code'] and len(cfg['pairing_code']) == 8
    assert set(cfg['pairing_code']) <= set(CODE_ALPHABET)
    assert f"Send /start {cfg['pairing_code']} to your bot (the first to pair becomes the owner)." in r.stdout
    assert load_config(home/'config.json', env=False) == cfg                     # loads without errors
    assert (cfg['platforms']['telegram']['enabled'], cfg['platforms']['beeper']['enabled'], cfg['llm']['provider']) == (False, False, '')


def test_flags_set_values_and_secrets_stay_out_of_the_output(tmp_path, init):
    home = tmp_path/'home'
    r = init(home, '--non-interactive', '--mode', 'business', '--telegram-token', TG, '--llm-provider', 'anthropic',
             '--llm-model', 'claude-test', '--llm-key', 'sk-ant-SECRET', '--beeper-token', 'bp-SECRET')
    assert r.returncode == 0, r.stderr
    cfg = saved(home)
    assert cfg['platforms']['beeper']['default_mode'] == 'business'
    assert cfg['platforms']['telegram'] | {} == {**cfg['platforms']['telegram'], 'enabled': True, 'bot_token': TG}
    assert (cfg['llm']['provider'], cfg['llm']['model'], cfg['llm']['api_key']) == ('anthropic', 'claude-test', 'sk-ant-SECRET')
    assert (cfg['platforms']['beeper']['enabled'], cfg['platforms']['beeper']['token']) == (True, 'bp-SECRET')
    for secret in (TG, 'sk-ant-SECRET', 'bp-SECRET'): assert secret not in r.stdout + r.stderr
    assert '  telegram: on (token set)' in r.stdout and '  model: anthropic claude-test, key set' in r.stdout


def test_rerun_keeps_values_unless_forced(tmp_path, init):
    home = tmp_path/'home'
    first = init(home, '--non-interactive', '--llm-provider', 'ollama', '--llm-model', 'qwen3')
    code = code_in(first.stdout)
    again = init(home, '--non-interactive')
    assert code_in(again.stdout) == code and saved(home)['llm']['model'] == 'qwen3'
    kept = init(home, '--non-interactive', '--llm-model', 'llama3.2', '--mode', 'business')
    assert kept.returncode == 0
    assert 'Kept the values config.json already has for --llm-model (add --force to replace them).' in kept.stdout
    assert (saved(home)['llm']['model'], saved(home)['platforms']['beeper']['default_mode']) == ('qwen3', 'business')
    forced = init(home, '--non-interactive', '--llm-model', 'llama3.2', '--force')
    assert saved(home)['llm']['model'] == 'llama3.2' and 'Kept' not in forced.stdout
    assert code_in(forced.stdout) == code
    new = init(home, '--non-interactive', '--new-code')
    assert code_in(new.stdout) == saved(home)['pairing_code'] != code


def test_existing_owner_and_other_keys_survive(tmp_path, init):
    home = tmp_path/'home'
    home.mkdir()
    (home/'config.json').write_text(json.dumps({'owner_id': '42', 'allowed_users': ['42'], 'pairing_code': 'TIGER-42',
                                                'search': {'decay': 0.4}}))
    r = init(home, '--non-interactive', '--beeper')
    cfg = saved(home)
    assert (cfg['owner_id'], cfg['allowed_users'], cfg['pairing_code'], cfg['search']['decay']) == ('42', ['42'], 'TIGER-42', 0.4)
    assert cfg['platforms']['beeper']['enabled'] is True
    assert 'Send /start TIGER-42 to your bot (others pair as users).' in r.stdout
    assert (init(home, '--non-interactive', '--no-beeper').returncode, saved(home)['platforms']['beeper']['enabled']) == (0, False)


def test_bad_input_is_refused_and_nothing_written(tmp_path, init):
    home = tmp_path/'home'
    r = init(home, '--non-interactive', '--telegram-token', 'not-a-token')
    assert (r.returncode, r.stderr.strip()) == (1, 'multis: that is not a Telegram bot token: @BotFather gives one like 123456789:AAH...')
    assert not (home/'config.json').exists()
    assert init(home, '--non-interactive', '--llm-provider', 'gemini').returncode == 2       # argparse: not a choice
    home.mkdir(exist_ok=True); (home/'config.json').write_text('{"llm": ')
    r = init(home, '--non-interactive')
    assert r.returncode == 1 and 'invalid JSON' in r.stderr
    assert (home/'config.json').read_text() == '{"llm": '


def test_wizard_with_scripted_answers(tmp_path):
    out = []
    cfg = run_init(interactive=True, home=tmp_path, say=out.append,
                   ask=scripted('business', 'openai', 'gpt-test', 'http://localhost:8080/v1', 'yes', 'no'),
                   ask_secret=scripted(TG, 'sk-openai', 'bp-token'))
    assert cfg['platforms']['beeper']['default_mode'] == 'business'
    assert (cfg['platforms']['telegram']['enabled'], cfg['platforms']['telegram']['bot_token']) == (True, TG)
    assert (cfg['llm']['provider'], cfg['llm']['model'], cfg['llm']['api_key'], cfg['llm']['base_url']) == \
        ('openai', 'gpt-test', 'sk-openai', 'http://localhost:8080/v1')
    assert (cfg['platforms']['beeper']['enabled'], cfg['platforms']['beeper']['token']) == (True, 'bp-token')
    assert saved(tmp_path) == cfg
    assert out[-1].splitlines()[-3] == f"Pairing code: {cfg['pairing_code']}"
    # again: Enter everywhere keeps everything
    again = run_init(interactive=True, home=tmp_path, say=out.append, ask=scripted('', '', '', '', '', ''), ask_secret=scripted('', '', ''))
    assert again == cfg
    # a wrong answer is asked again; '-' removes a token; 'none' removes the model
    prompts = []
    def ask(p): prompts.append(p); return answers.pop(0)
    answers = ['maybe', 'p', 'none', 'n', 'n']
    third = run_init(interactive=True, home=tmp_path, say=out.append, ask=ask, ask_secret=scripted('-'))
    assert '  Please answer personal or business.' in out
    assert prompts[0].endswith('(personal/business) [business]: ')
    assert (third['platforms']['beeper']['default_mode'], third['platforms']['telegram']['bot_token'], third['llm']['provider']) == ('personal', '', '')


def test_wizard_through_the_command_line(tmp_path):
    "The verb without --non-interactive asks its questions on stdin (getpass falls back to stdin without a terminal)"
    home = tmp_path/'home'
    r = init_process(home, stdin='personal\n\nnone\nno\nno\n')
    assert r.returncode == 0, r.stderr
    assert 'multis setup: Enter keeps the value in [brackets].' in r.stdout
    assert code_in(r.stdout) == saved(home)['pairing_code']
    r = init_process(home, stdin='business\n')                                  # input ends: nothing written
    assert r.returncode == 1 and 'init cancelled' in r.stderr
    assert saved(home)['platforms']['beeper']['default_mode'] == 'personal'


def test_pairing_codes_are_random():
    codes = {new_pairing_code() for _ in range(200)}
    assert len(codes) == 200 and all(len(c) == 8 for c in codes)


# --- issue 14 item 27: a local Bot API server ---

def test_local_bot_api_server_flag_and_its_tokens(tmp_path):
    home = tmp_path/'home'
    r = init_process(home, '--non-interactive', '--telegram-base-url', 'http://127.0.0.1:8081/bot', '--telegram-token', 'local-test-token')
    assert r.returncode == 0, r.stderr
    assert saved(home)['platforms']['telegram'] == {'enabled': True, 'bot_token': 'local-test-token', 'base_url': 'http://127.0.0.1:8081/bot'}
    assert '  telegram: on (token set, server http://127.0.0.1:8081/bot)' in r.stdout and 'local-test-token' not in r.stdout
    r = init_process(home, '--non-interactive', '--telegram-token', 'another-local-token', '--force')   # the server stays
    assert r.returncode == 0, r.stderr
    assert saved(home)['platforms']['telegram']['bot_token'] == 'another-local-token'


def test_short_tokens_of_telegrams_shape_pass(tmp_path):
    r = init_process(tmp_path/'home', '--non-interactive', '--telegram-token', '123:abc')
    assert r.returncode == 0, r.stderr
    assert saved(tmp_path/'home')['platforms']['telegram']['bot_token'] == '123:abc'


@pytest.mark.parametrize('args,msg', [
    (['--telegram-base-url', 'localhost:8081'], "must be an http(s) URL like http://localhost:8081/bot, not 'localhost:8081'"),
    (['--telegram-base-url', 'file:///etc/passwd'], 'must be an http(s) URL'),
    (['--telegram-base-url', 'http://h:99999/bot'], 'must be an http(s) URL'),
    (['--telegram-base-url', 'http://localhost:8081/api'], 'must be an http(s) URL'),
    (['--telegram-base-url', 'http://h/bot', '--telegram-token', 'a/b'], "a bot token cannot contain spaces, '/'"),
    (['--telegram-token', 'local-test-token'], 'that is not a Telegram bot token'),
])
def test_bad_server_or_token_is_one_line_and_writes_nothing(tmp_path, args, msg):
    r = init_process(tmp_path/'home', '--non-interactive', *args)
    assert r.returncode == 1 and r.stderr.startswith('multis: ') and msg in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path/'home'/'config.json').exists()
