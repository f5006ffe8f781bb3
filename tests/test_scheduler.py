"Scheduler: cron jobs with an injected clock, answered through the router and delivered to the chat"
import asyncio, json, re, time
from pathlib import Path
import pytest
from multis.core import MultisError
from multis.config import DEFAULT_CONFIG, deep_merge
from multis.retrieval.store import Store
from multis.testing.providers import FakeProvider
from multis.memory.chat import ChatMemory
from multis.chat.message import Message
from multis.chat.router import Router
from multis.chat.scheduler import (Scheduler, SchedulerError, ActivityCaptureWorker, check_cron, next_time, platform_deliverer,
                              track_activity, MAX_JOBS_PER_CHAT)
from multis.run.daemon import Daemon

OWNER, USER = '100', '200'


def local(*ymdhm):
    "Seconds since the epoch of a local date and time"
    return time.mktime((*ymdhm, 0, 0, 0, -1))


MONDAY_7 = local(2026, 11, 23, 7, 0)
SUNDAY = local(2026, 11, 22, 10, 30)


class Clock:
    "A clock the test moves by hand"
    def __init__(self, t): self.t = t
    def __call__(self): return self.t


class FakePlatform:
    "A platform that records what it sends, as the daemon's platforms do (async send)"
    def __init__(self): self.sent, self.events = [], []
    async def start(self): self.events.append('start')
    async def stop(self): self.events.append('stop')
    async def send(self, chat_id, text): self.sent.append((chat_id, text)); return len(self.sent)   # a receipt


def answer(system, messages):
    "Captures get a note; questions an answer naming the question"
    q = messages[-1]['content']
    return '- Talked about the shop.' if q.startswith('The conversation') else f"Answer to: {q}"


@pytest.fixture
def clock(): return Clock(SUNDAY)


@pytest.fixture
def bot(tmp_path, clock):
    "A router (owner 100, paired 200) and a scheduler delivering to a fake Telegram, on a temporary home"
    cfg = deep_merge(DEFAULT_CONFIG, {'owner_id': OWNER, 'allowed_users': [OWNER, USER]})
    st = Store(tmp_path/'multis.db')
    router = Router(st, cfg, home=tmp_path, provider=FakeProvider(answer), clock=clock)
    tg = FakePlatform()
    sched = router.scheduler = Scheduler(router, deliver=platform_deliverer({'telegram': tg}), clock=clock)
    yield router, sched, tg
    router.close(); st.close()


def say(router, text, sender=OWNER):
    return router.handle(Message('telegram', sender, sender, text))


def test_job_fires_and_answer_reaches_the_chat(bot, clock):
    router, sched, tg = bot
    job = sched.add_job('telegram', OWNER, '0 7 * * 1', 'summarise my week', OWNER)
    assert job['next_run'] == MONDAY_7
    assert sched.run_due() == [] and tg.sent == []
    clock.t = MONDAY_7 + 30
    recs = sched.run_due()
    assert [(r['job'], r['ok']) for r in recs] == [(job['id'], True)]
    assert tg.sent == [(OWNER, f"Scheduled ({job['id']}): summarise my week\n\nAnswer to: summarise my week")]
    lines = [json.loads(l) for l in (sched.runs_dir/f"{job['id']}.jsonl").read_text().splitlines()]
    assert lines == [{'ts': clock.t, 'job': job['id'], 'ok': True, 'chars': len(tg.sent[0][1])}]
    assert sched.list_jobs()[0]['next_run'] == local(2026, 11, 30, 7, 0)
    assert sched.run_due() == []                            # not twice
    # the question and answer joined the owner's chat memory, like an /ask
    assert [m['content'] for m in ChatMemory(OWNER, True, router.home).load_recent()][-1].startswith('Answer to: summarise my week')


def test_missed_runs_are_not_replayed_in_a_burst(bot, clock):
    router, sched, tg = bot
    job = sched.add_job('telegram', OWNER, '0 7 * * *', 'what is due today?', OWNER)
    clock.t = MONDAY_7 + 7*86400 + 3600                     # stopped for a week: 8 runs missed
    assert len(sched.run_due()) == 1                          # one catch-up run
    assert len(tg.sent) == 1
    nxt = sched.list_jobs()[0]['next_run']
    assert nxt == local(2026, 12, 1, 7, 0) and nxt > clock.t
    assert sched.run_due() == [] and sched.due() == []
    assert len(sched.runs(job['id'])) == 1


