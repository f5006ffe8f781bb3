"A chat end to end: real SQLite file, real SDK against a fake API server, memory and facts across messages"
import json
from pathlib import Path
import pytest
from conftest import REPO
from multis.config import DEFAULT_CONFIG, deep_merge
from multis.memory.conversation import Conversation
from multis.testing.fake_llm import FakeLLMServer
from multis.documents.indexer import index_directory
from multis.answer.llm import AnthropicProvider, LLMError
from multis.testing.providers import FakeProvider
from multis.retrieval.store import Store

@pytest.fixture
def store(tmp_path):
    with Store(tmp_path/'multis.db') as st:
        index_directory(st, REPO/'data', 'kb', progress=False)
        yield st

def _summariser(summary):
    def reply(system, messages):
        return summary if messages[-1]['content'].startswith('The conversation') else 'An answer.'
    return reply

def test_twenty_messages_capture_once_into_this_chat_only(store, tmp_path):
    model = FakeProvider(_summariser('- The user is planning a trip to Lisbon in May.'))
    with Conversation(store, DEFAULT_CONFIG, provider=model, home=tmp_path) as conv:
        for i in range(10): conv.reply('alice', f'question number {i} about the garden?', now=1000.0 + i)
        conv.worker.wait(10)
        captures = [c for c in model.calls if c['messages'][-1]['content'].startswith('The conversation')]
        assert len(captures) == 1
        mem = conv.memory('alice')
        assert 'trip to Lisbon in May' in mem.load_memory()
        assert len(mem.load_recent()) <= DEFAULT_CONFIG['memory']['keep_recent'] + 1
        found = store.search('Lisbon trip May', scopes=['kb', mem.scope])
        assert found[0].element_type == 'memory_summary'
        other = conv.memory('bob')
        assert all(h.element_type != 'memory_summary' for h in store.search('Lisbon trip May', scopes=['kb', other.scope]))
        conv.reply('alice', 'when is my trip?', now=2000.0)
        assert 'trip to Lisbon in May' in model.calls[-1]['system']          # memory.md in the system prompt

def test_failing_capture_loses_no_message(store, tmp_path):
    model = FakeProvider(lambda s, m: (_ for _ in ()).throw(LLMError('down', kind='server'))
                         if m[-1]['content'].startswith('The conversation') else 'ok')
    with Conversation(store, DEFAULT_CONFIG, provider=model, home=tmp_path) as conv:
        for i in range(12): conv.reply('carol', f'message {i}?', now=1000.0 + i)
        conv.worker.wait(10)
        window = conv.memory('carol').load_recent()
        assert [m['content'] for m in window if m['role'] == 'user'] == [f'message {i}?' for i in range(12)]
        assert conv.memory('carol').load_memory() == ''

def test_real_sdk_sees_memory_window_and_fenced_docs(store, tmp_path):
    with FakeLLMServer() as srv:
        srv.reply = 'Pair with /start and the code [multis-handbook.pdf, page 4].'
        provider = AnthropicProvider('claude-test', 'sk-test', base_url=srv.url, retries=0)
        cfg = deep_merge(DEFAULT_CONFIG, {'memory': {'capture_threshold': 100}})
        with Conversation(store, cfg, provider=provider, home=tmp_path) as conv:
            conv.memory('dan').append_memory('- Dan uses an Android phone.', now=900.0)
            conv.reply('dan', 'hello there', now=1000.0)
            a = conv.reply('dan', 'how do I pair my phone?', now=1001.0)
        body = srv.requests[-1]['body']
        system = body['system'] if isinstance(body['system'], str) else ' '.join(b['text'] for b in body['system'])
        assert 'Dan uses an Android phone.' in system and '--- [multis-handbook.pdf, page 4] ---' in system
        contents = [m['content'] if isinstance(m['content'], str) else m['content'][0]['text'] for m in body['messages']]
        assert contents[0] == 'hello there' and contents[-1] == 'how do I pair my phone?'
        assert a.text.startswith('Pair with /start') and 'multis-handbook.pdf, page 4' in a.sources

def test_facts_never_reach_the_model(store, tmp_path):
    model = FakeProvider(['should not be called'])
    with Conversation(store, DEFAULT_CONFIG, provider=model, home=tmp_path) as conv:
        assert conv.reply('eve', 'my top 3 films are 1. Alien 2. Heat 3. Ran').text.startswith('Noted')
        assert conv.reply('eve', 'what is my third favourite film?').text == 'Your third favourite film is Ran.'
        assert conv.reply('eve', 'what is my favourite colour?').text == "I don't have that stored yet."
        assert conv.reply('frank', 'what is my third favourite film?').text == "I don't have that stored yet."
    assert model.calls == []
