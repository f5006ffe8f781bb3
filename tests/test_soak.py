"""Soak: 500 reminders through the daemon and python-telegram-bot to the fake Bot API, 20% of sends failing, the daemon
killed 3 times (once between Telegram's acknowledgement and the outbox's record of it). Counted from the messages
the fake received and from the outbox."""
import os, re, signal, subprocess, sys, time
from collections import Counter
import pytest
from multis.config import DEFAULT_CONFIG, deep_merge, save_config
from multis.chat.outbox import DOUBT_NOTE, Outbox
from multis.chat.scheduler import Scheduler
from multis.chat.when import When
from multis.testing.fake_telegram import FakeBotAPI

N, CHATS = 500, 10

# The daemon as `multis start --foreground` runs it, with a 0.1 s tick; Telegram's own retries off (every failure
# goes back to the outbox); and, when asked, a kill -9 right after the Nth send Telegram acknowledged, before the
# outbox journals the acknowledgement.
CHILD = r'''
import os, signal, sys
from multis.platforms.telegram import TelegramPlatform
from multis.chat.outbox import Outbox
_init = TelegramPlatform.__init__
def init(self, *a, **k): _init(self, *a, **k); self.send_attempts = 1
TelegramPlatform.__init__ = init
n, acked, _finish = int(os.environ.get('SOAK_KILL_AFTER_ACK') or 0), [0], Outbox._finish
def finish(self, e, receipt, error):
    if error is None and n:
        acked[0] += 1
        if acked[0] == n: os.kill(os.getpid(), signal.SIGKILL)
    return _finish(self, e, receipt, error)
Outbox._finish = finish
from multis.run.daemon import run_foreground
sys.exit(run_foreground(os.environ['MULTIS_HOME'], tick_seconds=0.1))
'''

def start(home, **env):
    return subprocess.Popen([sys.executable, '-c', CHILD], env={**os.environ, 'MULTIS_HOME': str(home), **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def texts(srv): return [m['text'] for m in list(srv.sent)]

def wait_for(cond, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond(): return
        time.sleep(0.05)
    raise TimeoutError(what)

def reminders_seen(srv)->Counter: return Counter(m for t in texts(srv) for m in re.findall(r'soak r\d{3}\b', t))

def test_500_reminders_arrive_through_failures_and_kills(tmp_path):
    home = tmp_path/'home'; home.mkdir()
    users = [str(1000 + i) for i in range(CHATS)]
    t0 = time.monotonic()
    with FakeBotAPI() as srv:
        cfg = deep_merge(DEFAULT_CONFIG, {'owner_id': users[0], 'allowed_users': users, 'timezone': 'Europe/Berlin',
                                          'outbox': {'max_attempts': 12, 'retry_seconds': 0.05},
                                          'platforms': {'telegram': {'enabled': True, 'bot_token': srv.token, 'base_url': srv.base_url}}})
        save_config(cfg, home/'config.json')
        sched, now = Scheduler(home=home, cfg=cfg), time.time()
        for i in range(N):   # due over the next 8 seconds, 50 per chat
            u = users[i % CHATS]
            sched.add_reminder('telegram', u, When(f'soak r{i:03d}', at=now + 2 + 8 * i / N), u, now=now)
        srv.fail_rate('sendMessage', 0.2, seed=18)
        kills = []
        p = start(home)                                            # 1: killed from outside, mid-stream
        wait_for(lambda: len(reminders_seen(srv)) >= 100, 60, 'first 100')
        p.send_signal(signal.SIGKILL); p.wait(); kills.append('sigkill')
        p = start(home, SOAK_KILL_AFTER_ACK='40')                  # 2: kills itself between a send and its record
        assert p.wait(60) == -signal.SIGKILL; kills.append('between send and acknowledgement')
        p = start(home)                                            # 3: killed from outside again
        wait_for(lambda: len(reminders_seen(srv)) >= 350, 60, 'first 350')
        p.send_signal(signal.SIGKILL); p.wait(); kills.append('sigkill')
        p = start(home)                                            # 4: runs to the end, stopped cleanly
        try:
            wait_for(lambda: len(reminders_seen(srv)) >= N and Outbox(home).counts()['waiting'] == 0, 90, 'all delivered')
            time.sleep(0.5)                                        # a little longer: nothing more may arrive
            p.send_signal(signal.SIGTERM); assert p.wait(30) == 0
        finally:
            if p.poll() is None: p.kill()
        sent = list(srv.sent)
        failed_sends = len(srv.calls('sendMessage')) - len(sent)
    seen = reminders_seen(srv)
    lost = [f'soak r{i:03d}' for i in range(N) if seen[f'soak r{i:03d}'] == 0]
    twice = sorted(k for k, n in seen.items() if n > 1)
    box = Outbox(home).snapshot()
    mine = {re.search(r'soak r\d{3}', e['text'])[0]: e for e in box.values() if not e.get('notice')}
    print(f"\nsoak: {N} reminders, {len(sent)} messages received, {failed_sends} sends failed (20%), {len(kills)} kills, "
          f"{len(twice)} repeated (marked), {len(lost)} lost, {time.monotonic() - t0:.1f} s")
    assert lost == []                                              # every reminder arrived
    assert len(mine) == N and {e['state'] for e in mine.values()} == {'delivered'}
    assert not any(e.get('notice') for e in box.values())          # none was given up
    assert failed_sends > 50                                       # the failures did happen
    # each message id the outbox holds as a receipt is one the Bot API gave for that very reminder
    by_id = {m['message_id']: m['text'] for m in sent}
    assert all(k in by_id[e['receipt'][0]] for k, e in mine.items())
    # what arrived twice is only what a kill left in doubt (a send with no recorded outcome): at most one per kill,
    # the one killed between Telegram's acknowledgement and the journal among them, and every repeat is marked
    doubted = {k for k, e in mine.items() if e.get('doubt')}
    assert set(twice) <= doubted and 1 <= len(twice) <= len(kills)
    for k in twice:
        copies = [t for t in texts(srv) if re.search(rf'{k}\b', t)]
        assert len(copies) == 2 and sum(t.startswith(DOUBT_NOTE) for t in copies) == 1