def test_bad_cron_expression_is_a_clear_error(bot):
    _, sched, _ = bot
    for expr, msg in [('61 7 * * *', '"61 7 * * *" is not a cron expression'), ('every morning', 'is not a cron expression'),
                      ('0 7 * * * *', 'five fields'), ('*/2 * * * *', 'more often than every 5 minutes'),
                      ('0 0 30 2 *', 'never matches a date')]:
        with pytest.raises(SchedulerError, match=re.escape(msg)): sched.add_job('telegram', OWNER, expr, 'x', OWNER)
    assert sched.list_jobs() == []
    assert isinstance(SchedulerError('x'), MultisError)


def test_next_time_is_strictly_after_and_local():
    assert next_time('0 7 * * *', local(2026, 11, 22, 7, 0)) == local(2026, 11, 23, 7, 0)
    assert next_time('30 6 * * 1-5', local(2026, 11, 21, 12, 0)) == local(2026, 11, 23, 6, 30)   # Saturday -> Monday
    assert check_cron('  0   9 * * 1 ') == '0 9 * * 1'


def test_jobs_survive_a_new_scheduler_and_limits_hold(bot, clock, tmp_path):
    router, sched, _ = bot
    ids = [sched.add_job('telegram', USER, f'{i} 9 * * *', f'question {i}', USER)['id'] for i in range(MAX_JOBS_PER_CHAT)]
    with pytest.raises(SchedulerError, match='already has 10 jobs'): sched.add_job('telegram', USER, '0 8 * * *', 'one more', USER)
    again = Scheduler(router, clock=clock)
    assert sorted(j['id'] for j in again.list_jobs('telegram', USER)) == sorted(ids)
    assert (tmp_path/'cron'/'jobs.json').stat().st_mode & 0o777 == 0o600
    assert sched.add_job('terminal', 'terminal', '@daily', 'x', 'owner')['platform'] == 'terminal'   # delivered while `multis chat` runs
    with pytest.raises(SchedulerError, match='keep it under'): sched.add_job('telegram', OWNER, '@daily', 'x'*1001, OWNER)


def test_failures_are_logged_and_the_schedule_moves_on(bot, clock):
    router, sched, tg = bot
    gone = sched.add_job('telegram', '300', '@daily', 'hello?', '300')       # never paired
    nowhere = sched.add_job('beeper', '!room', '@daily', 'hello?', OWNER, is_self=True)
    clock.t = SUNDAY + 86400
    recs = {r['job']: r for r in sched.run_due()}
    assert recs[gone['id']] == {'ts': clock.t, 'job': gone['id'], 'ok': False,
                                'error': 'the person who set this job is no longer paired; the job was removed'}
    assert recs[nowhere['id']]['ok'] is True                               # its run waits in the outbox
    waiting = sched.outbox.last_of(nowhere['id'])                        # not tried: that platform is not running here
    assert (waiting['state'], waiting['attempts']) == ('waiting', 0)
    assert tg.sent == [] and sched.due() == []
    assert [j['id'] for j in sched.list_jobs()] == [nowhere['id']]          # the unpaired one is gone
    assert len(sched.runs(gone['id'])) == 1


def test_paired_users_jobs_count_toward_their_rate_limit(bot, clock):
    router, sched, tg = bot
    for i in range(10): assert say(router, f'question {i}?', USER).startswith('Answer to')
    job = sched.add_job('telegram', USER, '@hourly', 'any news?', USER)
    mine = sched.add_job('telegram', OWNER, '@hourly', 'any news?', OWNER)
    clock.t += 30                                              # still within the user's minute of 10 messages
    recs = {r['job']: r for r in sched.run_due(clock.t + 3600)}
    assert recs[job['id']]['error'] == 'skipped: the person who set this job is over their message limit'
    assert recs[mine['id']]['ok'] is True                       # the owner is never limited


