"""Matrix end to end: the real matrix-nio client against a real Synapse homeserver on 127.0.0.1 (multis.testing.synapse).

People are plain HTTP clients of the client-server API (httpx), except in the encrypted room, where the person is a
real matrix-nio client with its own keys. Skipped, saying why, only when Synapse is not installed."""
import asyncio, importlib.util, itertools, json, os, re, signal, subprocess, sys, time, uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import httpx, pytest
from multis.config import DEFAULT_CONFIG, deep_merge, save_config
from multis.core import MultisError
from multis.testing.providers import FakeProvider
from multis.chat.router import Router

pytestmark = pytest.mark.skipif(importlib.util.find_spec('synapse') is None or importlib.util.find_spec('nio') is None,
                                reason="Synapse or matrix-nio is not installed (pip install -e '.[dev]' installs both)")

REPO = Path(__file__).resolve().parents[1]
CODE = 'TIGER-42'
HINT = 'Send /start <code> to pair with this multis (the owner has the code).'
PAIRED = 'Paired: you are the owner; send /help to see what you can do.'
_n = itertools.count()


@pytest.fixture(scope='module')
def synapse():
    from multis.testing.synapse import TempSynapse
    srv = TempSynapse().start()
    if not srv.ok: pytest.fail(srv.why)          # installed but not running: a failure, not a skip
    yield srv
    srv.stop()


class Person:
    "Someone on the homeserver, talking through the client-server API"
    def __init__(self, srv, user:dict):
        self.srv, self.id, self.token = srv, user['user_id'], user['access_token']

    def _http(self): return httpx.AsyncClient(base_url=self.srv.url, headers={'Authorization': f'Bearer {self.token}'}, timeout=30)

    async def call(self, method, path, **kw)->dict:
        async with self._http() as h: r = await h.request(method, f'/_matrix/client/v3{path}', **kw)
        assert r.status_code == 200, (path, r.status_code, r.text)
        return r.json()

    async def dm(self, bot:str, **extra)->str:
        "A one-to-one room with `bot` invited; its id"
        return (await self.call('POST', '/createRoom', json={'invite': [bot], 'is_direct': True, 'preset': 'trusted_private_chat', **extra}))['room_id']

    async def say(self, room:str, text:str='', **content)->str:
        body = content or {'msgtype': 'm.text', 'body': text}
        return (await self.call('PUT', f'/rooms/{room}/send/m.room.message/{uuid.uuid4().hex}', json=body))['event_id']

    async def upload(self, room:str, name:str, data:bytes, size:int|None=None)->str:
        async with self._http() as h: r = await h.post('/_matrix/media/v3/upload', params={'filename': name}, content=data,
                                 headers={'Content-Type': 'application/octet-stream'})
        assert r.status_code == 200, r.text
        info = {'size': len(data) if size is None else size}
        return await self.say(room, msgtype='m.file', body=name, url=r.json()['content_uri'], info=info)

    async def messages(self, room:str, sender:str)->list:
        "Every message `sender` sent to `room`, oldest first"
        out, start = [], None
        while True:
            params = {'dir': 'b', 'limit': 100, **({'from': start} if start else {})}
            d = await self.call('GET', f'/rooms/{room}/messages', params=params)
            out += [e for e in d.get('chunk', []) if e['sender'] == sender and e['type'] == 'm.room.message']
            if not d.get('end') or not d.get('chunk'): return [e['content'].get('body') for e in reversed(out)]
            start = d['end']

    async def wait(self, room:str, sender:str, n:int, timeout:float=20)->list:
        "The first `n` messages `sender` sent to `room`, once there are"
        end = time.monotonic() + timeout
        while (got := await self.messages(room, sender)) and len(got) < n or not got and n:
            if time.monotonic() > end: pytest.fail(f"waited for {n} messages from {sender}, got {got}")
            await asyncio.sleep(0.1)
        return got[:n]

    async def joined(self, room:str, user:str, timeout:float=20):
        "Wait until `user` has joined `room`"
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            d = await self.call('GET', f'/rooms/{room}/joined_members')
            if user in d['joined']: return
            await asyncio.sleep(0.1)
        pytest.fail(f"{user} did not join {room}")


