"""`multis migrate --to`: how fast `copy_store` copies a store, beside SQLite's own online backup API copying the same file.

    .venv/bin/python bench/migrate.py                          # 10k and 100k chunks, 3 rounds each
    .venv/bin/python bench/migrate.py --sizes 10000 --rounds 5

Uses bench/search.py's cached databases (with about 10,000 recorded accesses), copied once with a `hash:384`
vector for every chunk (the size of all-MiniLM-L6-v2's), so every kind but facts has rows. Each round copies the
store into a new SQLite file both ways, in an order that alternates:

- `sqlite backup API`: `sqlite3.Connection.backup`, page by page; the plainest copy, SQLite to SQLite only;
- `copy_store`: `multis migrate --to sqlite:///...`, row by row through the store contract (`dump_rows`, `load_rows`),
  in one transaction on the target, with the full-text index rebuilt and the counts checked; the same code copies
  to PostgreSQL.

It prints the median seconds of each, rows per second (every row of every kind) and the ratio to the backup API.
"""
import argparse, sqlite3, statistics, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CACHE, machine
from search import build_with_vectors
from multis.retrieval.embed import HashEmbedder
from multis.retrieval.transfer import copy_store

def backup(src:Path, dst:Path):
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try: a.backup(b)
    finally: a.close(); b.close()

def copy(src:Path, dst:Path): return copy_store(f"sqlite:///{src}", f"sqlite:///{dst}", batch=2000)

VARIANTS = {'sqlite backup API': backup, 'copy_store': copy}

def run(n:int, rounds:int)->dict:
    src, times, rows = build_with_vectors(n, HashEmbedder(384)), {k: [] for k in VARIANTS}, None
    for r in range(rounds):
        for name in (list(VARIANTS) if r % 2 == 0 else list(VARIANTS)[::-1]):
            with tempfile.TemporaryDirectory(dir=CACHE) as d:
                t = time.perf_counter(); res = VARIANTS[name](src, Path(d)/'copy.db'); times[name].append(time.perf_counter() - t)
                if res is not None: rows = res.copied
    return dict(times=times, rows=rows, mb=src.stat().st_size / 2**20)

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--sizes', default='10000,100000'); ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    print(machine(), flush=True)
    for n in [int(s) for s in a.sizes.split(',')]:
        res = run(n, a.rounds)
        total, base = sum(res['rows'].values()), statistics.median(res['times']['sqlite backup API'])
        print(f"\n{n:,} chunks, {res['mb']:,.0f} MB, rows copied: " + ', '.join(f"{k} {v:,}" for k, v in res['rows'].items()))
        print(f"{'variant':<20} {'median s':>9} {'rows/s':>11} {'x backup':>9}")
        for name, ts in res['times'].items():
            m = statistics.median(ts)
            print(f"{name:<20} {m:9.2f} {total/m:11,.0f} {m/base:9.1f}")

if __name__ == '__main__': main()
