"The daemon as real processes in a temporary home: start, status, a refused second start, stop, SIGTERM, stale pid files"
import json, os, signal, subprocess, sys, time
from pathlib import Path
import pytest
from multis.config import DEFAULT_CONFIG, save_config
from multis.daemon import daemon_state, pid_path, state_path, log_path, lock_path

VERB = 'import sys; from multis.daemon import main; sys.exit(main(sys.argv[1:]))'


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


def _alive(pid):
    try: os.kill(pid, 0)
    except ProcessLookupError: return False
    return True


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
    assert (r.returncode, r.stdout.strip()) == (3, 'multis is not running')

    r = multis(home, 'start')
    assert r.returncode == 0, r.stderr
    pid = _pid(home)
    assert r.stdout.startswith(f"multis started (pid {pid}); log: {log_path(home)}")
    assert 'no chat platform enabled: only the scheduler runs' in r.stdout
    assert _alive(pid) and pid != os.getpid()

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
    assert (r.returncode, r.stdout.strip()) == (3, 'multis is not running')
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
    assert lines[-1].endswith(f"INFO multis.daemon: multis stopped cleanly (pid {proc.pid})")
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
    assert (r.returncode, r.stdout.strip()) == (3, f"multis is not running (removed the stale pid file of process {dead.pid})")
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