class World:
    "A Synapse account for multis, a router on a temporary home with the sample documents, and the platform between them"
    def __init__(self, srv, home, store, provider=None, **over):
        from multis.platforms.matrixbot import MatrixPlatform
        k = next(_n)
        self.srv, self.home, self.store = srv, home, store
        self.bot = srv.register(f'bot{k}')
        self.owner_user = srv.register(f'owner{k}')
        self.owner, self.user, self.stranger = Person(srv, self.owner_user), *(Person(srv, srv.register(f'{who}{k}')) for who in ('user', 'stranger'))
        mx = {'enabled': True, 'homeserver': srv.url, 'user_id': self.bot['user_id'], 'access_token': self.bot['access_token']}
        self.cfg = deep_merge(DEFAULT_CONFIG, {'pairing_code': CODE, 'memory': {'capture_threshold': 1000},
                                               'platforms': {'matrix': mx}, **over})
        self.router = Router(store, self.cfg, home=home, provider=provider or FakeProvider())
        self.executor = ThreadPoolExecutor(1)
        self.mx = MatrixPlatform(self.router, self.cfg, home, executor=self.executor)
        self.mx.sync_timeout = 1000

    def new_platform(self):
        from multis.platforms.matrixbot import MatrixPlatform
        self.mx = MatrixPlatform(self.router, self.cfg, self.home, executor=self.executor)
        self.mx.sync_timeout = 1000
        return self.mx

    async def ask(self, who:Person, room:str, text:str, n:int=1)->list:
        "Send `text`; the next `n` messages multis sends to the room"
        k = len(await who.messages(room, self.bot['user_id']))
        await who.say(room, text)
        return (await who.wait(room, self.bot['user_id'], k + n))[k:]

    async def replies(self, who:Person, room:str)->list: return await who.messages(room, self.bot['user_id'])

    async def open_dm(self, who:Person)->str:
        room = await who.dm(self.bot['user_id'])
        await who.joined(room, self.bot['user_id'])
        return room

    def close(self): self.router.close(); self.executor.shutdown()


@pytest.fixture
def make_world(synapse, tmp_path, data_store, monkeypatch):
    made = []
    def make(provider=None, **over):
        home = tmp_path/f'home{len(made)}'; home.mkdir()
        monkeypatch.setenv('MULTIS_HOME', str(home))
        made.append(World(synapse, home, data_store, provider, **over))
        return made[-1]
    yield make
    for w in made: w.close()


def run(w:World, scenario, timeout:float=60):
    "Start the platform, run the async `scenario(w)`, stop the platform"
    async def main():
        await w.mx.start()
        try: await asyncio.wait_for(scenario(w), timeout)
        finally: await w.mx.stop()
    asyncio.run(main())


def access_log(srv, needle:str)->list:
    "Lines of Synapse's log naming `needle` (requests it served)"
    return [l for l in (Path(srv.dir)/'stdout.log').read_text(errors='replace').splitlines() if needle in l]


# --- pairing, hints, answers ---

def test_pair_ask_with_citations_and_the_strangers_single_hint(make_world):
    async def scenario(w):
        room = await w.open_dm(w.owner)
        assert await w.ask(w.owner, room, f'/start {CODE}') == [PAIRED]
        [answer] = await w.ask(w.owner, room, 'how do I pair my phone?')
        assert answer.startswith('Echo: how do I pair my phone?') and 'Sources:' in answer and 'multis-handbook.pdf' in answer
        [hits] = await w.ask(w.owner, room, '/search pairing')
        assert hits.startswith('1. [multis-handbook.pdf') and 'Pairing' in hits
        sroom = await w.open_dm(w.stranger)            # anyone may open a one-to-one room: strangers get one hint
        assert await w.ask(w.stranger, sroom, 'hello') == [HINT]
        await w.stranger.say(sroom, 'hello again')
        await w.stranger.upload(sroom, 'notes.md', b'# Notes')
        assert await w.ask(w.stranger, sroom, '/start WRONG-CODE') == ['That pairing code is not right.']  # a reply proves the two before were read
        assert await w.replies(w.stranger, sroom) == [HINT, 'That pairing code is not right.']
    w = make_world()
    run(w, scenario)
    assert w.router.cfg['owner_id'] == w.owner.id
    typing = [l for l in access_log(w.srv, '/typing/') if 'PUT' in l and 'bot' in l]
    assert typing, "multis sent no typing notice while answering"
    assert not access_log(w.srv, 'GET /_matrix/client/v1/media/download')   # a stranger's upload is never downloaded


