"Reminders: a table of phrasings with their times (fixed clocks, several zones, daylight-saving changes), the commands, bad input, and delivery through the outbox to Beeper and the terminal"
import asyncio, io, json, re, time
from datetime import datetime
from zoneinfo import ZoneInfo
import pytest
from multis.config import DEFAULT_CONFIG, deep_merge
from multis.retrieval.store import Store
from multis.testing.providers import FakeProvider
from multis.testing.fake_beeper import FakeBeeperAPI
from multis.chat.message import Message
from multis.chat.router import Router
from multis.chat.when import WhenError, parse_when
from multis.chat.scheduler import Scheduler, next_time, platform_deliverer, MAX_REMINDERS_PER_CHAT
from multis.platforms.beeper import BeeperPlatform
from multis.platforms.terminal import run_terminal

BER, NY = 'Europe/Berlin', 'America/New_York'
def wall(tz, *a): return datetime(*a, tzinfo=ZoneInfo(tz)).timestamp()
A = wall(BER, 2026, 11, 24, 10, 15)        # Tuesday 24 Nov 2026, 10:15 in Berlin
B = wall(BER, 2027, 3, 27, 12, 0)          # Saturday before Berlin's clocks go forward (Sun 28 Mar 2027, 02:00)
C = wall(NY, 2027, 3, 13, 12, 0)           # Saturday before New York's clocks go forward (Sun 14 Mar 2027)
D = wall(BER, 2027, 10, 30, 12, 0)         # Saturday before Berlin's clocks go back (Sun 31 Oct 2027, 03:00)

