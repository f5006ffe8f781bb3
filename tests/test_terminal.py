"`multis chat`'s loop: the terminal as a platform, driven through stdin in a subprocess"
import os, subprocess, sys
from pathlib import Path
import pytest
from multis.retrieval.store import Store
from multis.documents.indexer import index_directory
from multis.platforms.terminal import BANNER

REPO = Path(__file__).resolve().parents[1]
CHAT = [sys.executable, '-c', 'from multis.cli import main; main()', 'chat']


@pytest.fixture
def home(tmp_path):
    "A multis home with data/ indexed into kb and no model configured"
    h = tmp_path/'home'
    h.mkdir()
    with Store(h/'multis.db') as st: index_directory(st, REPO/'data', 'kb', progress=False)
    return h


def chat(home, text, timeout=60):
    env = {**os.environ, 'MULTIS_HOME': str(home)}
    for k in ('ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'OLLAMA_HOST'): env.pop(k, None)
    return subprocess.run(CHAT, input=text, capture_output=True, text=True, env=env, timeout=timeout)


def test_chat_session_through_stdin(home):
    p = chat(home, "/help\nhow do I pair my phone?\n/search pairing\n/quit\n/status\n")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert out.startswith(BANNER + '\n')
    for w in ['/index', '/exec', '/read', '/mode']: assert w in out        # the terminal is the owner
    assert 'No language model is configured' in out                        # the question got passages
    assert '1. [multis-handbook.pdf' in out                                # /search hits with citations
    assert 'You are the owner' not in out                                  # nothing after /quit
    assert '>' not in out.splitlines()[1]                                  # no prompt on a pipe
    assert 'Traceback' not in out + p.stderr


def test_chat_remembers_and_ends_at_eof(home):
    p = chat(home, "/remember the spare key is in the red box\n/memory")
    assert p.returncode == 0, p.stderr
    assert 'Noted.' in p.stdout and 'the spare key is in the red box' in p.stdout
    assert 'spare key' in (home/'memory'/'chats'/'admin'/'memory.md').read_text()


def test_chat_reports_a_broken_config(home):
    (home/'config.json').write_text('{"llm": ')
    p = chat(home, "/help\n")
    assert p.returncode == 1
    assert p.stderr.startswith('multis: ') and 'invalid JSON' in p.stderr and 'Traceback' not in p.stderr
