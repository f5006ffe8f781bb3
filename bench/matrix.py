"""Matrix round trip: a person's message to multis and the reply back, through a real Synapse on 127.0.0.1, beside a
bare matrix-nio echo bot on the same homeserver, in the same run.

    .venv/bin/python bench/matrix.py                  # 100 messages to each bot: ~1 min
    .venv/bin/python bench/matrix.py --messages 200

The person (plain HTTP, as in tests/test_matrix.py) sends `/frob<i>` and long-polls `/sync` until the bot's reply
shows; the two bots take turns message by message, so a noisy moment hits both. The echo bot is the floor: a nio sync
loop that answers each text with a notice, nothing else. multis answers through its platform (`MatrixPlatform`) and
router (an unknown command: no search, no model), journaling each event and its reply (fsynced) before sending, and
sending with a transaction id. The figure that matters is multis's overhead over the echo bot at p50 and p95.
"""
import argparse, asyncio, json, sys, tempfile, time, uuid
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import httpx
from _common import machine, pct
from multis.config import DEFAULT_CONFIG, deep_merge
from multis.retrieval.store import Store
from multis.chat.router import Router
from multis.testing.providers import FakeProvider
from multis.testing.synapse import TempSynapse


class EchoBot:
    "The floor: a nio client that answers each text with a notice"
    def __init__(self, srv, user):
        from nio import AsyncClient, AsyncClientConfig
        self.c = AsyncClient(srv.url, user['user_id'], config=AsyncClientConfig(encryption_enabled=False))
        self.c.restore_login(user['user_id'], user['device_id'], user['access_token'])
        self.task = None

    async def run(self):
        from nio import RoomMessageText, SyncResponse
        r = await self.c.sync(timeout=0)
        for rid in r.rooms.invite: await self.c.join(rid)
        while True:
            r = await self.c.sync(timeout=30000)
            if not isinstance(r, SyncResponse): continue
            for rid in r.rooms.invite: await self.c.join(rid)
            for rid, info in r.rooms.join.items():
                for ev in info.timeline.events:
                    if isinstance(ev, RoomMessageText) and ev.sender != self.c.user_id:
                        await self.c.room_send(rid, 'm.room.message', {'msgtype': 'm.notice', 'body': f'echo {ev.body}'})


class Person:
    "Someone who sends a message and waits for the reply on a long-polled /sync"
    def __init__(self, srv, user):
        self.h = httpx.AsyncClient(base_url=srv.url, headers={'Authorization': f"Bearer {user['access_token']}"}, timeout=60)
        self.since = None

    async def call(self, method, path, **kw):
        r = await self.h.request(method, f'/_matrix/client/v3{path}', **kw)
        r.raise_for_status(); return r.json()

    async def sync(self, timeout=30000):
        params = {'timeout': timeout, 'filter': json.dumps({'presence': {'not_types': ['*']}, 'room': {'timeline': {'limit': 50}}}),
                  **({'since': self.since} if self.since else {})}
        d = await self.call('GET', '/sync', params=params)
        self.since = d['next_batch']
        return d

    async def dm(self, bot):
        rid = (await self.call('POST', '/createRoom', json={'invite': [bot], 'is_direct': True, 'preset': 'trusted_private_chat'}))['room_id']
        while bot not in (await self.call('GET', f'/rooms/{rid}/joined_members'))['joined']: await asyncio.sleep(0.05)
        return rid

    async def round_trip(self, rid, bot, text)->float:
        "Seconds from sending `text` to seeing the bot's next message in the room"
        t = time.perf_counter()
        await self.call('PUT', f'/rooms/{rid}/send/m.room.message/{uuid.uuid4().hex}', json={'msgtype': 'm.text', 'body': text})
        while True:
            d = await self.sync()
            evs = d.get('rooms', {}).get('join', {}).get(rid, {}).get('timeline', {}).get('events', [])
            if any(e['sender'] == bot and e['type'] == 'm.room.message' for e in evs): return time.perf_counter() - t


async def main(n:int):
    from multis.platforms.matrixbot import MatrixPlatform
    srv = TempSynapse().start()
    if not srv.ok: sys.exit(srv.why)
    try:
        home = Path(tempfile.mkdtemp(prefix='multis-bench-matrix-'))
        person, echo_user, bot = srv.register('person'), srv.register('echo'), srv.register('multis')
        cfg = deep_merge(DEFAULT_CONFIG, {'owner_id': person['user_id'], 'platforms': {'matrix': {
            'enabled': True, 'homeserver': srv.url, 'user_id': bot['user_id'], 'access_token': bot['access_token'], 'encryption': False}}})
        store = Store(home/'multis.db')
        router = Router(store, cfg, home=home, provider=FakeProvider())
        mx = MatrixPlatform(router, cfg, home)
        echo = EchoBot(srv, echo_user)
        await mx.start()
        echo.task = asyncio.create_task(echo.run())
        p = Person(srv, person)
        await p.sync(0)
        rooms = {'echo': await p.dm(echo_user['user_id']), 'multis': await p.dm(bot['user_id'])}
        bots = {'echo': echo_user['user_id'], 'multis': bot['user_id']}
        await p.sync(0)
        for name in rooms: await p.round_trip(rooms[name], bots[name], '/warmup')   # first replies: joins, first syncs
        times = {'echo': [], 'multis': []}
        for i in range(n):
            for name in (('echo', 'multis') if i % 2 else ('multis', 'echo')):
                times[name].append(1000 * await p.round_trip(rooms[name], bots[name], f'/frob{i}'))
        echo.task.cancel(); await mx.stop(); await echo.c.close(); await p.h.aclose(); router.close(); store.close()
        return times
    finally: srv.stop()


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--messages', type=int, default=100)
    a = ap.parse_args()
    from importlib.metadata import version
    print(machine())
    print(f"Synapse {version('matrix-synapse')}, matrix-nio {version('matrix-nio')}; {a.messages} messages to each bot, alternating")
    t = asyncio.run(main(a.messages))
    print(f"{'round trip (ms)':<28}{'p50':>8}{'p95':>8}")
    for name, label in (('echo', 'bare nio echo bot'), ('multis', 'multis (platform + router)')):
        print(f"{label:<28}{pct(t[name], 50):8.1f}{pct(t[name], 95):8.1f}")
    o50, o95 = pct(t['multis'], 50) - pct(t['echo'], 50), pct(t['multis'], 95) - pct(t['echo'], 95)
    print(f"{'multis overhead':<28}{o50:8.1f}{o95:8.1f}   (ratio at p50 {pct(t['multis'], 50) / pct(t['echo'], 50):.2f}x)")
