"Beeper end to end: the platform, the real router and store, and the official client against a fake Beeper Desktop API"
import asyncio, itertools, json, logging, socket, threading
from pathlib import Path
import pytest
from multis.platforms.beeper import BeeperPlatform, TOKEN_HELP, MAX_TRIES
from multis.config import DEFAULT_CONFIG, deep_merge
from multis.testing.fake_beeper import FakeBeeperAPI
from multis.documents.indexer import index_directory
from multis.testing.providers import FakeProvider
from multis.chat.router import Router
from multis.retrieval.store import Store

REPO = Path(__file__).resolve().parents[1]
NOTES, SHOP, BOB = '!notes:beeper.com', '!shop:beeper.com', '!bob:beeper.com'
ME, ALICE, BOBBY = '@me:beeper.com', '@alice:beeper.com', '@bob:beeper.com'


class CountingRouter(Router):
    "The real router, recording every message handed to it; raises on the texts of `crash_on` ({text: times})"
    def __init__(self, *a, crash_on=None, slow=0.0, **kw):
        super().__init__(*a, **kw)
        self.seen, self.crash_on, self.slow, self.entered = [], dict(crash_on or {}), slow, threading.Event()

    def handle(self, msg):
        self.seen.append(msg)
        self.entered.set()
        if self.slow: threading.Event().wait(self.slow)
        if self.crash_on.get(msg.text, 0) > 0:
            self.crash_on[msg.text] -= 1
            raise RuntimeError(f"crash on {msg.text}")
        return super().handle(msg)


@pytest.fixture
def home(tmp_path, monkeypatch):
    "A multis home (MULTIS_HOME) with data/ indexed into kb"
    h = tmp_path/'home'
    h.mkdir()
    monkeypatch.setenv('MULTIS_HOME', str(h))
    with Store(h/'multis.db') as st: index_directory(st, REPO/'data', 'kb', progress=False)
    return h


@pytest.fixture
def clock():
    "One clock for the fake server's timestamps and the platform, so 'after the first poll' is exact"
    return itertools.count(1_800_000_000).__next__


@pytest.fixture
def fake(clock):
    "A fake Beeper Desktop with a note-to-self chat, a shop chat (business in the config) and a friend's chat"
    with FakeBeeperAPI(token='tok', owner_id=ME, clock=clock) as f:
        f.add_chat(NOTES, 'Notes', is_self_chat=True)
        f.add_chat(SHOP, 'Shop', [ALICE])
        f.add_chat(BOB, 'Bob', [BOBBY])
        f.push(BOB, BOBBY, 'an old message from before multis')
        yield f


class Bot:
    "A store, a counting router and a Beeper platform over one home; `restart` makes new ones (same home)"
    def __init__(self, home, fake, clock, beeper=None, **router_kw):
        self.home, self.fake, self.clock = home, fake, clock
        b = {'enabled': True, 'url': fake.url, 'token': 'tok', 'chat_modes': {SHOP: 'business'}, **(beeper or {})}
        self.cfg = deep_merge(DEFAULT_CONFIG, {'memory': {'capture_threshold': 1000}, 'platforms': {'beeper': b}})
        self.store = Store(home/'multis.db')
        self.model = FakeProvider()
        self.router = CountingRouter(self.store, self.cfg, home=home, provider=self.model, **router_kw)
        self.platform = BeeperPlatform(self.router, self.cfg, home=home, clock=clock)

    def restart(self, **router_kw):
        self.close()
        return Bot(self.home, self.fake, self.clock, self.cfg['platforms']['beeper'], **router_kw)

    def seen(self): return [m.text for m in self.router.seen]
    def close(self): self.platform.close(); self.router.close(); self.store.close()


@pytest.fixture
def bot(home, fake, clock):
    "A bot that has done its first poll (cursors set at the newest message of each chat)"
    b = Bot(home, fake, clock)
    assert b.platform.poll_once() == 0
    yield b
    b.close()


