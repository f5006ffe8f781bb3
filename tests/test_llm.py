"LLM providers through their official SDKs against a local fake server: requests, answers, every error kind, config"
import json, logging, socket, time, traceback
import pytest
from multis.answer.llm import (LLMError, LLM_ERROR_KINDS, Provider, AnthropicProvider, OpenAIProvider, OllamaProvider,
                               make_provider, DEFAULT_MODELS, PROVIDERS, provider_class, register_provider)
from multis.testing.providers import FakeProvider
from multis.testing.fake_llm import FakeLLMServer
from multis.config import load_config, save_config

NAMES = ['anthropic', 'openai', 'ollama']
PATHS = {'anthropic': '/v1/messages', 'openai': '/v1/chat/completions', 'ollama': '/api/chat'}
LABELS = {'anthropic': 'Anthropic', 'openai': 'OpenAI', 'ollama': 'Ollama'}
KEY = 'sk-SECRET-7f3a9c2e41b8'
Q = [{'role': 'user', 'content': 'What does the report say?'}]
CHAT = [{'role': 'user', 'content': 'Where is Sintra?'}, {'role': 'assistant', 'content': 'In Portugal.'},
        {'role': 'user', 'content': 'How far from Lisbon?'}]
ENV = ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_BASE_URL', 'ANTHROPIC_PROFILE', 'ANTHROPIC_CONFIG_DIR',
       'ANTHROPIC_CUSTOM_HEADERS', 'OPENAI_API_KEY', 'OPENAI_ADMIN_KEY', 'OPENAI_BASE_URL', 'OPENAI_ORG_ID',
       'OPENAI_PROJECT_ID', 'OPENAI_CUSTOM_HEADERS', 'OLLAMA_HOST', 'OLLAMA_API_KEY']

@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    "No developer key, URL or proxy setting may leak into a test"
    for k in ENV: monkeypatch.delenv(k, raising=False)
    for k in ('NO_PROXY', 'no_proxy'): monkeypatch.setenv(k, '127.0.0.1,localhost')

@pytest.fixture
def srv():
    with FakeLLMServer() as s: yield s

def make(name, url, key=KEY, **kw):
    "A provider of `name` talking to the server at `url`, with a short timeout and tiny backoff"
    kw = dict(timeout=0.3, backoff=0.001) | kw
    if name == 'anthropic': return AnthropicProvider('claude-test', key, base_url=url, **kw)
    if name == 'openai': return OpenAIProvider('gpt-test', key, base_url=url + '/v1', **kw)
    return OllamaProvider('llama-test', host=url, **kw)

def fails(p, *args, **kw)->LLMError:
    with pytest.raises(LLMError) as ei: p.generate(*args, **kw)
    return ei.value

def dead_url()->str:
    s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()
    return f"http://127.0.0.1:{port}"

# ---- requests and answers

@pytest.mark.parametrize('name', NAMES)
def test_request_carries_prompt_and_answer_comes_back(srv, name):
    p = make(name, srv.url)
    assert isinstance(p, Provider) and p.name == name
    srv.reply = '  The report says revenue grew.\n'
    assert p.generate('Answer from the documents.', CHAT, max_tokens=77) == 'The report says revenue grew.'
    assert len(srv.requests) == 1
    req = srv.requests[0]
    body = req['body']
    assert req['path'] == PATHS[name] and body['model'] == p.model
    if name == 'anthropic':
        assert (body['system'], body['messages'], body['max_tokens']) == ('Answer from the documents.', CHAT, 77)
        assert req['headers']['authorization'] == f'Bearer {KEY}'
    elif name == 'openai':
        assert body['messages'] == [{'role': 'system', 'content': 'Answer from the documents.'}] + CHAT
        assert (body['max_tokens'], body['temperature']) == (77, 0.3)
        assert req['headers']['authorization'] == f'Bearer {KEY}'
    else:
        assert body['messages'] == [{'role': 'system', 'content': 'Answer from the documents.'}] + CHAT
        assert body['options'] == {'num_predict': 77, 'temperature': 0.3} and body['stream'] is False

