"""The memory service under load: `multis serve --workers N` (N = 1, 2, 4) on one store, 8 clients mixing searches and
chat-message writes; requests/s, p50/p95, errors, and lost writes (every acknowledged message looked up afterwards in
the chat's log and in the store).

    .venv/bin/python bench/service.py                                   # SQLite in a temp home: ~1.5 min
    .venv/bin/python bench/service.py --store postgresql://user@127.0.0.1:5432/multis_bench
    .venv/bin/python bench/service.py --postgres                        # a throwaway PostgreSQL (multis.testing.postgres)

Each client alternates a search (`POST /search`, a question drawn from the sample documents' words) and a message
(`POST /memory/chat<k>/messages` with a unique word and a message id). Messages are indexed as they arrive
(`memory.index_raw`), so every write touches the store. Lost writes: acknowledged (200) messages missing from the
chat's log or not found by a search of their unique word in the chat's scope.
"""
import argparse, json, os, random, shutil, subprocess, sys, tempfile, threading, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, pct
import httpx
from multis.config import redact_url
from multis.retrieval.store import open_store
from multis.memory.chat import ChatMemory
from multis.run.guard import service_token
from multis.testing.service import ServeProcess

REPO = Path(__file__).resolve().parents[1]
MULTIS = str(Path(sys.executable).parent/'multis')
WORDS = 'tomato soup roast garlic onion ferry pairing scopes privacy install daemon telegram beeper index search memory'.split()

def load(url:str, token:str, run:str, clients:int, seconds:float)->dict:
    "Each client for `seconds`: search, message, search, message..."
    lat, errors, sent, lock = [], [], [], threading.Lock()
    end = time.monotonic() + seconds
    def client(k:int):
        rng = random.Random(k)
        with httpx.Client(base_url=url, headers={'Authorization': f'Bearer {token}'}, timeout=60) as c:
            i = 0
            while time.monotonic() < end:
                if i % 2 == 0: req = ('/search', {'query': ' '.join(rng.sample(WORDS, 3))})
                else:
                    word = f'w{run}x{k}x{i}z'
                    req = (f'/memory/chat{k}/messages', {'role': 'user', 'content': f'note {word}', 'message_id': word})
                t = time.perf_counter()
                try: r = c.post(*req[:1], json=req[1]); ok = r.status_code == 200; why = r.status_code
                except httpx.HTTPError as e: ok, why = False, type(e).__name__
                d = time.perf_counter() - t
                with lock:
                    lat.append(d)
                    if not ok: errors.append((req[0], why))
                    elif i % 2: sent.append((k, req[1]['message_id']))
                i += 1
    ts = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for t in ts: t.start()
    for t in ts: t.join()
    return dict(lat=lat, errors=errors, sent=sent, wall=time.perf_counter() - t0)

def lost(home:Path, url:str, sent:list)->int:
    "Acknowledged messages missing from their chat's log or from the store"
    logs, missing = {}, 0
    with open_store(url) as st:
        for k, word in sent:
            if k not in logs: logs[k] = ''.join(f.read_text() for f in ChatMemory(f'chat{k}', home=home).log_dir.glob('*.md'))
            if logs[k].count(word) != 1 or not st.search(word, limit=1, scopes=[f'user:chat{k}']): missing += 1
    return missing

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--store', default=None, help='store URL (default: SQLite in the temporary home)')
    ap.add_argument('--postgres', action='store_true', help='start a throwaway PostgreSQL (multis.testing.postgres)')
    ap.add_argument('--workers', default='1,2,4'); ap.add_argument('--clients', type=int, default=8)
    ap.add_argument('--seconds', type=float, default=15)
    a = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix='multis-bench-service-')); server = None
    try:
        url = a.store or f"sqlite:///{home/'multis.db'}"
        if a.postgres:
            from multis.testing.postgres import TempPostgres        # the same throwaway server the tests use
            server = TempPostgres().start()
            if not server.ok: raise SystemExit(f'no PostgreSQL here: {server.why}')
            url = server.new_database('multis_bench')
        (home/'config.json').write_text(json.dumps({'store': {'url': url}}))
        r = subprocess.run([MULTIS, 'index', str(REPO/'data'), '--scope', 'kb', '--quiet'], env={**os.environ, 'MULTIS_HOME': str(home)},
                           capture_output=True, text=True)
        if r.returncode: raise SystemExit(r.stdout + r.stderr)
        print(machine()); print(f"store {redact_url(url)}; {a.clients} clients, {a.seconds:g} s per worker count\n")
        print(f"{'workers':>7} {'req/s':>7} {'p50 ms':>7} {'p95 ms':>7} {'errors':>6} {'writes':>6} {'lost':>5} {'req/s vs 1':>10}")
        base, token = None, service_token(home)
        for n in [int(x) for x in a.workers.split(',')]:
            with ServeProcess(home, '--workers', str(n), timeout=120) as srv:
                time.sleep(1.0 + 0.5 * n)          # every worker up, not only the first
                res = load(srv.url, token, f'{n}r{int(time.time())}', a.clients, a.seconds)
            rps = len(res['lat']) / res['wall']; base = base or rps
            print(f"{n:>7} {rps:>7.1f} {pct(res['lat'], 50)*1e3:>7.1f} {pct(res['lat'], 95)*1e3:>7.1f} {len(res['errors']):>6} "
                  f"{len(res['sent']):>6} {lost(home, url, res['sent']):>5} {rps/base:>9.2f}x", flush=True)
            if res['errors']: print('   errors:', res['errors'][:5])
    finally:
        if server is not None: server.stop()
        shutil.rmtree(home, ignore_errors=True)

if __name__ == '__main__': main()
