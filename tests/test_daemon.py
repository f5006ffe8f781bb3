"The daemon as real processes in a temporary home: start, status, a refused second start, stop, SIGTERM, stale pid files"
import asyncio, json, os, signal, subprocess, sys, time
from pathlib import Path
import pytest
from multis.config import DEFAULT_CONFIG, save_config
from multis.run.daemon import daemon_state, pid_path, state_path, log_path, lock_path

VERB = 'import sys; from multis.cli import main; sys.exit(main(sys.argv[1:]))'


@pytest.fixture
def home(tmp_path):
    "A home whose config enables no platform and no model (the daemon runs the scheduler alone)"
    h = tmp_path/'home'
    save_config(DEFAULT_CONFIG, h/'config.json')
    yield h
    pid = _pid(h)                     # never leave a daemon behind, whatever failed
    if pid and daemon_state(h)['running']:
        os.kill(pid, signal.SIGKILL)


def _pid(home):
    try: return int(pid_path(home).read_text())
    except (OSError, ValueError): return None


def _env(home): return {**os.environ, 'MULTIS_HOME': str(home)}


def multis(home, *args, timeout=60):
    "Run `start|stop|status ...` as the CLI would, in its own process"
    return subprocess.run([sys.executable, '-c', VERB, *args], env=_env(home), capture_output=True, text=True, timeout=timeout)


def _alive(pid, wait=5):
    "Whether `pid` runs (a zombie, exited but not yet reaped by its new parent, does not); waits up to `wait` s to be sure"
    end = time.monotonic() + wait
    while True:
        try:
            os.kill(pid, 0)
            stat = Path(f'/proc/{pid}/stat')
            zombie = stat.exists() and stat.read_text().rsplit(')', 1)[1].split()[0] == 'Z'
        except ProcessLookupError: return False
        if zombie or time.monotonic() > end: return not zombie
        time.sleep(0.05)


def _wait_ready(home, proc, timeout=20):
    "Wait until the daemon in `proc` has written its state file"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None: pytest.fail(f"the daemon exited with {proc.returncode}: {log_path(home).read_text()}")
        try:
            if json.loads(state_path(home).read_text()).get('pid') == proc.pid: return
        except (OSError, ValueError): pass
        time.sleep(0.05)
    pytest.fail('the daemon did not get ready')


def test_start_status_second_start_stop(home):
    r = multis(home, 'status')
    assert (r.returncode, r.stdout.splitlines()[0]) == (3, 'multis is not running')

    r = multis(home, 'start')
    assert r.returncode == 0, r.stderr
    pid = _pid(home)
    assert r.stdout.startswith(f"multis started (pid {pid}); log: {log_path(home)}")
    assert 'no chat platform enabled: only the scheduler runs' in r.stdout
    assert _alive(pid, wait=0) and pid != os.getpid()

    r = multis(home, 'status')
    assert r.returncode == 0
    assert r.stdout.startswith(f"multis is running (pid {pid}, up ")

    r = multis(home, 'start')
    assert (r.returncode, r.stderr.strip()) == (1, f"multis is already running (pid {pid})")
    r = multis(home, 'start', '--foreground')
    assert (r.returncode, r.stderr.strip()) == (1, f"multis is already running (pid {pid})")

    r = multis(home, 'stop')
    assert (r.returncode, r.stdout.strip()) == (0, f"multis stopped (pid {pid})")
    assert not _alive(pid)
    assert not pid_path(home).exists() and not state_path(home).exists()
    r = multis(home, 'status')
    assert (r.returncode, r.stdout.splitlines()[0]) == (3, 'multis is not running')
    r = multis(home, 'stop')
    assert (r.returncode, r.stdout.strip()) == (0, 'multis is not running')

    log = log_path(home).read_text()
    assert 'no chat platform is enabled' in log
    assert f"multis stopped cleanly (pid {pid})" in log
    assert 'Traceback' not in log