@pytest.mark.parametrize('name', NAMES)
def test_defaults_and_empty_system(srv, name):
    p = make(name, srv.url, max_tokens=333)
    assert p.generate('', [{'role': 'user', 'content': 'hi', 'ts': '2025-01-01'}]) == 'You said: hi'
    body = srv.requests[-1]['body']
    assert body['messages'] == [{'role': 'user', 'content': 'hi'}]  # no system message, extra keys dropped
    assert 'system' not in body
    assert 333 in (body.get('max_tokens'), body.get('options', {}).get('num_predict'))

@pytest.mark.parametrize('name', NAMES)
def test_bad_messages_are_refused_before_sending(srv, name):
    p = make(name, srv.url)
    for bad in ([], [{'role': 'system', 'content': 'x'}], [{'role': 'user', 'content': None}], 'hi'):
        with pytest.raises(ValueError): p.generate('s', bad)
    assert srv.requests == []

# ---- retries

@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('status', [429, 500, 503, 529])
def test_retried_then_succeeds(srv, name, status):
    srv.reply = 'ok'
    srv.fail(status, times=2)
    assert make(name, srv.url).generate('', Q) == 'ok'
    assert len(srv.requests) == 3

@pytest.mark.parametrize('name', NAMES)
def test_rate_limit_exhausted(srv, name):
    srv.fail(429, times=5)
    e = fails(make(name, srv.url), '', Q)
    assert (e.kind, e.provider, e.status) == ('rate_limit', name, 429)
    assert str(e) == f"{LABELS[name]} is rate limiting requests (429); tried 3 times, try again in a minute"
    assert len(srv.requests) == 3

@pytest.mark.parametrize('name', NAMES)
def test_server_error_exhausted_with_fewer_retries(srv, name):
    srv.fail(503, times=5)
    e = fails(make(name, srv.url, retries=1), '', Q)
    assert (e.kind, e.status) == ('server', 503)
    assert str(e) == f"{LABELS[name]} had a server error (503); tried twice, try again later"
    assert len(srv.requests) == 2

@pytest.mark.parametrize('name', NAMES)
def test_retry_after_is_honoured(srv, name):
    srv.reply = 'ok'
    srv.fail(429, retry_after=0.05)
    t0 = time.monotonic()
    assert make(name, srv.url, backoff=20).generate('', Q) == 'ok'  # a 20 s backoff would blow the time
    assert time.monotonic() - t0 < 3

@pytest.mark.parametrize('name', NAMES)
def test_backoff_grows_between_attempts(srv, name):
    srv.fail(500, times=2)
    srv.reply = 'ok'
    t0 = time.monotonic()
    assert make(name, srv.url, backoff=0.1).generate('', Q) == 'ok'
    assert time.monotonic() - t0 >= 0.3  # 0.1 then 0.2

# ---- errors that are not retried

@pytest.mark.parametrize('name', NAMES)
def test_wrong_key_401(srv, name):
    srv.key = 'sk-the-right-key'
    e = fails(make(name, srv.url, key='sk-a-wrong-key'), '', Q)
    assert (e.kind, e.status) == ('auth', 401)
    assert str(e).startswith(f"{LABELS[name]} rejected the API key (401): ")
    if name != 'ollama': assert f"check llm.api_key in config.json or {name.upper()}_API_KEY in " in str(e)
    assert len(srv.requests) == 1

@pytest.mark.parametrize('name', NAMES)
def test_timeout(srv, name):
    srv.delay = 3
    t0 = time.monotonic()
    e = fails(make(name, srv.url), '', Q)
    assert time.monotonic() - t0 < 2
    assert e.kind == 'timeout'
    assert str(e) == f"{LABELS[name]} did not answer within 0.3 s (llm.timeout)"
    assert len(srv.requests) == 1

@pytest.mark.parametrize('name', NAMES)
def test_unreachable(name):
    url = dead_url()
    e = fails(make(name, url), '', Q)
    assert e.kind == 'unreachable'
    where = url + '/v1' if name == 'openai' else url
    assert str(e).startswith(f"cannot reach {LABELS[name]} at {where}: is it running?")

@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('mode,detail', [('no_text', 'no text in the response'), (True, 'no text in the response'),
                                         ('not_json', 'not JSON')])