def test_cron_jobs_cancel_commands(bot, clock):
    router, sched, _ = bot
    reply = say(router, '/cron "0 7 * * *" summarise my week', USER)
    job = sched.list_jobs('telegram', USER)[0]
    assert reply.startswith(f"Scheduled {job['id']} (0 7 * * *), next run Mon 23 Nov 07:00 (")      # then the chat's zone
    assert (job['cron'], job['prompt'], job['sender_id']) == ('0 7 * * *', 'summarise my week', USER)
    assert say(router, '/cron 30 18 * * 5 weekly digest please', USER).startswith('Scheduled')
    assert say(router, '/cron “0 9 * * 1” curly quotes from a phone', USER).startswith('Scheduled')
    jobs = say(router, '/jobs', USER)
    assert jobs.startswith('Scheduled jobs in this chat:') and job['id'] in jobs and 'weekly digest please' in jobs
    assert say(router, '/jobs', OWNER).startswith('No scheduled jobs in this chat.')       # the owner's chat has none
    assert say(router, f"/cancel {job['id']}", OWNER) == f"No job {job['id']} in this chat."
    assert say(router, f"/cancel {job['id']}", USER) == f"Cancelled {job['id']} (0 7 * * *)."
    assert job['id'] not in say(router, '/jobs', USER)
    assert say(router, '/cron "61 * * * *" nope', USER).startswith('"61 * * * *" is not a cron expression')
    assert say(router, '/cron', USER).startswith('Usage: /cron "0 7 * * 1"')
    assert say(router, '/cancel', USER).startswith('Usage: /cancel <id>')
    events = [json.loads(l) for l in (router.home/'audit.log').read_text().splitlines()]
    assert [e['action'] for e in events if e['event'] == 'cron'] == ['add', 'add', 'add', 'cancel']


def test_commands_without_a_scheduler_point_to_the_daemon(tmp_path):
    with Store(tmp_path/'m.db') as st:
        r = Router(st, deep_merge(DEFAULT_CONFIG, {'owner_id': OWNER}), home=tmp_path, provider=FakeProvider())
        for cmd in ('/cron "0 7 * * *" x', '/jobs', '/cancel abc'):
            assert 'multis start' in r.handle(Message('telegram', OWNER, OWNER, cmd))
        assert '/cron' in r.handle(Message('telegram', OWNER, OWNER, '/help'))
        r.close()


def test_capture_cycle_captures_active_chats_only_once(bot, clock):
    router, sched, _ = bot
    worker = track_activity(router.conv)
    assert isinstance(worker, ActivityCaptureWorker) and track_activity(router.conv) is worker
    say(router, 'is the shop open on Sunday?', USER)
    assert sched.capture_cycle() == 1
    assert worker.wait(10)
    mem = ChatMemory(USER, home=router.home)
    assert '- Talked about the shop.' in mem.load_memory()
    assert sched.capture_cycle() == 0 and worker.active == {}
    say(router, 'and on Monday?', USER)
    assert sched.capture_cycle() == 1 and worker.wait(10)


def test_tick_runs_builtins_on_their_intervals(bot, clock):
    router, sched, _ = bot
    assert sorted(sched.tick()) == ['capture', 'jobs', 'retention']
    clock.t += 60
    assert sorted(sched.tick()) == ['jobs']
    clock.t += 15*60
    assert sorted(sched.tick()) == ['capture', 'jobs']
    state = json.loads((router.home/'cron'/'state.json').read_text())
    assert state == {'capture': clock.t, 'retention': SUNDAY}
    clock.t = SUNDAY + 86400
    assert 'retention' in Scheduler(router, clock=clock).tick()      # the daily clean-up, after a restart too


def test_daemon_delivers_a_cron_answer_to_the_platform(tmp_path, clock):
    "The whole path in one process: /cron through the daemon's router, a tick at 7:00, the platform's send"
    cfg = deep_merge(DEFAULT_CONFIG, {'owner_id': OWNER, 'allowed_users': [OWNER]})
    tg = FakePlatform()
    d = Daemon(tmp_path, cfg, provider=FakeProvider(answer), platforms={'telegram': tg}, clock=clock)

    async def scenario():
        await d.startup()
        reply = await asyncio.to_thread(d.router.handle, Message('telegram', OWNER, OWNER, '/cron "0 7 * * *" what is on today?'))
        clock.t = local(2026, 11, 23, 7, 0) + 20
        done = await d.tick()
        await d.shutdown()
        return reply, done

    reply, done = asyncio.run(scenario())
    job_id = reply.split()[1]
    assert [r['ok'] for r in done['jobs']] == [True]
    assert tg.sent == [(OWNER, f"Scheduled ({job_id}): what is on today?\n\nAnswer to: what is on today?")]
    assert tg.events == ['start', 'stop']