def test_foreground_exits_0_on_sigterm(home):
    proc = subprocess.Popen([sys.executable, '-c', VERB, 'start', '--foreground'], env=_env(home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_ready(home, proc)
        assert _pid(home) == proc.pid
        r = multis(home, 'status')
        assert r.stdout.startswith(f"multis is running (pid {proc.pid}")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None: proc.kill()
    assert not pid_path(home).exists()
    lines = log_path(home).read_text().splitlines()
    assert lines[-1].endswith(f"INFO multis.run.daemon: multis stopped cleanly (pid {proc.pid})")
    assert daemon_state(home)['running'] is False


def test_two_daemons_started_together_only_one_runs(home):
    procs = [subprocess.Popen([sys.executable, '-c', VERB, 'start', '--foreground'], env=_env(home),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        end = time.monotonic() + 20
        while time.monotonic() < end and not any(p.poll() is not None for p in procs): time.sleep(0.05)
        loser = next(p for p in procs if p.poll() is not None)
        winner = next(p for p in procs if p is not loser)
        assert loser.returncode == 1
        assert 'multis is already running' in loser.stderr.read()
        _wait_ready(home, winner)
        winner.send_signal(signal.SIGTERM)
        assert winner.wait(30) == 0
    finally:
        for p in procs:
            if p.poll() is None: p.kill()


def test_stale_pid_file_is_cleaned(home):
    dead = subprocess.Popen([sys.executable, '-c', 'pass'])
    dead.wait()
    pid_path(home).parent.mkdir(parents=True, exist_ok=True)
    pid_path(home).write_text(f"{dead.pid}\n")
    state_path(home).write_text(json.dumps({'pid': dead.pid, 'started': 1.0, 'platforms': {}}))
    r = multis(home, 'status')
    assert (r.returncode, r.stdout.splitlines()[0]) == (3, f"multis is not running (removed the stale pid file of process {dead.pid})")
    assert not pid_path(home).exists() and not state_path(home).exists()
    # a pid file naming a live process that is not multis (this test) is stale too: the lock decides
    pid_path(home).write_text(f"{os.getpid()}\n")
    assert daemon_state(home) == {'running': False, 'stale_pid': os.getpid()}
    r = multis(home, 'start')                  # and a start goes ahead
    assert r.returncode == 0, r.stderr
    assert multis(home, 'stop').returncode == 0


def test_start_reports_a_daemon_that_cannot_run(home):
    (home/'config.json').write_text('{"llm": {"timeout": "soon"}}')
    r = multis(home, 'start')
    assert r.returncode == 1
    assert 'multis could not start (exit status 1)' in r.stderr
    assert 'llm.timeout must be a number' in r.stderr
    assert daemon_state(home)['running'] is False


# --- with the Telegram platform, against the fake Bot API server ---

from multis.config import deep_merge
from multis.testing.fake_telegram import FakeBotAPI
from multis.testing.providers import FakeProvider
from multis.run.daemon import Daemon

CODE = 'TIGER-42'


def _telegram_cfg(srv, **over):
    return deep_merge(DEFAULT_CONFIG, {'pairing_code': CODE, **over,
                                       'platforms': {'telegram': {'enabled': True, 'bot_token': srv.token, 'base_url': srv.base_url}}})


def test_daemon_process_serves_telegram_and_stops_on_sigterm(home):
    with FakeBotAPI() as srv:
        save_config(_telegram_cfg(srv), home/'config.json')
        proc = subprocess.Popen([sys.executable, '-c', VERB, 'start', '--foreground'], env=_env(home),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait_ready(home, proc)
            assert json.loads(state_path(home).read_text())['platforms'] == {'telegram': 'running'}
            assert multis(home, 'status').stdout.splitlines()[1] == '  telegram: running'
            srv.push_text(100, 100, f'/start {CODE}')
            assert srv.wait_sent(1, 20)[0]['text'] == 'Paired: you are the owner; send /help to see what you can do.'
            srv.push_text(100, 100, '/jobs')
            assert srv.wait_sent(2, 20)[1]['text'].startswith('No scheduled jobs in this chat.')
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None: proc.kill()
    assert log_path(home).read_text().splitlines()[-1].endswith(f"multis stopped cleanly (pid {proc.pid})")
    assert srv.token not in log_path(home).read_text()


class Clock:
    def __init__(self, t): self.t = t
    def __call__(self): return self.t


def test_cron_answer_reaches_the_telegram_chat(tmp_path):
    "/cron sent through Telegram; at 7:00 (an injected clock) the daemon's tick sends the answer to that chat"
    sunday = time.mktime((2026, 11, 22, 10, 30, 0, 0, 0, -1))
    clock = Clock(sunday)
    with FakeBotAPI() as srv:
        d = Daemon(tmp_path, _telegram_cfg(srv, owner_id='100', allowed_users=['100']), provider=FakeProvider(), clock=clock)

        async def scenario():
            await d.startup()
            srv.push_text(100, 100, '/cron "0 7 * * *" what is on today?')
            reply = (await asyncio.to_thread(srv.wait_sent, 1, 20))[0]['text']
            assert await d.tick() == {'capture': 0, 'retention': {'logs': 0, 'sections': 0, 'summaries': 0, 'messages': 0}, 'jobs': []}
            clock.t = time.mktime((2026, 11, 23, 7, 0, 15, 0, 0, -1))
            done = await d.tick()
            sent = await asyncio.to_thread(srv.wait_sent, 2, 20)
            await d.shutdown()
            return reply, done, sent

        reply, done, sent = asyncio.run(scenario())
    job = reply.split()[1]
    assert reply.startswith(f"Scheduled {job} (0 7 * * *), next run Mon 23 Nov 07:00 (")     # then the chat's zone
    assert [r['ok'] for r in done['jobs']] == [True]
    assert (sent[1]['chat_id'], sent[1]['text']) == (100, f"Scheduled ({job}): what is on today?\n\nEcho: what is on today?")
    assert d.status == {'telegram': 'running'}


# --- issue 14 item 27: `start --foreground` says what runs; a local Bot API server set up by `multis init` ---

MULTIS = [sys.executable, '-c', 'import sys; from multis.cli import main; sys.exit(main(sys.argv[1:]))']


def _foreground(home):
    "`multis start --foreground` through the CLI, stopped by SIGTERM once ready; (returncode, stdout, stderr)"
    proc = subprocess.Popen([*MULTIS, 'start', '--foreground'], env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_ready(home, proc)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None: proc.kill()
    return proc.returncode, out, err, proc.pid


def test_foreground_says_it_started_and_stopped(home):
    code, out, err, pid = _foreground(home)
    assert (code, err) == (0, ''), err
    assert out.splitlines() == [f"multis started (pid {pid}); log: {log_path(home)}", '  telegram: off', '  beeper: off', '  matrix: off',
                                '  no chat platform is running: only the scheduler runs',
                                '  scheduler: running, 0 scheduled jobs, checked every 30 s',
                                '  service: off (service.enabled is false)', '  watch: off (no watched folders)',
                                'Ctrl-C stops it.', f"multis stopped (pid {pid})"]


def test_background_start_prints_once_and_its_log_has_no_terminal_lines(home):
    r = multis(home, 'start')
    assert r.returncode == 0, r.stderr
    assert multis(home, 'stop').returncode == 0
    log = log_path(home).read_text()
    assert 'Ctrl-C stops it.' not in log and 'multis stopped cleanly' in log


def test_init_with_a_local_bot_api_server_then_start_foreground(home):
    "`multis init --telegram-base-url` and a token of a local server's own shape; the daemon serves through that server"
    with FakeBotAPI(token='local-test-token') as srv:
        r = subprocess.run([*MULTIS, 'init', '--non-interactive', '--telegram-base-url', srv.base_url, '--telegram-token', srv.token],
                           env=_env(home), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        proc = subprocess.Popen([*MULTIS, 'start', '--foreground'], env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait_ready(home, proc)
            code = json.loads((home/'config.json').read_text())['pairing_code']
            srv.push_text(100, 100, f'/start {code}')
            assert srv.wait_sent(1, 20)[0]['text'].startswith('Paired: you are the owner')
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None: proc.kill()
    assert proc.returncode == 0, err
    assert out.splitlines()[1:3] == ['  telegram: running', '  beeper: off'] and out.splitlines()[-1] == f"multis stopped (pid {proc.pid})"
    assert srv.token not in out + err + log_path(home).read_text()


# --- issue 14 item 26: the docs processor (what nbdev_docs runs) runs this chapter's notebook ---

DOCS_PROC = '''import sys, tempfile
from pathlib import Path
from nbdev.processors import FilterDefaults
import nbdev.serve_drv
with tempfile.TemporaryDirectory() as d: nbdev.serve_drv.main((Path(sys.argv[1]), Path(d)/'out.ipynb', FilterDefaults))
'''

@pytest.mark.parametrize('nb', ['80_run.daemon.ipynb', '81_run.onboarding.ipynb', '02_cli.ipynb', '01_config.ipynb'])
def test_docs_processor_runs_the_notebook(nb):
    nbs = Path(__file__).resolve().parents[1]/'nbs'
    r = subprocess.run([sys.executable, '-c', DOCS_PROC, nb], cwd=nbs, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'Found cells containing imports and other code' not in r.stderr


def test_daemon_start_removes_temp_files_interrupted_writes_left(home):
    dead = subprocess.Popen([sys.executable, '-c', 'pass']); dead.wait()
    chat = home/'memory'/'chats'/'100'; chat.mkdir(parents=True)
    tmp = chat/f'.recent.json.{dead.pid}.0a1b2c3d.tmp'; tmp.write_text('[{"half": ')
    code, out, err, pid = _foreground(home)
    assert code == 0, err
    assert not tmp.exists() and 'removed 1 temp files an interrupted write left in memory/' in log_path(home).read_text()


# --- issue 14 item 5: watched folders do not follow symlinks into denied files ---

def test_watched_folder_does_not_follow_links_into_denied_files(tmp_path):
    secret = tmp_path/'memory'/'chats'/'other'/'memory.md'; secret.parent.mkdir(parents=True)
    secret.write_text('# Other chat\nthe okapi vault code is 8812\n')
    notes = tmp_path/'documents'/'inbox'; notes.mkdir(parents=True)
    (notes/'good.md').write_text('# Good\nokapi facts\n')
    (notes/'link.md').symlink_to(secret)
    d = Daemon(tmp_path, deep_merge(DEFAULT_CONFIG, {'watch': [{'path': str(notes), 'scope': 'kb'}]}), provider=FakeProvider(), platforms={})

    async def scenario():
        await d.startup()
        assert await asyncio.to_thread(d.watcher.ready.wait, 20)
        hits = d.store.search('okapi')
        await d.shutdown()
        return hits

    hits = asyncio.run(scenario())
    assert d.status['watch'] == 'running'
    assert [h.name for h in hits] == ['Good'] and not any('8812' in h.content for h in hits)