# (what follows /remind, zone, clock, expected): ('at', local 'Y-m-d H:M', text) | ('cron', expression, text) | ('error', part of the message)
TABLE = [
    ('tomorrow at 9 call Alice', BER, A, ('at', '2026-11-25 09:00', 'call Alice')),
    ('in 20 minutes check the oven', BER, A, ('at', '2026-11-24 10:35', 'check the oven')),
    ('in an hour stand up', BER, A, ('at', '2026-11-24 11:15', 'stand up')),
    ('in half an hour tea', BER, A, ('at', '2026-11-24 10:45', 'tea')),
    ('in 90 minutes leave for the train', BER, A, ('at', '2026-11-24 11:45', 'leave for the train')),
    ('in 3 days dentist', BER, A, ('at', '2026-11-27 10:15', 'dentist')),
    ('in 2 days at 10 dentist', BER, A, ('at', '2026-11-26 10:00', 'dentist')),
    ("on 3 December Bob's birthday", BER, A, ('at', '2026-12-03 09:00', "Bob's birthday")),
    ('Dec 3 at 10am dentist', BER, A, ('at', '2026-12-03 10:00', 'dentist')),
    ('3 December at 18:30 concert', BER, A, ('at', '2026-12-03 18:30', 'concert')),
    ('at 17:30 call mum', BER, A, ('at', '2026-11-24 17:30', 'call mum')),
    ('at 9pm take the pills', BER, A, ('at', '2026-11-24 21:00', 'take the pills')),
    ('at noon lunch with Sam', BER, A, ('at', '2026-11-24 12:00', 'lunch with Sam')),
    ('tonight call mum', BER, A, ('at', '2026-11-24 20:00', 'call mum')),
    ('friday 5pm beer', BER, A, ('at', '2026-11-27 17:00', 'beer')),
    ('next monday at 8:15 standup notes', BER, A, ('at', '2026-11-30 08:15', 'standup notes')),
    ('on wednesday at 11 call the bank', BER, A, ('at', '2026-11-25 11:00', 'call the bank')),
    ('2026-12-03 09:00 renew the passport', BER, A, ('at', '2026-12-03 09:00', 'renew the passport')),
    ('me to call Alice tomorrow at 9', BER, A, ('at', '2026-11-25 09:00', 'call Alice')),
    ('to pay the rent on 1 December', BER, A, ('at', '2026-12-01 09:00', 'pay the rent')),
    ('tomorrow at 7:45 run', BER, A, ('at', '2026-11-25 07:45', 'run')),
    ('tomorrow at 12am backup', BER, A, ('at', '2026-11-25 00:00', 'backup')),
    ("every Monday at 8 send me the week's plan", BER, A, ('cron', '0 8 * * 1', "send me the week's plan")),
    ('every weekday at 7:30 stretch', BER, A, ('cron', '30 7 * * 1-5', 'stretch')),
    ('at 7:30 every weekday stretch', BER, A, ('cron', '30 7 * * 1-5', 'stretch')),
    ('every day at 9 water the plants', BER, A, ('cron', '0 9 * * *', 'water the plants')),
    ('daily at 21:00 journal', BER, A, ('cron', '0 21 * * *', 'journal')),
    ('every morning meds', BER, A, ('cron', '0 8 * * *', 'meds')),
    ('every weekend at 10 long run', BER, A, ('cron', '0 10 * * 0,6', 'long run')),
    ('mondays and thursdays at 18:00 gym', BER, A, ('cron', '0 18 * * 1,4', 'gym')),
    ('every tuesday, thursday at 6pm choir', BER, A, ('cron', '0 18 * * 2,4', 'choir')),
    ('on the 1st of every month at 9 pay the rent', BER, A, ('cron', '0 9 1 * *', 'pay the rent')),
    ('every month on the 15th at 12:00 send the invoice', BER, A, ('cron', '0 12 15 * *', 'send the invoice')),
    ("every year on 3 December Bob's birthday", BER, A, ('cron', '0 9 3 12 *', "Bob's birthday")),
    ('every 2 hours drink water', BER, A, ('cron', '0 */2 * * *', 'drink water')),
    ('every 30 minutes look away from the screen', BER, A, ('cron', '*/30 * * * *', 'look away from the screen')),
    ('every hour check the mail', BER, A, ('cron', '0 * * * *', 'check the mail')),
    # questions and errors, never a guess
    ('at 5 call the plumber', BER, A, ('error', 'At 5 in the morning or the evening?')),
    ('tomorrow at 3 pick up Tom', BER, A, ('error', 'At 3 in the morning or the evening?')),
    ('every day at 6 walk', BER, A, ('error', 'At 6 in the morning or the evening?')),
    ('3/4 at 10 taxes', BER, A, ('error', 'Is 3/4 the 3 of month 4 or the 4 of month 3?')),
    ('next week call Bob', BER, A, ('error', 'Which day and time, "next week"?')),
    ('on tuesday at 11 meeting', BER, A, ('error', 'Today (Tue 24 Nov) or next week (Tue 01 Dec)?')),
    ('yesterday at 9 call Bob', BER, A, ('error', 'Mon 23 Nov 09:00 has passed')),
    ('at 9 call Bob', BER, A, ('error', 'Tue 24 Nov 09:00 has passed (it is 10:15 now, Europe/Berlin). Say "tomorrow at ..."')),
    ('buy milk', BER, A, ('error', 'I found no time in that')),
    ('tomorrow at 9', BER, A, ('error', 'What should I remind you of?')),
    ('every other day water the plants', BER, A, ('error', 'I cannot make a schedule of that')),
    ('every 45 minutes stretch', BER, A, ('error', 'every 45 minutes does not divide the hour')),
    ('at 25:00 sleep', BER, A, ('error', '"at 25:00" is not a time of day')),
    # other zones, the same instant
    ('tomorrow at 9 call Alice', NY, A, ('at', '2026-11-25 09:00', 'call Alice')),
    ('at 17:30 call Alice', 'Asia/Tokyo', A, ('error', 'Tue 24 Nov 17:30 has passed (it is 18:15 now, Asia/Tokyo)')),
    ('in 20 minutes tea', 'Asia/Kolkata', A, ('at', '2026-11-24 15:05', 'tea')),
    ('tonight call Alice', 'America/Los_Angeles', A, ('at', '2026-11-24 20:00', 'call Alice')),
    # daylight-saving changes
    ('tomorrow at 9 brunch', BER, B, ('at', '2027-03-28 09:00', 'brunch')),
    ('in 24 hours check the roast', BER, B, ('at', '2027-03-28 13:00', 'check the roast')),
    ('in 1 day water the seedlings', BER, B, ('at', '2027-03-28 12:00', 'water the seedlings')),
    ('tomorrow at 2:30 am check the clock', BER, B, ('error', '02:30 does not exist on 28 Mar in Europe/Berlin')),
    ('tomorrow at 9 brunch', NY, C, ('at', '2027-03-14 09:00', 'brunch')),
    ('tomorrow at 9 brunch', BER, D, ('at', '2027-10-31 09:00', 'brunch')),
]

@pytest.mark.parametrize('text,tz,now,expected', TABLE, ids=[f"{i}:{t[0][:30]}" for i, t in enumerate(TABLE)])
def test_phrasings(text, tz, now, expected):
    kind, value = expected[0], expected[1]
    if kind == 'error':
        with pytest.raises(WhenError) as e: parse_when(text, now, tz)
        assert value in str(e.value)
        return
    w = parse_when(text, now, tz)
    assert w.what == expected[2]
    if kind == 'cron': assert (w.cron, w.at) == (value, None)
    else: assert w.cron is None and datetime.fromtimestamp(w.at, ZoneInfo(tz)).strftime('%Y-%m-%d %H:%M') == value