def replies(fake, chat_id): return [t for c,t in fake.sent if c == chat_id]

def answered_contact(b, reply, name, question):
    "A business reply: the model got the contact's question, fenced as untrusted data under the contact's name"
    last = b.model.calls[-1]['messages'][-1]['content']
    inside = last.split('>>>', 1)[1].split('<<<', 1)[0]
    return (reply.startswith(f'[multis] Echo: Message from {name} (a contact, not the owner; untrusted data)')
            and question in inside and last.index('<<<data') < last.index(question))


# --- (1) the note-to-self chat

def test_first_poll_answers_no_history(home, fake, clock, caplog):
    caplog.set_level(logging.INFO, logger='multis.platforms.beeper')
    b = Bot(home, fake, clock)
    assert b.platform.poll_once() == 0
    assert b.router.seen == [] and fake.sent == []
    assert 'first poll' in caplog.text and 'history is not answered' in caplog.text
    cursor = json.loads((home/'run'/'beeper-cursor.json').read_text())
    assert set(cursor['chats']) == {NOTES, SHOP, BOB}
    assert BeeperPlatform(b.router, b.cfg).cursor.path == home/'run'/'beeper-cursor.json'   # MULTIS_HOME by default
    bob_messages = ('GET', f'/v1/chats/{BOB}/messages')
    assert bob_messages not in fake.requests                                      # its preview was enough
    fake.requests.clear()
    assert b.platform.poll_once() == 0
    assert fake.requests[0] == ('GET', '/v1/chats') and bob_messages not in fake.requests   # nothing new: not read
    b.close()


def test_self_chat_command_and_question(bot, fake):
    fake.push(NOTES, text='//search pairing')
    assert bot.platform.poll_once() == 1
    [hits] = replies(fake, NOTES)
    assert hits.startswith('[multis] 1. [') and 'multis-handbook.pdf' in hits     # hits with citations
    m = bot.router.seen[0]
    assert (m.platform, m.chat_id, m.is_self, m.route_hint) == ('beeper', NOTES, True, 'natural')
    fake.push(NOTES, text='how do I pair my phone?')
    assert bot.platform.poll_once() == 1
    answer = replies(fake, NOTES)[-1]
    assert answer.startswith('[multis] Echo: how do I pair my phone?')           # the model got the question
    assert fake.messages[NOTES][-1]['isSender'] is True                            # sent as the owner


# --- (2) modes

def test_business_chat_answers_contacts_personal_chat_ignores_them(bot, fake):
    fake.push(SHOP, ALICE, 'do you deliver on Sundays?')
    fake.push(BOB, BOBBY, 'lunch tomorrow?')
    assert bot.platform.poll_once() == 1
    [reply] = replies(fake, SHOP)
    assert answered_contact(bot, reply, 'alice', 'do you deliver on Sundays?')
    m = bot.router.seen[0]
    assert (m.sender_id, m.is_self, m.route_hint) == (ALICE, False, 'business')
    assert replies(fake, BOB) == [] and bot.seen() == ['do you deliver on Sundays?']   # Bob's never reached the router


def test_owner_plain_message_in_a_contact_chat_is_ignored(bot, fake):
    fake.push(BOB, text='sure, see you at noon')
    fake.push(SHOP, text='thanks Alice!')
    bot.platform.poll_once()
    assert fake.sent == []
    assert all(m.is_self and m.route_hint is None for m in bot.router.seen)


def test_owner_command_in_a_contact_chat_and_mode_switch(bot, fake):
    fake.push(BOB, text='//mode business')
    bot.platform.poll_once()
    assert replies(fake, BOB) == ['[multis] This chat is now in business mode: '
                                  'messages from others here are answered from the knowledge base (kb).']
    fake.push(BOB, BOBBY, 'what is the pairing code for?')
    assert bot.platform.poll_once() == 1
    assert answered_contact(bot, replies(fake, BOB)[-1], 'bob', 'what is the pairing code for?')


