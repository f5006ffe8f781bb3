"Telegram end to end: the real python-telegram-bot against a fake Bot API server on 127.0.0.1"
import asyncio, itertools, logging, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import pytest
from multis.config import DEFAULT_CONFIG, deep_merge
from multis.core import MultisError
from multis.testing.providers import FakeProvider
from multis.chat.router import Router
from multis.testing.fake_telegram import FakeBotAPI
from multis.platforms.telegram import EXPIRED, TelegramPlatform

REPO = Path(__file__).resolve().parents[1]
DATA = REPO/'data'
CODE = 'TIGER-42'
OWNER, USER, STRANGER = 100, 200, 300
HINT = 'Send /start <code> to pair with this multis (the owner has the code).'


class World:
    "A fake Bot API server, a router on a temporary home with the sample documents, and the platform between them"
    def __init__(self, home, store, srv, provider, **over):
        self.home, self.store, self.srv, self.model = home, store, srv, provider
        tg = {'platforms': {'telegram': {'enabled': True, 'bot_token': srv.token, 'base_url': srv.base_url}}}
        self.cfg = deep_merge(deep_merge(DEFAULT_CONFIG, {'pairing_code': CODE, 'memory': {'capture_threshold': 1000}, **tg}), over)
        self.router = Router(store, self.cfg, home=home, provider=provider)
        self.executor = ThreadPoolExecutor(1)
        self.tg = TelegramPlatform(self.router, self.cfg, home, executor=self.executor)
        self.tg.retry_delay = 0.05
        self._fresh = itertools.count(9000)

    def say(self, user, text, **kw): return self.srv.push_text(user, user, text, **kw)

    async def wait(self, n, timeout=10)->list:
        "The texts of the first `n` messages sent, once they are"
        return [m['text'] for m in await asyncio.to_thread(self.srv.wait_sent, n, timeout)]

    async def ask(self, user, text, n=1, **kw)->list:
        "Send `text` from `user` in their private chat; the `n` messages sent back"
        k = len(self.srv.sent)
        self.say(user, text, **kw)
        return (await self.wait(k + n))[k:]

    async def nothing_more(self, since:int):
        "Check that nothing was sent after `since` messages: a fresh stranger's hello is answered next, alone"
        uid = next(self._fresh)
        self.say(uid, 'hello?')
        await self.wait(since + 1)
        assert [(m['chat_id'], m['text']) for m in self.srv.sent[since:]] == [(uid, HINT)]

    def close(self):
        self.router.close(); self.executor.shutdown()


@pytest.fixture
def store(data_store): return data_store


@pytest.fixture
def make_world(tmp_path, store, monkeypatch):
    "make_world(provider=None, **config) -> a World (closed after the test)"
    made = []
    def make(provider=None, **over):
        home = tmp_path/f'home{len(made)}'
        home.mkdir()
        monkeypatch.setenv('MULTIS_HOME', str(home))
        srv = FakeBotAPI().start()
        made.append(World(home, store, srv, provider or FakeProvider(), **over))
        return made[-1]
    yield make
    for w in made: w.close(); w.srv.stop()


def run(w:World, scenario, timeout:float=25):
    "Start the platform, run the async `scenario(w)`, stop the platform"
    async def main():
        await w.tg.start()
        try: await asyncio.wait_for(scenario(w), timeout)
        finally: await w.tg.stop()
    asyncio.run(main())


def test_stranger_gets_one_hint_then_silence(make_world):
    async def scenario(w):
        assert await w.ask(STRANGER, 'hello') == [HINT]
        w.say(STRANGER, 'hello again')
        w.srv.push_document(STRANGER, STRANGER, 'notes.md', b'# Notes')
        await w.nothing_more(1)
        assert w.srv.calls('getFile') == []                     # a stranger's upload is never downloaded
        assert w.srv.actions == []                              # nor shown "typing"
    run(make_world(), scenario)


def test_pair_ask_and_search(make_world):
    async def scenario(w):
        assert await w.ask(OWNER, f'/start {CODE}') == ['Paired: you are the owner; send /help to see what you can do.']
        [answer] = await w.ask(OWNER, 'how do I pair my phone?')
        assert answer.startswith('Echo: how do I pair my phone?')
        assert 'Sources:' in answer and 'multis-handbook.pdf' in answer
        [hits] = await w.ask(OWNER, '/search pairing')
        assert hits.startswith('1. [multis-handbook.pdf') and 'Pairing' in hits
        [help_] = await w.ask(OWNER, '/help@multis_test_bot')
        assert help_.startswith('Commands:')
        k = len(w.srv.sent)
        w.say(OWNER, '/help@some_other_bot')                    # addressed to another bot
        await w.nothing_more(k)
        assert {a['chat_id'] for a in w.srv.actions} == {OWNER}
    w = make_world()
    run(w, scenario)
    assert w.router.cfg['owner_id'] == str(OWNER)