def test_owner_upload_asks_kb_or_admin_then_indexes(make_world):
    doc = b'# Seed swap\n\nThe zanzibarite seed swap meets on Saturdays at the library.\n'
    async def scenario(w):
        room = await w.open_dm(w.owner)
        uroom = await w.open_dm(w.user)
        k = len(await w.replies(w.owner, room))
        await w.owner.upload(room, 'swap.md', doc)
        [question] = (await w.owner.wait(room, w.bot['user_id'], k + 1))[k:]
        assert question.startswith('Index swap.md as kb') and question.endswith('Reply kb or admin.')
        assert not access_log(w.srv, 'GET /_matrix/client/v1/media/download')   # nothing downloaded before the answer
        assert await w.ask(w.owner, room, 'kb') == ['Indexed swap.md (1 chunk, kb).']
        [hits] = await w.ask(w.user, uroom, '/search zanzibarite')          # kb: a paired user finds it
        assert hits.startswith('1. [swap.md, Seed swap]')
        k = len(await w.replies(w.owner, room))
        await w.owner.upload(room, 'huge.pdf', b'%PDF-1.4 tiny', size=50 * 2**20)   # the event says 50 MB
        assert (await w.owner.wait(room, w.bot['user_id'], k + 1))[k:] == ['huge.pdf is too large to index (50.0 MB; the limit is 10 MB).']
        assert len(access_log(w.srv, 'GET /_matrix/client/v1/media/download')) == 1
    w = make_world()
    w.cfg['owner_id'] = w.owner.id; w.cfg['allowed_users'] = [w.owner.id, w.user.id]
    run(w, scenario)


def test_an_upload_larger_than_it_said_is_cut_off(make_world):
    async def scenario(w):
        room = await w.open_dm(w.owner)
        await w.owner.upload(room, 'liar.md', b'# x\n' + b'y' * 3000, size=10)
        assert (await w.owner.wait(room, w.bot['user_id'], 1))[0].startswith('Index liar.md as kb')
        assert (await w.ask(w.owner, room, 'kb'))[0].startswith('liar.md: the file is larger than its')
    w = make_world(indexing={'max_file_mb': 0.001})
    w.cfg['owner_id'] = w.owner.id
    run(w, scenario)


def test_long_reply_is_split_and_nothing_is_lost(make_world):
    long = '\n'.join(f'line {i}: ' + 'x' * 90 for i in range(120))         # about 12,000 characters
    async def scenario(w):
        room = await w.open_dm(w.owner)
        parts = await w.ask(w.owner, room, 'tell me everything', n=4)
        assert len(parts) == 4 and all(len(p) <= 4000 for p in parts)
        assert re.sub(r'\s', '', ''.join(parts)).startswith(re.sub(r'\s', '', long))   # cut at line or word ends
    w = make_world(provider=FakeProvider([long]))
    w.cfg['owner_id'] = w.owner.id
    run(w, scenario)


# --- rooms and invitations ---

def test_group_rooms_are_declined_unless_allow_groups(make_world):
    async def scenario(w):
        room = await w.owner.call('POST', '/createRoom', json={'invite': [w.bot['user_id'], w.user.id], 'preset': 'private_chat'})
        rid = room['room_id']
        end = time.monotonic() + 20
        while time.monotonic() < end:                                  # declined: the invitation becomes a leave
            d = await w.owner.call('GET', f'/rooms/{rid}/state/m.room.member/{w.bot["user_id"]}')
            if d.get('membership') == 'leave': break
            await asyncio.sleep(0.1)
        assert d['membership'] == 'leave'
    w = make_world()
    w.cfg['owner_id'] = w.owner.id
    run(w, scenario)

    async def joined(w):
        rid = (await w.owner.call('POST', '/createRoom', json={'invite': [w.bot['user_id'], w.user.id], 'preset': 'private_chat'}))['room_id']
        await w.owner.joined(rid, w.bot['user_id'])
        assert (await w.ask(w.owner, rid, '/search pairing'))[0].startswith('1. [multis-handbook.pdf')
    w = make_world(allow_groups=True)
    w.cfg['owner_id'] = w.owner.id
    run(w, joined)


def test_invites_allowed_declines_strangers_once_an_owner_is_paired(make_world):
    async def scenario(w):
        rid = await w.stranger.dm(w.bot['user_id'])
        end = time.monotonic() + 20
        while (await w.stranger.call('GET', f'/rooms/{rid}/state/m.room.member/{w.bot["user_id"]}'))['membership'] != 'leave':
            assert time.monotonic() < end, 'the invitation was not declined'
            await asyncio.sleep(0.1)
        room = await w.open_dm(w.owner)                                 # the owner still gets in
        assert (await w.ask(w.owner, room, '/search pairing'))[0].startswith('1. [')
    w = make_world(platforms={'matrix': {'invites': 'allowed'}})
    w.cfg['platforms']['matrix'].update(enabled=True, homeserver=w.srv.url, user_id=w.bot['user_id'], access_token=w.bot['access_token'])
    w.cfg['owner_id'] = w.owner.id
    run(w, scenario)