def test_the_table_is_big_enough():
    assert len(TABLE) >= 40 and len({z for _, z, _, _ in TABLE}) >= 5

def test_daylight_saving_in_real_hours():
    "Wall-clock times stay put; the hours between them change with the clocks"
    assert parse_when('tomorrow at 9 brunch', B, BER).at - B == 20 * 3600       # 21 wall hours, 20 real ones
    assert parse_when('tomorrow at 9 brunch', D, BER).at - D == 22 * 3600       # 21 wall hours, 22 real ones
    assert next_time('0 7 * * *', B, BER) == wall(BER, 2027, 3, 28, 7, 0)
    assert next_time('0 7 * * *', wall(BER, 2027, 3, 28, 7, 0), BER) - wall(BER, 2027, 3, 28, 7, 0) == 24 * 3600
    assert next_time('30 2 * * *', wall(BER, 2027, 10, 31, 2, 31), BER) == wall(BER, 2027, 11, 1, 2, 30)   # the repeated 2:30 runs once


# --- the commands, on a router with a scheduler (a fixed clock; the chat sets its zone)

OWNER, USER = '100', '200'

class Clock:
    def __init__(self, t): self.t = t
    def __call__(self): return self.t

class Tg:
    "A platform that keeps what it sends and answers with a receipt (or fails when told to)"
    def __init__(self): self.sent, self.down = [], False
    async def send(self, chat_id, text):
        if self.down: raise ConnectionError('Telegram is not reachable')
        self.sent.append((chat_id, text)); return [len(self.sent)]

@pytest.fixture
def bot(tmp_path):
    clock = Clock(A)
    cfg = deep_merge(DEFAULT_CONFIG, {'owner_id': OWNER, 'allowed_users': [OWNER, USER], 'outbox': {'retry_seconds': 60, 'max_attempts': 3}})
    st = Store(tmp_path/'multis.db')
    router = Router(st, cfg, home=tmp_path, provider=FakeProvider(lambda s, m: f"Answer: {m[-1]['content']}"), clock=clock)
    tg = Tg()
    router.scheduler = Scheduler(router, deliver=platform_deliverer({'telegram': tg}), clock=clock)
    yield router, tg, clock
    router.close(); st.close()

def say(router, text, sender=OWNER): return router.handle(Message('telegram', sender, sender, text))

def test_remind_states_the_time_in_the_chats_zone_and_delivers_once(bot):
    router, tg, clock = bot
    assert say(router, '/tz Europe/Berlin') == "This chat's time zone is now Europe/Berlin (it is Tue 24 Nov 10:15 there)."
    reply = say(router, '/remind tomorrow at 9 call Alice')
    job = router.scheduler.list_jobs('telegram', OWNER)[0]
    assert reply == f'Reminder {job["id"]}: "call Alice" on Wed 25 Nov 09:00 (Europe/Berlin). /cancel {job["id"]} stops it.'
    jobs = say(router, '/jobs')
    assert f"{job['id']}  reminder  once  next Wed 25 Nov 09:00 Europe/Berlin  last: not run yet  call Alice" in jobs
    clock.t = wall(BER, 2026, 11, 25, 9, 0) + 20
    router.scheduler.tick()
    assert tg.sent == [(OWNER, f"Reminder ({job['id']}): call Alice")]       # as written: no model
    router.scheduler.tick(); clock.t += 3600; router.scheduler.tick()
    assert len(tg.sent) == 1 and router.scheduler.list_jobs() == []
    assert router.scheduler.outbox.last_of(job['id'])['receipt'] == [1]

def test_repeating_reminders_and_cron_phrases(bot):
    router, tg, clock = bot
    say(router, '/tz America/New_York')
    reply = say(router, '/remind every weekday at 7:30 stretch')
    job = router.scheduler.list_jobs('telegram', OWNER)[0]
    assert reply == f'Reminder {job["id"]}: "stretch" on the schedule 30 7 * * 1-5, next Tue 24 Nov 07:30 (America/New_York). /cancel {job["id"]} stops it.'
    assert say(router, '/remind every Monday and friday 9am plan', USER).startswith('Reminder ')
    assert say(router, '/cron every Monday at 8 summarise my week').startswith('Scheduled ')
    cron = [j for j in router.scheduler.list_jobs('telegram', OWNER) if j['kind'] == 'ask'][0]
    assert (cron['cron'], cron['prompt'], cron['tz']) == ('0 8 * * 1', 'summarise my week', 'America/New_York')
    clock.t = wall(NY, 2026, 11, 24, 7, 30) + 5
    router.scheduler.tick()
    assert tg.sent == [(OWNER, f"Reminder ({job['id']}): stretch")]
    assert 'last: delivered Tue 24 Nov 07:30' in say(router, '/jobs')
    # /tz moves the chat's repeating jobs to the new zone
    assert say(router, '/tz Europe/Berlin').endswith('2 repeating jobs now follow it.')
    nxt = router.scheduler.list_jobs('telegram', OWNER)
    assert {j['tz'] for j in nxt} == {BER}
    assert wall(BER, 2026, 11, 25, 7, 30) in {j['next_run'] for j in nxt}