def test_owner_upload_asks_kb_or_admin_then_indexes(make_world):
    doc = b'# Seed swap\n\nThe zanzibarite seed swap meets on Saturdays at the library.\n'
    async def scenario(w):
        w.srv.push_document(OWNER, OWNER, 'swap.md', doc)
        [question] = await w.wait(1)
        assert question.startswith('Index swap.md as kb') and question.endswith('Reply kb or admin.')
        buttons = w.srv.sent[0]['reply_markup']['inline_keyboard']
        assert [[b['callback_data'] for b in row] for row in buttons] == [['kb', 'admin']]
        assert w.srv.calls('getFile') == []                     # nothing downloaded before the answer
        w.srv.push_callback(OWNER, OWNER, 'kb', message_id=w.srv.sent[0]['message_id'])
        assert await w.wait(2) == [question, 'Indexed swap.md (1 chunk, kb).']
        assert [a['callback_query_id'] for a in w.srv.answered] == ['CB1']
        assert w.srv.edits[0]['message_id'] == w.srv.sent[0]['message_id'] and not w.srv.edits[0]['reply_markup']
        assert len(w.srv.calls('getFile')) == 1 and w.srv.calls('download')
        [hits] = await w.ask(USER, '/search zanzibarite')     # kb: a paired user finds it
        assert hits.startswith('1. [swap.md, Seed swap]')
        w.srv.push_callback(OWNER, OWNER, 'kb')                 # the same button again
        assert (await w.wait(4))[3] == EXPIRED
    run(make_world(owner_id=str(OWNER), allowed_users=[str(OWNER), str(USER)]), scenario)


def test_caption_answers_at_once_and_big_files_are_refused_before_download(make_world):
    async def scenario(w):
        w.srv.push_document(OWNER, OWNER, 'plan.md', b'# Plan\n\nsecret plan', caption='admin')
        assert await w.wait(1) == ['Indexed plan.md (1 chunk, admin).']
        w.srv.push_document(OWNER, OWNER, 'scan.pdf', b'%PDF-1.7', file_size=3 * 2**20)
        assert (await w.wait(2))[1] == 'scan.pdf is too large to index (3.0 MB; the limit is 1 MB).'
        assert [p['file_id'] for p in w.srv.calls('getFile')] == ['DOC1']
    run(make_world(owner_id=str(OWNER), allowed_users=[str(OWNER)], indexing={'max_file_mb': 1}), scenario)


def test_second_user_pairs_and_cannot_index(make_world):
    async def scenario(w):
        await w.ask(OWNER, f'/start {CODE}')
        assert await w.ask(USER, f'/start {CODE}') == ['Paired: send /help to see what you can do.']
        assert await w.ask(USER, '/index /tmp/x kb') == ['Only the owner can use /index.']
        [help_] = await w.ask(USER, '/help')
        assert '/index' not in help_
    w = make_world()
    run(w, scenario)
    assert (w.router.cfg['owner_id'], w.router.cfg['allowed_users']) == (str(OWNER), [str(OWNER), str(USER)])


def test_long_reply_is_split_at_line_ends(make_world):
    long = '\n'.join(f"{i:03d} " + 'x' * 95 for i in range(90))      # 90 lines, 8,999 characters
    async def scenario(w):
        parts = await w.ask(OWNER, 'tell me everything', n=3)
        assert all(len(p) <= 4096 for p in parts)
        assert all(p.endswith('\n') for p in parts[:2])               # cut at line ends
        text = ''.join(parts)
        assert text.startswith(long + '\n\nSources:')
        await w.nothing_more(3)                                       # three parts, no more
    run(make_world(FakeProvider(replies=[long]), owner_id=str(OWNER)), scenario)


def test_messages_older_than_two_minutes_at_start_are_ignored(make_world):
    w = make_world(owner_id=str(OWNER))
    now = time.time()
    w.say(OWNER, '/help', date=now - 600)
    w.say(STRANGER, 'hello', date=now - 600)
    w.say(OWNER, '/status', date=now - 60)
    async def scenario(w):
        [status] = await w.wait(1)
        assert status.startswith('You are the owner (telegram).')
        await w.nothing_more(1)
        assert await w.ask(STRANGER, 'hello') == [HINT]            # the old hello did not use up the hint
    run(w, scenario)