# --- restarts ---

def test_a_restart_neither_repeats_nor_loses_a_message(make_world):
    async def first(w):
        w.room = await w.open_dm(w.owner)
        assert await w.ask(w.owner, w.room, '/frob1') == ['Unknown command /frob1. Send /help for the list.']
    async def second(w):
        await w.owner.wait(w.room, w.bot['user_id'], 4)
    w = make_world()
    w.cfg['owner_id'] = w.owner.id
    run(w, first)
    async def while_stopped():
        for i in (2, 3, 4): await w.owner.say(w.room, f'/frob{i}')  # sent while multis is stopped
    asyncio.run(while_stopped())
    w.new_platform()
    run(w, second)
    w.new_platform()
    run(w, second)                                                    # a second restart: nothing more
    got = asyncio.run(w.replies(w.owner, w.room))
    assert got == [f'Unknown command /frob{i}. Send /help for the list.' for i in (1, 2, 3, 4)]


def test_a_reply_sent_but_not_acknowledged_is_not_sent_twice(make_world):
    "A crash between the homeserver taking a reply and the journal recording it: the same transaction id, one event"
    from multis.platforms.matrixbot import txn_id
    async def scenario(w):
        w.room = await w.open_dm(w.owner)
        assert await w.ask(w.owner, w.room, '/frob1') == ['Unknown command /frob1. Send /help for the list.']
        eid = await w.owner.say(w.room, '/frob2')
        # as if multis had journaled its reply, sent it, and died before recording the acknowledgement
        await w.mx._send_event(w.room, {'msgtype': 'm.notice', 'body': 'the reply to frob2'}, txn_id(eid, 0))
        w.mx.state.handled[eid] = 1.0
        w.mx.state.outbox.append({'key': eid, 'room': w.room, 'parts': ['the reply to frob2'], 'sent': 0})
        w.mx.state.save()
        w.mx._stopping = True
    w = make_world()
    w.cfg['owner_id'] = w.owner.id
    run(w, scenario)
    w.new_platform()
    async def again(w):
        await w.owner.say(w.room, '/frob3')
        await w.owner.wait(w.room, w.bot['user_id'], 3)
    run(w, again)
    assert asyncio.run(w.replies(w.owner, w.room)) == ['Unknown command /frob1. Send /help for the list.', 'the reply to frob2',
                                                       'Unknown command /frob3. Send /help for the list.']
    assert json.loads((w.home/'run'/'matrix'/'state.json').read_text())['outbox'] == []


def test_start_errors_are_clear(make_world):
    w = make_world()
    w.cfg['platforms']['matrix']['access_token'] = 'syt_not_a_real_token'
    w.new_platform()
    with pytest.raises(MultisError, match='Matrix rejected the access token'): asyncio.run(w.mx.start())
    w.cfg['platforms']['matrix'].update(access_token=w.bot['access_token'], user_id='@someone_else:localhost')
    w.new_platform()
    with pytest.raises(MultisError, match='belongs to @bot'): asyncio.run(w.mx.start())
    w.cfg['platforms']['matrix']['access_token'] = ''
    w.new_platform()
    with pytest.raises(MultisError, match='set platforms.matrix.homeserver and access_token'): asyncio.run(w.mx.start())


def test_an_unreachable_homeserver_is_retried_not_fatal(make_world, caplog):
    w = make_world()
    w.cfg['platforms']['matrix']['homeserver'] = 'http://127.0.0.1:9'
    w.new_platform()
    async def main():
        await w.mx.start()
        await asyncio.sleep(1.5)
        assert w.mx.problem and w.mx.user_id is None
        await w.mx.stop()
    with caplog.at_level('WARNING'): asyncio.run(main())
    assert any('does not answer yet' in r.getMessage() or 'cannot sync' in r.getMessage() for r in caplog.records)


# --- encrypted rooms ---