def test_default_mode_business_and_groups(home, fake, clock):
    b = Bot(home, fake, clock, beeper={'default_mode': 'business', 'chat_modes': {}})
    b.platform.poll_once()
    fake.add_chat('!team:beeper.com', 'Team', [ALICE, BOBBY])
    fake.push(BOB, BOBBY, 'are you open?')
    fake.push('!team:beeper.com', ALICE, 'hello team')
    b.platform.poll_once()
    assert answered_contact(b, replies(fake, BOB)[0], 'bob', 'are you open?')
    assert replies(fake, '!team:beeper.com') == []                                 # groups are not answered
    assert [m.chat_type for m in b.router.seen if m.chat_id == '!team:beeper.com'] == ['group']
    b.close()


# --- (3) our own replies

def test_own_replies_are_never_handled(bot, fake):
    fake.push(NOTES, text='//help')
    fake.push(SHOP, ALICE, 'hi')
    assert bot.platform.poll_once() == 2
    assert len(fake.sent) == 2
    fake.push(NOTES, text='[multis] written by hand, still ours')
    for _ in range(3): assert bot.platform.poll_once() == 0                       # the replies are now in history
    assert sorted(bot.seen()) == ['//help', 'hi'] and len(fake.sent) == 2
    restarted = bot.restart()
    assert restarted.platform.poll_once() == 0 and restarted.router.seen == []
    restarted.close()


# --- (4) the cursor

def test_restart_without_duplicates_and_nothing_lost(bot, fake):
    fake.push(NOTES, text='//docs')
    assert bot.platform.poll_once() == 1
    b2 = bot.restart()                                                            # nothing new: nothing handled
    assert b2.platform.poll_once() == 0 and b2.router.seen == []
    b2.close()
    for i in range(5): fake.push(NOTES, text=f'//search question {i}')             # while multis is stopped
    fake.push(SHOP, ALICE, 'still open?')
    b3 = bot.restart()
    assert b3.platform.poll_once() == 6
    assert [t for t in b3.seen() if t.startswith('//')] == [f'//search question {i}' for i in range(5)]   # in order
    assert 'still open?' in b3.seen()
    assert b3.platform.poll_once() == 0
    assert len(replies(fake, NOTES)) == 6 and len(replies(fake, SHOP)) == 1
    b3.close()


def test_burst_longer_than_a_page_in_order(home, clock):
    with FakeBeeperAPI(token='tok', owner_id=ME, clock=clock, page_size=3) as f:
        f.add_chat(NOTES, 'Notes', is_self_chat=True)
        b = Bot(home, f, clock)
        b.platform.poll_once()
        texts = [f'//remember note {i}' for i in range(12)]                       # sort keys pass 9 -> 10
        for t in texts: f.push(NOTES, text=t)
        assert b.platform.poll_once() == 12
        assert b.seen() == texts
        assert b.platform.poll_once() == 0
        b.close()


def test_crash_between_two_messages(bot, fake):
    fake.push(NOTES, text='//remember first')
    fake.push(NOTES, text='//remember second')
    fake.push(NOTES, text='//remember third')
    crashing = bot.restart(crash_on={'//remember second': 1})
    assert crashing.platform.poll_once() == 1                                     # first handled, then the crash
    assert crashing.seen() == ['//remember first', '//remember second']
    assert replies(fake, NOTES) == ['[multis] Noted.']
    b = crashing.restart()
    assert b.platform.poll_once() == 2
    assert b.seen() == ['//remember second', '//remember third']                  # first not re-handled
    assert replies(fake, NOTES) == ['[multis] Noted.'] * 3
    b.close()


def test_a_message_that_always_fails_is_given_up(bot, fake, caplog):
    fake.push(NOTES, text='//remember poison')
    fake.push(NOTES, text='//remember fine')
    b = bot.restart(crash_on={'//remember poison': 99})
    results = [b.platform.poll_once() for _ in range(MAX_TRIES)]
    assert results == [0] * (MAX_TRIES - 1) + [1]
    assert b.seen() == ['//remember poison'] * MAX_TRIES + ['//remember fine']
    assert 'skipped' in caplog.text
    b.close()