def test_malformed_reply(srv, name, mode, detail):
    srv.malformed = mode
    e = fails(make(name, srv.url), '', Q)
    assert e.kind == 'bad_reply'
    assert str(e) == f"{LABELS[name]} returned a reply multis could not read ({detail})"
    assert len(srv.requests) == 1

@pytest.mark.parametrize('name', NAMES)
def test_empty_answer_is_a_bad_reply(srv, name):
    srv.reply = '   '
    assert fails(make(name, srv.url), '', Q).kind == 'bad_reply'

@pytest.mark.parametrize('name', NAMES)
def test_bad_request_and_not_found(srv, name):
    p = make(name, srv.url)
    srv.fail(400, body={'ollama': {'error': 'max_tokens too large'}}.get(name, {'error': {'message': 'max_tokens too large'}}))
    e = fails(p, '', Q)
    assert (e.kind, str(e)) == ('bad_request', f"{LABELS[name]} refused the request (400): max_tokens too large")
    srv.fail(404)
    e = fails(p, '', Q)
    assert e.kind == 'not_found' and f"no model '{p.model}' (404)" in str(e)
    assert len(srv.requests) == 2

def test_error_kinds_are_closed():
    assert set(LLM_ERROR_KINDS) == {'no_key', 'auth', 'rate_limit', 'server', 'timeout', 'unreachable', 'bad_reply',
                                    'bad_request', 'not_found', 'config'}
    with pytest.raises(ValueError): LLMError('x', 'kaboom')

# ---- the key never shows

def _every_failure(srv, name, key):
    "Provoke each kind of failure once; yield the LLMError"
    p = make(name, srv.url, key=key)
    srv.key = 'sk-the-right-key'; yield fails(p, '', Q); srv.key = None
    srv.fail(429, times=3); yield fails(p, '', Q)
    srv.fail(500, times=3); yield fails(p, '', Q)
    srv.fail(400, body={'error': {'message': f'invalid header value Bearer {key}'}}); yield fails(p, '', Q)
    srv.fail(404); yield fails(p, '', Q)
    srv.malformed = 'not_json'; yield fails(p, '', Q); srv.malformed = False
    srv.delay = 1; yield fails(p, '', Q); srv.delay = 0
    yield fails(make(name, dead_url(), key=key), '', Q)

@pytest.mark.parametrize('name', ['anthropic', 'openai'])
def test_key_never_in_messages_logs_or_tracebacks(srv, name, caplog):
    caplog.set_level(logging.DEBUG)
    errors = list(_every_failure(srv, name, KEY))
    assert {e.kind for e in errors} == {'auth', 'rate_limit', 'server', 'bad_request', 'not_found', 'bad_reply',
                                        'timeout', 'unreachable'}
    assert any(KEY in r['headers'].get('authorization', '') for r in srv.requests)  # the key was really sent
    for e in errors:
        assert KEY not in str(e)
        assert KEY not in ''.join(traceback.format_exception(e))
        assert e.__cause__ is None and e.__context__ is None
    assert "refused the request (400): invalid header value Bearer ***" in str(errors[3])
    assert caplog.records and KEY not in caplog.text
    assert any('rate limiting' in r.getMessage() for r in caplog.records)
    assert KEY not in repr(make(name, srv.url)) and KEY not in str(make(name, srv.url))

def test_no_key_message_names_where_it_goes(home):
    e = fails_build(lambda: AnthropicProvider('claude-test', ''))
    assert e.kind == 'no_key' and 'ANTHROPIC_API_KEY' in str(e) and 'llm.api_key' in str(e)
    e = fails_build(lambda: OpenAIProvider('gpt-test'))
    assert e.kind == 'no_key' and 'OPENAI_API_KEY' in str(e)
    assert OpenAIProvider('local', base_url='http://127.0.0.1:1/v1').official is False  # a local server needs none

def fails_build(f)->LLMError:
    with pytest.raises(LLMError) as ei: f()
    return ei.value

def test_openai_model_without_temperature(srv):
    p = make('openai', srv.url)
    srv.fail(400, body={'error': {'message': "Unsupported value: 'temperature' does not support 0.3 with this model.",
                                  'type': 'invalid_request_error', 'param': 'temperature', 'code': 'unsupported_value'}})
    assert p.generate('', Q) == f"You said: {Q[0]['content']}"
    p.generate('', Q)
    assert [r['body'].get('temperature') for r in srv.requests] == [0.3, None, None]