class E2EPerson:
    "Someone with a real matrix-nio client and their own keys, in an encrypted room"
    def __init__(self, srv, user:dict, folder:Path):
        from nio import AsyncClient, AsyncClientConfig
        folder.mkdir(parents=True, exist_ok=True)
        self.id = user['user_id']
        self.c = AsyncClient(srv.url, self.id, device_id=user['device_id'], store_path=str(folder),
                             config=AsyncClientConfig(encryption_enabled=True, store_sync_tokens=False))
        self.c.restore_login(self.id, user['device_id'], user['access_token'])
        self.seen = []                                   # (sender, body) of every message event, decrypted when it can be

    async def sync(self, timeout:int=500):
        from nio import MegolmEvent, SyncResponse
        r = await self.c.sync(timeout=timeout)
        assert isinstance(r, SyncResponse), r
        for info in r.rooms.join.values():
            for ev in info.timeline.events:
                if isinstance(ev, MegolmEvent): self.seen.append((ev.sender, None))
                elif getattr(ev, 'body', None) is not None: self.seen.append((ev.sender, ev.body))
        await self.c.send_to_device_messages()
        if self.c.should_upload_keys: await self.c.keys_upload()
        if self.c.should_query_keys: await self.c.keys_query()
        if self.c.should_claim_keys and (u := self.c.get_users_for_key_claiming()): await self.c.keys_claim(u)

    async def encrypted_dm(self, bot:str)->str:
        r = await self.c.room_create(invite=[bot], is_direct=True, initial_state=[
            {'type': 'm.room.encryption', 'state_key': '', 'content': {'algorithm': 'm.megolm.v1.aes-sha2'}}])
        return r.room_id

    async def until(self, pred, timeout:float=30):
        end = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < end, f"waited in vain; seen {self.seen}"
            await self.sync()

    async def say(self, room:str, text:str):
        r = await self.c.room_send(room, 'm.room.message', {'msgtype': 'm.text', 'body': text}, ignore_unverified_devices=True)
        assert getattr(r, 'event_id', None), r

    def from_(self, who:str)->list: return [b for s, b in self.seen if s == who]


def _e2e_available():
    from nio.crypto import ENCRYPTION_ENABLED
    return ENCRYPTION_ENABLED


@pytest.mark.skipif(not _e2e_available(), reason="matrix-nio's encryption (the matrix-e2e extra) is not installed")
def test_an_encrypted_room_is_read_and_answered_encrypted(make_world, tmp_path):
    async def scenario(w):
        p = E2EPerson(w.srv, w.owner_user, tmp_path/'owner-keys')
        try:
            await p.sync(0)
            room = await p.encrypted_dm(w.bot['user_id'])
            await w.owner.joined(room, w.bot['user_id'])
            await p.sync()
            await p.say(room, f'/start {CODE}')
            await p.until(lambda: p.from_(w.bot['user_id']))
            assert p.from_(w.bot['user_id']) == [PAIRED]             # decrypted by the person: it was sent encrypted
            await p.say(room, '/search pairing')
            await p.until(lambda: len(p.from_(w.bot['user_id'])) >= 2)
            assert p.from_(w.bot['user_id'])[1].startswith('1. [multis-handbook.pdf')
            # an encrypted upload: the scope question, then downloaded, decrypted and indexed
            from nio.crypto.attachments import encrypt_attachment
            async def send_file(name, data, tamper=False):
                cipher, keys = encrypt_attachment(data)
                async with w.owner._http() as h:
                    uri = (await h.post('/_matrix/media/v3/upload', content=cipher[:-1] + bytes([cipher[-1] ^ 1]) if tamper else cipher,
                                        headers={'Content-Type': 'application/octet-stream'})).json()['content_uri']
                r = await p.c.room_send(room, 'm.room.message', {'msgtype': 'm.file', 'body': name, 'file': {'url': uri, **keys}},
                                        ignore_unverified_devices=True)
                assert getattr(r, 'event_id', None), r
            await send_file('secret-swap.md', b'# Seed swap\n\nThe quokkaberry seed swap meets on Sundays.\n')
            await p.until(lambda: len(p.from_(w.bot['user_id'])) >= 3)
            assert p.from_(w.bot['user_id'])[2].startswith('Index secret-swap.md as kb')
            await p.say(room, 'kb')
            await p.until(lambda: len(p.from_(w.bot['user_id'])) >= 4)
            assert p.from_(w.bot['user_id'])[3] == 'Indexed secret-swap.md (1 chunk, kb).'
            await send_file('tampered.md', b'# x\n\ny', tamper=True)                 # a changed byte: the hash does not match
            await p.until(lambda: len(p.from_(w.bot['user_id'])) >= 5)
            await p.say(room, 'kb')
            await p.until(lambda: len(p.from_(w.bot['user_id'])) >= 6)
            assert p.from_(w.bot['user_id'])[5].startswith('tampered.md: the encrypted file could not be decrypted')
            raw = await w.owner.call('GET', f'/rooms/{room}/messages', params={'dir': 'b', 'limit': 50})
            mine = [e for e in raw['chunk'] if e['sender'] == w.bot['user_id'] and e['type'].startswith('m.room.')
                    and e['type'] in ('m.room.message', 'm.room.encrypted')]
            assert mine and {e['type'] for e in mine} == {'m.room.encrypted'}   # nothing in clear on the server
        finally: await p.c.close()
    w = make_world()
    run(w, scenario)
    assert w.router.cfg['owner_id'] == w.owner.id