def test_bad_input_is_one_clear_line(bot):
    router, tg, clock = bot
    cases = [('/remind', 'Usage: /remind <when> <what>'),
             ('/remind call Alice', 'I found no time in that'),
             ('/remind tomorrow at 9', 'What should I remind you of?'),
             ('/remind at 5 call Bob', 'At 5 in the morning or the evening?'),
             ('/remind yesterday at 9 x', 'has passed'),
             ('/remind every 2 minutes ping', 'runs more often than every 5 minutes'),
             ('/remind tomorrow at 9 ' + 'x' * 1500, 'that text has 1,500 characters; keep it under 1,000'),
             ('/remind tomorrow at 9 ' + 'y' * 100_000, 'That reminder has 100,014 characters; keep it under 1,000.'),
             ('/tz Mars/Olympus', '"Mars/Olympus" is not a time zone'),
             ('/tz ../../etc/passwd', 'is not a time zone'),
             ('/tz Europe/Berlin; rm -rf /', 'is not a time zone'),
             ('/cancel', 'Usage: /cancel <id>')]
    for cmd, part in cases:
        reply = say(router, cmd)
        assert part in reply and '\n' not in reply and 'Traceback' not in reply, (cmd, reply)
    assert router.scheduler.list_jobs() == []

def test_too_many_reminders(bot):
    router, tg, clock = bot
    for i in range(MAX_REMINDERS_PER_CHAT):
        clock.t += 61                                           # paired users may send 10 messages a minute
        assert say(router, f'/remind in {i + 10} minutes note {i}', USER).startswith('Reminder ')
    assert say(router, '/remind in 90 minutes one more', USER) == f"this chat already has {MAX_REMINDERS_PER_CHAT} reminders; cancel one first"
    assert say(router, '/remind in 90 minutes mine').startswith('Reminder ')          # another chat has its own
    events = [json.loads(l) for l in (router.home/'audit.log').read_text().splitlines()]
    assert sum(e['event'] == 'remind' for e in events) == MAX_REMINDERS_PER_CHAT + 1

def test_failed_sends_retry_then_the_chat_is_told(bot):
    router, tg, clock = bot
    say(router, '/remind in 10 minutes call the bank')
    job = router.scheduler.list_jobs()[0]
    tg.down = True
    clock.t += 600; router.scheduler.tick()
    jobs = say(router, '/jobs')                                 # the one-shot ran; its delivery waits, and /jobs says so
    assert jobs.startswith('Waiting to be sent in this chat:') and 'last: waiting to be sent (tried 1x: Telegram is not reachable)' in jobs
    d = router.scheduler.outbox.last_of(job['id'])
    assert (d['state'], d['attempts']) == ('waiting', 1)
    clock.t += 60; router.scheduler.tick()
    clock.t += 120; router.scheduler.tick()
    d = router.scheduler.outbox.last_of(job['id'])
    assert (d['state'], d['attempts']) == ('failed', 3) and tg.sent == []
    tg.down = False
    router.scheduler.tick()
    assert tg.sent == [(OWNER, "I could not deliver this scheduled message after 3 tries (Telegram is not reachable):\n"
                               f"Reminder ({job['id']}): call the bank")]

def test_a_missed_one_shot_arrives_once_late_and_a_missed_repeat_catches_up_once(bot):
    router, tg, clock = bot
    say(router, '/tz Europe/Berlin')
    say(router, '/remind tomorrow at 9 call Alice')
    say(router, '/remind every day at 8:30 pills')
    clock.t = wall(BER, 2026, 11, 28, 12, 0)                 # multis was down for three days
    router.scheduler.tick(); router.scheduler.tick()
    texts = [t for _, t in tg.sent]
    assert len(texts) == 2
    assert any(t.endswith('late: it was due Wed 25 Nov 09:00): call Alice') for t in texts)
    assert any(t.endswith('late: it was due Wed 25 Nov 08:30): pills') for t in texts)    # one catch-up run, not three