def test_official_openai_url_uses_max_completion_tokens(monkeypatch):
    p = OpenAIProvider('gpt-test', KEY)
    assert p.official and p.url == 'https://api.openai.com/v1'
    sent = {}
    def create(**kw): sent.update(kw); raise RuntimeError('no network in tests')
    monkeypatch.setattr(p._client.chat.completions, 'create', create)
    with pytest.raises(RuntimeError): p.generate('sys', Q, max_tokens=50)
    assert sent['max_completion_tokens'] == 50 and 'max_tokens' not in sent

# ---- config

def test_make_provider_from_config_and_dotenv(home, srv):
    home.mkdir(parents=True)
    (home/'.env').write_text('ANTHROPIC_API_KEY=sk-ant-from-dotenv\nOPENAI_API_KEY=sk-openai-from-dotenv\n')
    save_config({'llm': {'provider': 'anthropic', 'base_url': srv.url, 'timeout': 5, 'max_tokens': 321}})
    p = make_provider(load_config(), backoff=0.001)
    assert isinstance(p, AnthropicProvider) and p.model == DEFAULT_MODELS['anthropic']
    assert p.generate('sys', Q) == f"You said: {Q[0]['content']}"
    req = srv.requests[-1]
    assert req['path'] == '/v1/messages' and req['headers']['authorization'] == 'Bearer sk-ant-from-dotenv'
    assert req['body']['max_tokens'] == 321 and p.timeout == 5
    # switching provider is a change of config, nothing else
    save_config({'llm': {'provider': 'openai', 'base_url': srv.url + '/v1', 'model': 'gpt-local'}})
    p = make_provider(load_config())
    p.generate('sys', Q)
    assert srv.requests[-1]['path'] == '/v1/chat/completions'
    assert srv.requests[-1]['headers']['authorization'] == 'Bearer sk-openai-from-dotenv'
    assert srv.requests[-1]['body']['model'] == 'gpt-local'
    save_config({'llm': {'provider': 'ollama', 'base_url': srv.url}})
    p = make_provider(load_config())
    p.generate('sys', Q)
    assert srv.requests[-1]['path'] == '/api/chat' and srv.requests[-1]['body']['model'] == DEFAULT_MODELS['ollama']

def test_config_key_wins_over_dotenv(home, srv):
    home.mkdir(parents=True)
    (home/'.env').write_text('ANTHROPIC_API_KEY=sk-ant-from-dotenv\n')
    save_config({'llm': {'provider': 'anthropic', 'api_key': 'sk-ant-in-config', 'base_url': srv.url}})
    make_provider(load_config()).generate('', Q)
    assert srv.requests[-1]['headers']['authorization'] == 'Bearer sk-ant-in-config'

def test_make_provider_errors_and_none(home):
    assert make_provider(load_config()) is None
    assert make_provider({}) is None
    with pytest.raises(LLMError, match="unknown llm.provider 'gemini'.*anthropic, openai, ollama") as ei:
        make_provider({'llm': {'provider': 'gemini'}})
    assert ei.value.kind == 'config'
    for name in ('anthropic', 'openai'):
        with pytest.raises(LLMError) as ei: make_provider({'llm': {'provider': name}})
        assert ei.value.kind == 'no_key'
    p = make_provider({'llm': {'provider': 'openai', 'base_url': 'http://127.0.0.1:8080/v1'}})
    assert p.url == 'http://127.0.0.1:8080/v1'

def test_ollama_host_from_environment(monkeypatch, srv):
    monkeypatch.setenv('OLLAMA_HOST', srv.url)
    p = make_provider({'llm': {'provider': 'ollama'}})
    assert p.host == srv.url
    p.generate('', Q)
    assert srv.requests[-1]['path'] == '/api/chat'
    monkeypatch.delenv('OLLAMA_HOST')
    assert make_provider({'llm': {'provider': 'ollama'}}).host == 'http://127.0.0.1:11434'

# ---- the registry