def test_unsent_reply_is_sent_later_without_rerunning(bot, fake):
    fake.fail(503, method='POST')
    fake.push(NOTES, text='//remember the code is 42')
    assert bot.platform.poll_once() == 1
    assert fake.sent == [] and bot.platform.problem == 'http 503'
    b = bot.restart()                                                             # the reply survives a restart
    assert b.platform.poll_once() == 0
    assert replies(fake, NOTES) == ['[multis] Noted.'] and b.router.seen == []
    b.close()


def test_new_chat_after_first_poll_is_answered(bot, fake):
    fake.add_chat('!carol:beeper.com', 'Carol', ['@carol:beeper.com'])
    fake.push('!carol:beeper.com', '@carol:beeper.com', 'are you open today?')
    bot.router.cfg['platforms']['beeper']['chat_modes']['!carol:beeper.com'] = 'business'
    assert bot.platform.poll_once() == 1
    assert answered_contact(bot, replies(fake, '!carol:beeper.com')[0], 'carol', 'are you open today?')


# --- (5) Beeper not running, wrong token

def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_desktop_not_running(home, fake, clock, caplog):
    b = Bot(home, fake, clock, beeper={'url': f'http://127.0.0.1:{_free_port()}'})
    assert [b.platform.poll_once() for _ in range(3)] == [0, 0, 0]
    warnings = [r for r in caplog.records if r.name == 'multis.platforms.beeper' and r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and 'not reachable' in warnings[0].getMessage()
    assert b.platform.problem == 'unreachable' and b.platform.backoff > b.platform.poll_interval
    b.close()


def test_desktop_goes_away_and_comes_back(bot, fake):
    port = int(fake.url.rsplit(':', 1)[1])
    fake.stop()
    assert bot.platform.poll_once() == 0
    fake.push(NOTES, text='//status')                                             # arrives while unreachable
    fake.start(port)
    assert bot.platform.poll_once() == 1 and bot.platform.problem is None
    assert replies(fake, NOTES)[0].startswith('[multis] You are the owner (beeper).')


@pytest.mark.parametrize('token', ['stale', ''])
def test_rejected_or_missing_token(home, fake, clock, caplog, token):
    b = Bot(home, fake, clock, beeper={'token': token})
    assert [b.platform.poll_once(), b.platform.poll_once()] == [0, 0]
    errors = [r.getMessage() for r in caplog.records if r.name == 'multis.platforms.beeper' and r.levelno >= logging.ERROR]
    assert errors == [TOKEN_HELP]
    assert b.platform.problem == 'token'
    b.close()


# --- the asyncio side, as the daemon runs it

def test_start_stop_finishes_the_message_in_hand(bot, fake):
    fake.push(NOTES, text='//remember slow one')
    fake.push(NOTES, text='//remember next one')
    b = bot.restart(slow=0.3)
    b.platform.poll_interval = 0.05

    async def run():
        await b.platform.start()
        await asyncio.to_thread(b.router.entered.wait, 5)
        await b.platform.stop()                                                   # while the first is in hand
        await b.platform.send(SHOP, 'We open at 9.')

    asyncio.run(run())
    assert b.seen() == ['//remember slow one']
    assert replies(fake, NOTES) == ['[multis] Noted.'] and replies(fake, SHOP) == ['[multis] We open at 9.']
    b2 = b.restart()
    assert b2.platform.poll_once() == 1 and b2.seen() == ['//remember next one']
    b2.close()


def test_loop_polls_on_its_own(bot, fake):
    bot.platform.poll_interval = 0.02

    async def run():
        await bot.platform.start()
        fake.push(NOTES, text='//help')
        for _ in range(250):
            if replies(fake, NOTES): break
            await asyncio.sleep(0.02)
        await bot.platform.stop()

    asyncio.run(run())
    assert replies(fake, NOTES)[0].startswith('[multis] Commands:')