def test_without_encryption_an_encrypted_room_gets_one_clear_line(make_world, tmp_path):
    from multis.platforms.matrixbot import NO_E2E
    if not _e2e_available(): pytest.skip("the person in the encrypted room needs matrix-nio's encryption")
    async def scenario(w):
        p = E2EPerson(w.srv, w.owner_user, tmp_path/'owner-keys')
        try:
            await p.sync(0)
            room = await p.encrypted_dm(w.bot['user_id'])
            await w.owner.joined(room, w.bot['user_id'])
            await p.sync()
            for text in ('hello?', 'anyone?'): await p.say(room, text)
            await p.until(lambda: p.from_(w.bot['user_id']))
            await p.say(room, 'still there?')
            for _ in range(6): await p.sync()
            assert p.from_(w.bot['user_id']) == [NO_E2E]             # once per room, readable without keys
        finally: await p.c.close()
    w = make_world()
    w.cfg['platforms']['matrix']['encryption'] = False
    w.cfg['owner_id'] = w.owner.id
    w.new_platform()
    run(w, scenario)


# --- the daemon, killed: nothing repeated, nothing lost ---

VERB = 'import sys; from multis.cli import main; sys.exit(main(sys.argv[1:]))'


def _cli(home, *args, **kw):
    return subprocess.run([sys.executable, '-c', VERB, *args], env={**os.environ, 'MULTIS_HOME': str(home)},
                          capture_output=True, text=True, timeout=120, **kw)


def _http(srv, token): return httpx.Client(base_url=srv.url, headers={'Authorization': f'Bearer {token}'}, timeout=30)


def _bodies(h, room, sender)->list:
    out, start = [], None
    while True:
        d = h.get(f'/_matrix/client/v3/rooms/{room}/messages', params={'dir': 'b', 'limit': 100, **({'from': start} if start else {})}).json()
        out += [e['content'].get('body') for e in d.get('chunk', []) if e['sender'] == sender and e['type'] == 'm.room.message']
        if not d.get('end') or not d.get('chunk'): return out[::-1]
        start = d['end']