def test_registry_holds_the_three_providers_and_their_secret_keys():
    assert PROVIDERS == {'anthropic': AnthropicProvider, 'openai': OpenAIProvider, 'ollama': OllamaProvider}
    assert {n: c.secret_keys for n,c in PROVIDERS.items()} == {'anthropic': ('llm.api_key',), 'openai': ('llm.api_key',), 'ollama': ()}
    assert 'fake' not in PROVIDERS and FakeProvider not in PROVIDERS.values()

def test_a_new_provider_is_one_class_and_one_registration(monkeypatch):
    monkeypatch.setattr('multis.answer.llm.PROVIDERS', dict(PROVIDERS))
    monkeypatch.setattr('multis.answer.llm.DEFAULT_MODELS', dict(DEFAULT_MODELS))
    @register_provider
    class Shout(FakeProvider):
        name, default_model = 'shout', 'loud-1'
        @classmethod
        def _endpoint(cls, llm): return dict(replies=lambda s, m: m[-1]['content'].upper())
    p = make_provider({'llm': {'provider': ' Shout', 'max_tokens': 9}})
    assert isinstance(p, Shout) and (p.model, p.max_tokens) == ('loud-1', 9)
    assert p.generate('', Q) == Q[0]['content'].upper()
    from multis.answer import llm
    assert llm.DEFAULT_MODELS['shout'] == 'loud-1'
    with pytest.raises(TypeError, match='not a Provider class'): register_provider(int)

def _plugin_dist(tmp_path, group:str, line:str, module:str, code:str):
    "A tiny installed distribution on `tmp_path` whose entry point `line` lives in `group`"
    (tmp_path/f'{module}.py').write_text(code)
    di = tmp_path/f'{module}-0.1.dist-info'
    di.mkdir()
    (di/'METADATA').write_text(f'Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n')
    (di/'entry_points.txt').write_text(f'[{group}]\n{line}\n')

def test_provider_from_an_installed_package_entry_point(tmp_path, monkeypatch):
    _plugin_dist(tmp_path, 'multis.llm_providers', 'parrot = multis_toy_llm:Parrot', 'multis_toy_llm',
                 "from multis.testing.providers import FakeProvider\n"
                 "class Parrot(FakeProvider):\n    name, default_model = 'parrot', 'polly'\n"
                 "    @classmethod\n    def _endpoint(cls, llm): return dict(replies=['squawk'])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr('multis.answer.llm.PROVIDERS', dict(PROVIDERS))
    monkeypatch.setattr('multis.answer.llm.DEFAULT_MODELS', dict(DEFAULT_MODELS))
    p = make_provider({'llm': {'provider': 'parrot'}})
    assert type(p).__name__ == 'Parrot' and p.model == 'polly' and p.generate('', Q) == 'squawk'
    assert provider_class('parrot') is type(p)
    with pytest.raises(LLMError, match="unknown llm.provider 'gemini'.*ollama, parrot"): make_provider({'llm': {'provider': 'gemini'}})

def test_provider_secret_keys_are_in_the_one_config_declaration():
    from multis.config import SECRET_KEYS
    for name, cls in PROVIDERS.items():
        for k in cls.secret_keys: assert cls.key_env in SECRET_KEYS[k][name], (name, k)

# ---- FakeProvider

def test_fake_provider_scripts_replies_and_records_calls():
    fake = FakeProvider(['first', LLMError('Fake had a server error (500); tried once, try again later', 'server', 'fake'), 'last'])
    assert fake.generate('sys', Q, max_tokens=10) == 'first'
    with pytest.raises(LLMError) as ei: fake.generate('sys', Q)
    assert ei.value.kind == 'server'
    assert [fake.generate('', Q) for _ in range(2)] == ['last', 'last']
    assert fake.calls[0] == {'system': 'sys', 'messages': Q, 'max_tokens': 10, 'temperature': 0.3}
    assert len(fake.calls) == 4
    assert FakeProvider().generate('', CHAT) == 'Echo: How far from Lisbon?'
    assert FakeProvider(lambda s, m: f"{s}:{m[-1]['content']}").generate('S', Q) == f"S:{Q[0]['content']}"
    assert isinstance(fake, Provider) and fake.name == 'fake'