@pytest.mark.filterwarnings('ignore::DeprecationWarning')   # PTB's own RetryAfter warns about retry_after's type
def test_network_errors_are_survived(make_world, caplog):
    w = make_world(owner_id=str(OWNER))
    w.srv.fail_next('getMe', 1, 'drop').fail_next('deleteWebhook', 1, 500)
    w.srv.fail_next('getUpdates', 1, 'drop').fail_next('getUpdates', 1, 502)
    async def scenario(w):
        [help_] = await w.ask(OWNER, '/help')
        assert help_.startswith('Commands:')
        w.srv.fail_next('sendMessage', 1, 'drop')
        assert (await w.ask(OWNER, '/status'))[0].startswith('You are the owner')
        w.srv.fail_next('sendMessage', 1, 429, retry_after=1)
        assert (await w.ask(OWNER, '/status'))[0].startswith('You are the owner')
        w.srv.fail_next('sendMessage', 1, 400)                  # a refused message is logged, not retried
        k = len(w.srv.sent)
        w.say(OWNER, '/help')
        await w.nothing_more(k)
        assert (await w.ask(OWNER, '/status'))[0].startswith('You are the owner')
    with caplog.at_level(logging.INFO, logger='multis'): run(w, scenario)
    assert len(w.srv.calls('getMe')) == 2 and len(w.srv.calls('deleteWebhook')) == 2
    assert len(w.srv.calls('getUpdates')) >= 3
    assert any('could not send to chat 100' in r.getMessage() for r in caplog.records)
    assert not any(w.srv.token in r.getMessage() for r in caplog.records)


def test_stop_finishes_the_reply_in_flight(make_world):
    thinking = threading.Event()
    def slow(system, messages):
        thinking.set(); time.sleep(0.5)
        return 'Slow answer.'
    w = make_world(FakeProvider(replies=slow), owner_id=str(OWNER))
    async def main():
        await w.tg.start()
        w.say(OWNER, 'take your time')
        assert await asyncio.to_thread(thinking.wait, 5)
        await w.tg.stop()
    asyncio.run(main())
    assert [m['text'].split('\n')[0] for m in w.srv.sent] == ['Slow answer.']
    assert w.tg.app is None


def test_send_for_the_scheduler(make_world):
    async def scenario(w):
        ids = await w.tg.send(OWNER, 'y' * 5000)
        assert len(ids) == 2 and [len(m['text']) for m in w.srv.sent] == [4096, 904]
        assert [m['message_id'] for m in w.srv.sent] == ids
        assert await w.tg.send(OWNER, '') == []
    w = make_world()
    with pytest.raises(MultisError, match='not running'): asyncio.run(w.tg.send(OWNER, 'hi'))
    run(w, scenario)


def test_start_errors_are_clear(make_world):
    w = make_world()
    w.tg.cfg = deep_merge(w.cfg, {'platforms': {'telegram': {'bot_token': '123456:WRONG'}}})
    with pytest.raises(MultisError, match='rejected the bot token') as e: asyncio.run(w.tg.start())
    assert 'WRONG' not in str(e.value) and w.tg.app is None
    w.tg.cfg = deep_merge(w.cfg, {'platforms': {'telegram': {'bot_token': ''}}})
    with pytest.raises(MultisError, match='bot_token is empty'): asyncio.run(w.tg.start())
    down = FakeBotAPI().start()
    url = down.base_url
    down.stop()
    w.tg.cfg, w.tg.connect_attempts = deep_merge(w.cfg, {'platforms': {'telegram': {'base_url': url}}}), 2
    with pytest.raises(MultisError, match=r'cannot reach 127\.0\.0\.1:\d+'): asyncio.run(w.tg.start())


def test_a_redelivered_message_is_answered_once(make_world):
    "Telegram may deliver one message again (a retried update): the same message id is recognised and not answered twice"
    async def scenario(w):
        assert await w.ask(OWNER, f'/start {CODE}') == ['Paired: you are the owner; send /help to see what you can do.']
        k = len(w.srv.sent)
        first = w.say(OWNER, 'how do I pair my phone?')
        [answer] = (await w.wait(k + 1))[k:]
        assert answer.startswith('Echo: how do I pair my phone?')
        w.srv._push(message=first['message'])                   # the same message, in a new update
        await w.nothing_more(k + 1)
    w = make_world()
    run(w, scenario)
    log = next((w.home/'memory'/'chats').rglob('log/*.md')).read_text()
    assert sum(' user**: how do I pair my phone?' in l for l in log.splitlines()) == 1