def test_init_exchanges_a_password_for_a_token_and_the_daemon_survives_kill_9(synapse, tmp_path):
    k = next(_n)
    bot, owner = synapse.register(f'bot{k}', password='bot-password-1'), synapse.register(f'owner{k}')
    home = tmp_path/'home'
    r = _cli(home, 'init', '--non-interactive', '--matrix-homeserver', synapse.url, '--matrix-user', bot['user_id'],
             '--matrix-password', 'bot-password-1')
    assert r.returncode == 0, r.stderr
    cfg = json.loads((home/'config.json').read_text())
    mx = cfg['platforms']['matrix']
    assert mx['enabled'] and mx['access_token'].startswith('syt_') and mx['device_id'] and 'bot-password-1' not in (home/'config.json').read_text()
    assert f"  matrix: on (token set, {bot['user_id']} on {synapse.url})" in r.stdout
    r = _cli(home, 'init', '--non-interactive', '--matrix-password', 'wrong', '--force')
    assert r.returncode == 1 and f"the homeserver refused the password for {bot['user_id']}" in r.stderr
    cfg['owner_id'] = owner['user_id']
    save_config(cfg, home/'config.json')

    with _http(synapse, owner['access_token']) as h:
        room = h.post('/_matrix/client/v3/createRoom', json={'invite': [bot['user_id']], 'is_direct': True, 'preset': 'trusted_private_chat'}).json()['room_id']
        procs, sent, n = [], [], 40
        def start():
            procs.append(subprocess.Popen([sys.executable, '-c', VERB, 'start', '--foreground'], env={**os.environ, 'MULTIS_HOME': str(home)},
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        def replies(): return _bodies(h, room, bot['user_id'])
        def wait_for(count, timeout=60):
            end = time.monotonic() + timeout
            while len(got := replies()) < count:
                assert procs[-1].poll() is None, f"the daemon exited with {procs[-1].returncode}"
                assert time.monotonic() < end, f"waited for {count} replies, got {len(got)}"
                time.sleep(0.1)
        try:
            start()
            end = time.monotonic() + 60
            while h.get(f'/_matrix/client/v3/rooms/{room}/joined_members').json().get('joined', {}).get(bot['user_id']) is None:
                assert time.monotonic() < end and procs[-1].poll() is None, 'the daemon did not join'
                time.sleep(0.1)
            while 'running' not in (st := _cli(home, 'status').stdout) or 'matrix: running' not in st: time.sleep(0.2)
            assert '  matrix: running' in st.splitlines()
            for i in range(n):
                h.put(f'/_matrix/client/v3/rooms/{room}/send/m.room.message/t{i}', json={'msgtype': 'm.text', 'body': f'/frob{i}'})
                sent.append(i)
                if i in (12, 27):                                   # killed twice while answering
                    wait_for(i - 4)
                    procs[-1].send_signal(signal.SIGKILL); procs[-1].wait()
                    start()
            wait_for(n)
            time.sleep(3)                                            # time for a repeat to show
        finally:
            for p in procs:
                if p.poll() is None: p.send_signal(signal.SIGTERM); p.wait(30)
        got = replies()
    assert got == [f'Unknown command /frob{i}. Send /help for the list.' for i in range(n)]   # each once, in order


def test_a_command_prefix_of_its_own(make_world):
    "Element takes unknown /commands as its own: `command_prefix: '!'` makes `!search` a command and `/search` a question"
    async def scenario(w):
        room = await w.open_dm(w.owner)
        assert (await w.ask(w.owner, room, '!search pairing'))[0].startswith('1. [multis-handbook.pdf')
        assert (await w.ask(w.owner, room, '/search pairing'))[0].startswith('Echo: /search pairing')
    w = make_world()
    w.cfg['platforms']['matrix']['command_prefix'] = '!'
    w.cfg['owner_id'] = w.owner.id
    run(w, scenario)


def test_what_a_room_said_before_multis_joined_is_not_answered(make_world):
    async def scenario(w):
        await w.owner.joined(w.room, w.bot['user_id'])
        assert await w.ask(w.owner, w.room, '/frob3') == ['Unknown command /frob3. Send /help for the list.']
        assert await w.replies(w.owner, w.room) == ['Unknown command /frob3. Send /help for the list.']
    w = make_world()
    w.cfg['owner_id'] = w.owner.id
    async def before():
        await w.mx.start(); await asyncio.sleep(1.5); await w.mx.stop()       # a first run: where history ends
        w.room = await w.owner.call('POST', '/createRoom', json={'preset': 'trusted_private_chat'})
        w.room = w.room['room_id']
        for i in (1, 2): await w.owner.say(w.room, f'/frob{i}')             # said before the invitation
        await w.owner.call('PUT', f'/rooms/{w.room}/state/m.room.member/{w.bot["user_id"]}', json={'membership': 'invite', 'is_direct': True})
    asyncio.run(before())
    w.new_platform()
    run(w, scenario)


def test_after_a_long_stop_more_than_a_sync_holds_is_read_back(make_world):
    "120 messages while multis was stopped: a sync returns 100, the 20 before are read back; each answered once, in order"
    n = 120
    async def first(w):
        w.room = await w.open_dm(w.owner)
        assert await w.ask(w.owner, w.room, '/frob0') == ['Unknown command /frob0. Send /help for the list.']
    async def second(w):
        await w.owner.wait(w.room, w.bot['user_id'], n + 1, timeout=120)
    w = make_world()
    w.cfg['owner_id'] = w.owner.id
    run(w, first)
    async def while_stopped():
        for i in range(1, n + 1): await w.owner.say(w.room, f'/frob{i}')
    asyncio.run(while_stopped())
    w.new_platform()
    run(w, second, timeout=180)
    got = asyncio.run(w.replies(w.owner, w.room))
    assert got == [f'Unknown command /frob{i}. Send /help for the list.' for i in range(n + 1)]


def test_malformed_events_and_hostile_uploads_get_one_line_each(make_world):
    async def scenario(w):
        room = await w.open_dm(w.owner)
        bot = w.bot['user_id']
        await w.owner.call('PUT', f'/rooms/{room}/send/com.example.junk/j1', json={'body': {'deep': ['x'] * 100}})  # not a message
        await w.owner.say(room, msgtype='m.location', body='here', geo_uri='geo:0,0')  # not something multis reads
        async def upload_then_kb(content, name):
            k = len(await w.replies(w.owner, room))
            await w.owner.say(room, **content)
            assert (await w.owner.wait(room, bot, k + 1))[k].startswith(f'Index {name} as kb')
            return (await w.ask(w.owner, room, 'kb'))[0]
        assert await upload_then_kb({'msgtype': 'm.file', 'body': 'evil.md', 'url': 'https://evil.example/x'}, 'evil.md') == \
            "evil.md: not a Matrix media URL: 'https://evil.example/x'"
        assert (await upload_then_kb({'msgtype': 'm.file', 'body': 'gone.md', 'url': 'mxc://localhost/nosuchmedia'}, 'gone.md')) \
            .startswith('gone.md: the homeserver could not deliver the file (HTTP 404)')
        await w.owner.say(room, msgtype='m.file', body='nourl.md')                     # no url: not a valid event, left alone
        assert await w.ask(w.owner, room, '/frob9') == ['Unknown command /frob9. Send /help for the list.']   # still serving
    w = make_world()
    w.cfg['owner_id'] = w.owner.id
    run(w, scenario)


def test_a_stranger_flooding_invitations_and_messages_gets_one_hint(make_world):
    async def scenario(w):
        rooms = []
        for _ in range(5):                                                          # five group invitations: all declined
            rooms.append((await w.stranger.call('POST', '/createRoom', json={'invite': [w.bot['user_id']], 'preset': 'private_chat'}))['room_id'])
        room = await w.open_dm(w.stranger)
        for i in range(30): await w.stranger.say(room, f'let me in {i}')
        assert await w.ask(w.stranger, room, '/start nope')  == ['That pairing code is not right.']
        assert (await w.replies(w.stranger, room)) == [HINT, 'That pairing code is not right.']
        for rid in rooms:
            d = await w.stranger.call('GET', f'/rooms/{rid}/state/m.room.member/{w.bot["user_id"]}')
            assert d['membership'] == 'leave'
    w = make_world()
    w.cfg['owner_id'] = w.owner.id
    run(w, scenario)


def test_the_init_wizard_asks_for_the_homeserver_user_and_a_password(synapse, tmp_path):
    "Interactive `multis init`: Matrix yes, its homeserver and user, Enter for a token, then the password, exchanged"
    from multis.run.onboarding import run_init
    k = next(_n)
    bot = synapse.register(f'bot{k}', password='pw-wizard-1')
    prompts, said = [], []
    def script(*answers):
        it = iter(answers)
        def ask(p): prompts.append(p); return next(it)
        return ask
    cfg = run_init(interactive=True, home=tmp_path/'home', say=said.append,
                   ask=script('', 'none', 'no', 'yes', synapse.url + '/', bot['user_id']), ask_secret=script('', '', 'pw-wizard-1'))
    mx = cfg['platforms']['matrix']
    assert (mx['enabled'], mx['homeserver'], mx['user_id']) == (True, synapse.url, bot['user_id'])
    assert mx['access_token'].startswith('syt_') and mx['device_id'] and 'pw-wizard-1' not in (tmp_path/'home'/'config.json').read_text()
    assert any('Matrix homeserver URL' in p for p in prompts) and any('never stored' in p for p in prompts)
    who = httpx.get(f'{synapse.url}/_matrix/client/v3/account/whoami', headers={'Authorization': f"Bearer {mx['access_token']}"}).json()
    assert (who['user_id'], who['device_id']) == (bot['user_id'], mx['device_id'])
    # a wrong homeserver answer is asked again, with the reason
    said.clear()
    run_init(interactive=True, home=tmp_path/'home2', say=said.append,
             ask=script('', 'none', 'no', 'yes', 'matrix.example.org', synapse.url, bot['user_id']), ask_secret=script('', '', mx['access_token']))
    assert any('must be an http(s) URL' in s for s in said)


def test_send_for_the_scheduler_and_the_outbox(make_world):
    "The contract's `send`: a reminder is an m.text (it notifies), long ones in parts; a room multis is not in is refused"
    async def scenario(w):
        room = await w.open_dm(w.owner)
        end = time.monotonic() + 20
        while room not in w.mx.client.rooms:        # joined on the server; known to the client after its next sync
            assert time.monotonic() < end, 'the join never reached the client'
            await asyncio.sleep(0.05)
        ids = await w.mx.send(room, 'Reminder: call Alice')
        assert len(ids) == 1 and ids[0].startswith('$')
        ids = await w.mx.send(room, 'word ' * 2000)
        assert len(ids) == 3
        async with w.owner._http() as h:
            d = (await h.get(f'/_matrix/client/v3/rooms/{room}/event/{ids[0]}')).json()
        assert d['content']['msgtype'] == 'm.text'
        with pytest.raises(MultisError, match='refused the message'):
            await w.mx.send('!nosuchroom:localhost', 'hello')
    w = make_world()
    w.cfg['owner_id'] = w.owner.id
    run(w, scenario)
    with pytest.raises(MultisError, match='Matrix is not running'): asyncio.run(w.mx.send('!x:localhost', 'hi'))
