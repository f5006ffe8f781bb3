"""The rerank stage: a real sentence-transformers CrossEncoder (a tiny model built here, since none can be downloaded)
and the chat model through the real openai client against a local server. Heavy imports happen inside the tests."""
import json, os, sys
from pathlib import Path
import pytest
from multis.core import DocChunk
from multis.retrieval.store import Store
from multis.retrieval.rerank import CrossEncoderReranker, RerankError, rerank_hits, passage, _models
from multis.answer.rerank import LLMReranker, reranker_for
from multis.testing.fake_llm import FakeLLMServer

WORDS = 'ducks fly south in winter geese swim the lake birds migrate where do go cold'.split()

def tiny_cross_encoder(folder, labels=1, seed=0):
    "A one-layer BERT cross-encoder with random weights, saved as sentence-transformers would load a downloaded one"
    torch = pytest.importorskip('torch'); transformers = pytest.importorskip('transformers')
    pytest.importorskip('sentence_transformers')
    folder.mkdir(parents=True, exist_ok=True)
    (folder/'vocab.txt').write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', *WORDS]) + '\n')
    tok = transformers.BertTokenizerFast(vocab_file=str(folder/'vocab.txt'), do_lower_case=True)
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(vocab_size=5 + len(WORDS), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=128, num_labels=labels)
    transformers.BertForSequenceClassification(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder

@pytest.fixture
def store(tmp_path):
    with Store(tmp_path/'m.db') as st:
        st.save([DocChunk('/birds.md', f'Note {i}', text) for i, text in enumerate([
            'Ducks fly south in winter.', 'Geese swim in the lake.', 'Where do birds go in the cold? Ducks migrate.',
            'Ducks swim.', 'Birds fly.', 'The lake is cold in winter.'])])
        yield st

def test_cross_encoder_orders_the_first_hits_by_its_own_scores(tmp_path, store):
    from sentence_transformers import CrossEncoder
    folder = tiny_cross_encoder(tmp_path/'ce')
    q = 'where do ducks go in winter'
    hits = store.search(q, limit=6)
    assert len(hits) >= 4
    ce = CrossEncoderReranker(str(folder)).check()
    out = rerank_hits(ce, q, hits, top=4)
    want = CrossEncoder(str(folder), device='cpu').predict([(q, passage(h)) for h in hits[:4]])
    assert [h.chunk_id for h in out[:4]] == [hits[i].chunk_id for i in sorted(range(4), key=lambda i: -want[i])]
    assert [h.chunk_id for h in out[4:]] == [h.chunk_id for h in hits[4:]]      # past `top`: search order
    assert [h.rank for h in out] == list(range(1, len(hits) + 1))

def test_a_model_not_on_the_machine_is_one_clear_error(tmp_path):
    with pytest.raises(RerankError, match='multis never downloads it'):
        CrossEncoderReranker('cross-encoder/surely-not-cached-here-L2').check()
    with pytest.raises(RerankError, match='multis never downloads it'):
        CrossEncoderReranker(str(tmp_path/'empty')).check()

def test_a_model_with_two_scores_per_pair_is_refused(tmp_path, store):
    folder = tiny_cross_encoder(tmp_path/'nli', labels=2)
    with pytest.raises(RerankError, match='gives 2 scores per pair'):
        CrossEncoderReranker(str(folder)).scores('ducks', ['Ducks fly.', 'Geese swim.'])
    hits = store.search('ducks', limit=4)
    assert [h.chunk_id for h in rerank_hits(CrossEncoderReranker(str(folder)), 'ducks', hits)] == [h.chunk_id for h in hits]

def test_without_sentence_transformers_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, 'sentence_transformers', None)
    with pytest.raises(RerankError, match=r"needs sentence-transformers: pip install 'multis\[semantic\]'"):
        CrossEncoderReranker('/no/such/model/for/import/test').check()