# --- the same outbox delivers to Beeper and to the terminal

def test_beeper_delivers_reminders_through_the_outbox(tmp_path):
    clock = Clock(A)
    with FakeBeeperAPI(token='tok', owner_id='@me:beeper.com') as fake:
        fake.add_chat('!notes:beeper.com', 'Notes', is_self_chat=True)
        cfg = deep_merge(DEFAULT_CONFIG, {'platforms': {'beeper': {'enabled': True, 'url': fake.url, 'token': 'tok'}},
                                          'outbox': {'retry_seconds': 1}})
        with Store(tmp_path/'multis.db') as st:
            router = Router(st, cfg, home=tmp_path, provider=FakeProvider(), clock=clock)
            bp = BeeperPlatform(router, cfg, home=tmp_path)
            router.scheduler = sched = Scheduler(router, clock=clock)
            m = Message('beeper', '!notes:beeper.com', '@me:beeper.com', '//remind in 20 minutes check the oven', is_self=True)
            assert router.handle(m).startswith('Reminder ')
            async def run():
                sched.deliver = platform_deliverer({'beeper': bp}, asyncio.get_running_loop())
                clock.t += 20 * 60
                fake.fail(500, times=1)                              # the first send fails: retried
                await asyncio.to_thread(sched.tick)
                clock.t += 5
                await asyncio.to_thread(sched.tick)
                await asyncio.to_thread(sched.tick)
            asyncio.run(run())
            bp.close(); router.close()
        texts = fake.texts('!notes:beeper.com')
    assert [t for t in texts if 'check the oven' in t] == [texts[-1]] and texts[-1].startswith('[multis] Reminder (')
    d = list(sched.outbox.snapshot().values())[0]
    assert (d['state'], d['attempts'], d['receipt'].startswith('pending-')) == ('delivered', 2, True)

def test_the_terminal_delivers_from_the_same_outbox(tmp_path):
    clock = Clock(A)
    cfg = deep_merge(DEFAULT_CONFIG, {'outbox': {'retry_seconds': 1}})
    with Store(tmp_path/'multis.db') as st:
        router = Router(st, cfg, home=tmp_path, provider=FakeProvider(), clock=clock)
        router.scheduler = Scheduler(router, clock=clock)
        tg = Tg()
        daemon = Scheduler(router, deliver=platform_deliverer({'telegram': tg}), clock=clock)
        out = io.StringIO()
        run_terminal(router, io.StringIO('/remind in 20 minutes check the oven\n'), out)
        assert 'Reminder ' in out.getvalue()
        clock.t += 20 * 60 + 1
        daemon.tick()                                             # the daemon runs it; it cannot reach the terminal
        assert tg.sent == [] and daemon.outbox.counts()['waiting'] == 1
        out = io.StringIO()
        run_terminal(router, io.StringIO('/help\n'), out)      # `multis chat` writes it
        assert out.getvalue().count('check the oven') == 1
        run_terminal(router, io.StringIO('/help\n'), out2 := io.StringIO())
        assert 'check the oven' not in out2.getvalue()
        assert daemon.outbox.counts() == dict(waiting=0, delivered=1, failed=0)
        router.close()

def test_outbox_threads_and_processes_never_send_one_delivery_twice(tmp_path):
    "The daemon's tick thread, /jobs in the router's thread and `multis chat` in another process share one journal"
    import subprocess, sys, threading
    from multis.chat.outbox import Outbox
    ob = Outbox(tmp_path)
    for i in range(200): ob.put(f'k{i}@1', 'telegram' if i % 2 else 'terminal', '5', f'n{i}')
    sent, lock = [], threading.Lock()
    def send(p, c, t):
        with lock: sent.append(t)
        return 1
    threads = [threading.Thread(target=ob.deliver, args=(send,)) for _ in range(4)]
    other = subprocess.Popen([sys.executable, '-c', f"from multis.chat.outbox import Outbox; import sys; "
                              f"o = Outbox({str(tmp_path)!r}); o.deliver(lambda p, c, t: print(t) or 1, platforms={{'terminal'}})"],
                             stdout=subprocess.PIPE, text=True)
    for t in threads: t.start()
    for t in threads: t.join()
    out = other.communicate(timeout=60)[0].split()
    assert sorted(sent + out) == sorted(f'n{i}' for i in range(200))       # each once, by a thread or the process
    assert Outbox(tmp_path).counts() == dict(waiting=0, delivered=200, failed=0)