def test_the_chat_model_reranks_through_the_real_openai_client(store):
    q = 'ducks birds geese lake winter'
    hits = store.search(q, limit=5)
    assert len(hits) == 5
    with FakeLLMServer() as srv:
        srv.reply = lambda body: '5, 4'
        cfg = {'llm': {'provider': 'openai', 'api_key': 'sk-test', 'base_url': srv.url + '/v1', 'model': 'gpt-test', 'timeout': 5},
               'search': {'rerank': {'provider': 'llm'}}}
        r = reranker_for(cfg)
        assert isinstance(r, LLMReranker) and r.name == 'llm:gpt-test'
        out = rerank_hits(r, q, hits)
        assert [h.chunk_id for h in out] == [hits[i].chunk_id for i in (4, 3, 0, 1, 2)]
        body = srv.requests[-1]['body']
        assert body['temperature'] == 0 and body['messages'][-1]['content'].count('<<<data id=') == 5
        srv.fail(500, times=10)
        assert [h.chunk_id for h in rerank_hits(reranker_for(cfg), q, hits)] == [h.chunk_id for h in hits]   # search order kept

def _rerank_home(tmp_path, url:str):
    "A home whose config reranks with the chat model at `url`, and a store of the six bird notes"
    home = tmp_path/'home'; home.mkdir()
    (home/'config.json').write_text(json.dumps({
        'llm': {'provider': 'openai', 'api_key': 'sk-test', 'base_url': url + '/v1', 'model': 'gpt-test', 'timeout': 5},
        'search': {'rerank': {'provider': 'llm', 'top': 5}}}))
    with Store(home/'multis.db') as st:
        st.save([DocChunk('/birds.md', f'Note {i}', text) for i, text in enumerate([
            'Ducks fly south in winter.', 'Geese swim in the lake.', 'Where do birds go in the cold? Ducks migrate.',
            'Ducks swim.', 'Birds fly.', 'The lake is cold in winter.'])])
        return home, [h.name for h in st.search(Q, limit=5)]

Q = 'ducks birds geese lake winter'

def test_the_service_search_applies_the_configured_rerank_stage(tmp_path):
    from fastapi.testclient import TestClient
    from multis.config import load_config
    from multis.run.service import create_app
    from multis.run.guard import service_token
    with FakeLLMServer() as srv:
        srv.reply = lambda body: '5, 4'
        home, plain = _rerank_home(tmp_path, srv.url)
        assert len(plain) == 5
        app = create_app(home/'multis.db', load_config(home/'config.json', env=False), home)
        h = {'Authorization': f'Bearer {service_token(home)}'}
        with TestClient(app, base_url='http://127.0.0.1:5858') as c:
            got = c.post('/search', json={'query': Q, 'limit': 3, 'record': True}, headers=h).json()
            assert [x['name'] for x in got] == [plain[4], plain[3], plain[0]]
            assert len(srv.requests) == 1 and srv.requests[-1]['body']['messages'][-1]['content'].count('<<<data id=') == 5
            off = c.post('/search', json={'query': Q, 'limit': 3, 'rerank': False}, headers=h).json()
            assert len(srv.requests) == 1                                          # no model call
            with Store(home/'multis.db') as st:
                seen = {r[0] for r in st.conn.execute('SELECT chunk_id FROM access_history')}
            assert seen == {x['chunk_id'] for x in got}                            # the kept hits only
            srv.fail(500, times=10)
            kept = c.post('/search', json={'query': Q, 'limit': 3}, headers=h)
            assert kept.status_code == 200 and [x['name'] for x in kept.json()] == [x['name'] for x in off]   # search order

def test_the_mcp_search_tool_applies_the_configured_rerank_stage(tmp_path):
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    multis = str(Path(sys.executable).parent/'multis')
    with FakeLLMServer() as srv:
        srv.reply = lambda body: '3'
        home, plain = _rerank_home(tmp_path, srv.url)
        async def go():
            env = {'MULTIS_HOME': str(home), **{k: os.environ[k] for k in ('PYTHONPATH',) if k in os.environ}}
            params = StdioServerParameters(command=multis, args=['mcp'], env=env)
            async with stdio_client(params) as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    return (await s.call_tool('search', {'query': Q, 'limit': 2})).structured_content['result']
        got = anyio.run(go)
        assert [h['name'] for h in got] == [plain[2], plain[0]] and len(srv.requests) == 1
