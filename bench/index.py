"""Indexing speed: chunks per second into the multis store, beside a bare executemany into a plain FTS5 table.

    .venv/bin/python bench/index.py              # 10,000 chunks, 3 interleaved repeats, about a minute
    .venv/bin/python bench/index.py --n 50000 --repeats 5
    .venv/bin/python bench/index.py --workers 0,1,2,4 # the pool sizes to time (default 0,1,2,4; 0: the default size)
    .venv/bin/python bench/index.py --pdfs ../shared/docs --copies 10 --workers 1,2,4   # PDF-heavy folders

Generated Markdown files (a title, then 20 sections of Zipf text each) are parsed and chunked once to get the rows;
every variant then writes those same rows into a fresh database in a temporary folder, the variants interleaved:
  bare FTS5         executemany into fts5(name, content, section_path, tokenize='porter unicode61'), one transaction
  Store.save        all chunks in one call (one transaction)
  Store.save, 2 MB cache   the same with SQLite's default page cache instead of the store's 64 MB (`CACHE_MB`)
  replace_file      one call (one transaction) per file, as the indexer stores a file
  replace_files x50 one call (one transaction) per 50 files
  replace_files x50, 1 txn   one call per 50 files, all in one transaction: index_directory's writer on a run that
                    takes under a second (it commits about once a second, or when no parsed file is waiting)
  serial, x50       the pipeline from the files one after another in this thread: hash, parse (one worker), chunk,
                    replace_files per 50 files, one transaction each (what index_directory did before its pool)
  index_directory, N workers   the whole pipeline from the files: the files parsed and chunked by a pool of N
                    workers (`indexing.workers`) while this thread stores them (50 files inserted at a time, into a
                    transaction committed about once a second or when no parsed file is waiting); plain notes are
                    parsed in this process until a worker is up (`cheap_to_parse`)
  index_directory, default (N)  the same with `indexing.workers` 0: for text alone, one worker fewer than cores
With --pdfs FOLDER (e.g. ../shared/docs), the PDFs of FOLDER are copied --copies times (10) into a temporary folder
and index_directory is timed on them with each pool size, interleaved, beside 1 worker: PDF parsing costs far more
than storing, so this shows how the pool scales with the cores.
All databases use WAL and synchronous=NORMAL, as the store does. Figures are the best of the repeats, by wall-clock time
and by this process's CPU time (which other work on a shared machine disturbs less, but which leaves out waiting for
the disk).
"""
import argparse, json, os, resource, shutil, sqlite3, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, synthetic_chunks
from multis.retrieval.store import Store, FTS_TOKENIZE

try:
    from multis.documents.indexer import index_directory, file_sha256, prepare_chunks, parse_with_timeout, IndexLimits, pool_size, JOB_BYTES
    from multis.documents.worker import parse_worker
    import multis.documents.indexer as ix
except ImportError: index_directory = None

def children_cpu()->float:
    "CPU seconds of the child processes that ended (the parsing workers, once stopped)"
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

def write_markdown(folder:Path, n:int, per_file:int=20)->list:
    "Markdown files holding n synthetic sections, 20 a file; returns their paths"
    files = {}
    for c in synthetic_chunks(n, per_file=per_file): files.setdefault(c.file_path, []).append(c)
    paths = []
    for fp, cs in files.items():
        p = folder/Path(fp).name
        p.write_text(f"# {cs[0].section_path[0]}\n\n" + ''.join(f"## {c.name}\n\n{c.content}\n\n" for c in cs))
        paths.append(p)
    return paths

def parsed(paths:list, scope:str='kb')->dict:
    "path -> chunks, as the indexer makes them"
    return {str(p): prepare_chunks(parse_with_timeout(p, IndexLimits()), scope) for p in paths}

def state(p:str)->dict:
    s = os.stat(p)
    return dict(size=s.st_size, mtime=s.st_mtime, sha256=file_sha256(Path(p)), scope='kb', document_type='md')

def bare(db:Path, files:dict, states:dict):
    con = sqlite3.connect(db, isolation_level=None)
    con.execute('PRAGMA journal_mode=WAL'); con.execute('PRAGMA synchronous=NORMAL')
    con.execute(f"CREATE VIRTUAL TABLE fts USING fts5(name, content, section_path, tokenize='{FTS_TOKENIZE}')")
    rows = [(c.name, c.content, json.dumps(c.section_path, ensure_ascii=False)) for cs in files.values() for c in cs]
    con.execute('BEGIN'); con.executemany('INSERT INTO fts VALUES (?, ?, ?)', rows); con.execute('COMMIT')
    con.close()

def save(db:Path, files:dict, states:dict):
    with Store(db) as st: st.save([c for cs in files.values() for c in cs])

def save_small_cache(db:Path, files:dict, states:dict):
    "`Store.save` with SQLite's default page cache (2 MB) instead of the store's `CACHE_MB`"
    with Store(db) as st:
        st.conn.execute('PRAGMA cache_size = -2000'); st.save([c for cs in files.values() for c in cs])

def replace_each(db:Path, files:dict, states:dict):
    with Store(db) as st:
        for p, cs in files.items(): st.replace_file(p, cs, states[p])

def replace_batched(db:Path, files:dict, states:dict, per:int=50):
    with Store(db) as st:
        items = [(p, cs, states[p]) for p, cs in files.items()]
        for i in range(0, len(items), per): st.replace_files(items[i:i+per])

def replace_in_one(db:Path, files:dict, states:dict, per:int=50):
    "replace_files per 50 files inside one transaction, as index_directory's writer stores a run that takes under a second"
    with Store(db) as st, st.transaction():
        items = [(p, cs, states[p]) for p, cs in files.items()]
        for i in range(0, len(items), per): st.replace_files(items[i:i+per])

def batched_pipeline(folder:Path, per:int=50):
    "What index_directory would do storing 50 files a transaction: hash, parse and chunk each, replace_files"
    def run(db:Path, files:dict, states:dict):
        paths = sorted(folder.glob('*.md'))
        with Store(db) as st:
            for i in range(0, len(paths), per):
                st.replace_files([(str(p), parsed([p])[str(p)], state(str(p))) for p in paths[i:i+per]])
    return run

HERE = {}   # variant -> files parsed in this process, one count per run

def pipeline(folder:Path, workers:int, name:str):
    def run(db:Path, files:dict, states:dict):
        n, parse_here = [0], ix.parse_here
        ix.parse_here = lambda *a: n.__setitem__(0, n[0] + 1) or parse_here(*a)   # counted: files parsed in this process
        try:
            with Store(db) as st: s = index_directory(st, folder, progress=False, limits=IndexLimits(workers=workers))
        finally: ix.parse_here = parse_here
        assert not s.failed, s
        HERE.setdefault(name, []).append(n[0])
    return run

def pdf_folder(src:Path, dest:Path, copies:int)->int:
    "The PDFs of `src` copied `copies` times into `dest`; how many pages they hold"
    import pymupdf
    pages = 0
    for p in sorted(src.glob('*.pdf')):
        with pymupdf.open(p) as doc: pages += copies * doc.page_count
        for i in range(copies): shutil.copy(p, dest/f"{p.stem}-{i:02d}.pdf")
    return pages

def pdf_bench(args):
    "index_directory on a folder of PDFs with each pool size, interleaved; wall seconds, pages/s, speed-up over 1 worker"
    sizes = [int(w) for w in args.workers.split(',')]
    with tempfile.TemporaryDirectory() as d:
        docs = Path(d)/'pdfs'; docs.mkdir()
        pages = pdf_folder(Path(args.pdfs), docs, args.copies)
        times = {w: [] for w in sizes}
        for r in range(args.repeats):
            for w in sizes[r % len(sizes):] + sizes[:r % len(sizes)]:
                db = Path(d)/f'{r}-{w}.db'
                with Store(db) as st:
                    t = time.perf_counter()
                    s = index_directory(st, docs, progress=False, limits=IndexLimits(workers=w))
                    times[w].append(time.perf_counter() - t)
                parse_worker().stop()                     # each run starts its parsing processes
                assert not s.failed, s
                for f in Path(d).glob(db.name + '*'): f.unlink()
        n = len(list(docs.glob('*.pdf')))
    print(f"\n{n} PDFs ({pages:,} pages, {s.chunks:,} chunks) from {args.pdfs}, copied {args.copies} times; "
          f"best of {args.repeats} interleaved repeats")
    one = min(times[sizes[0]])
    print(f"{'workers':<8} {'best s':>7} {'pages/s':>8} {f'vs {sizes[0]} worker':>12}   all runs (s)")
    for w, v in times.items():
        print(f"{w:<8} {min(v):>7.2f} {pages/min(v):>8,.0f} {one/min(v):>11.2f}x   {' '.join(f'{x:.2f}' for x in v)}")

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--n', type=int, default=10_000, help='sections to generate (chunks: a few more, long ones split)')
    ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--workers', default='0,1,2,4', help='pool sizes (indexing.workers, 0: the default) to time index_directory with')
    ap.add_argument('--pdfs', help='time index_directory on the PDFs of this folder instead (e.g. ../shared/docs)')
    ap.add_argument('--copies', type=int, default=10, help='copies of each PDF (with --pdfs)')
    args = ap.parse_args(argv)
    print(machine())
    if index_directory is None: sys.exit('multis.documents.indexer (and multis.documents.parsers) are needed')
    if args.pdfs: return pdf_bench(args)
    with tempfile.TemporaryDirectory() as d:
        docs = Path(d)/'docs'; docs.mkdir()
        files = parsed(write_markdown(docs, args.n)); parse_worker().stop()
        states, n = {p: state(p) for p in files}, sum(len(cs) for cs in files.values())
        variants = {'bare FTS5': bare, 'Store.save': save, 'Store.save, 2 MB cache': save_small_cache, 'replace_file': replace_each, 'replace_files x50': replace_batched,
                    'replace_files x50, 1 txn': replace_in_one,
                    'serial, x50': batched_pipeline(docs)}
        for w in map(int, args.workers.split(',')):
            name = f'index_directory, {w} workers' if w else f'index_directory, default ({pool_size(0, [JOB_BYTES] * 100, True)})'
            variants[name] = pipeline(docs, w, name)
        times = {k: [] for k in variants}
        for r in range(args.repeats):
            names = list(variants)[r % len(variants):] + list(variants)[:r % len(variants)]
            for k in names:
                db = Path(d)/f'{r}-{len(times[k])}-{k.replace(" ", "_")}.db'
                t, c, ch = time.perf_counter(), time.process_time(), children_cpu()
                variants[k](db, files, states)
                w, c = time.perf_counter() - t, time.process_time() - c
                parse_worker().stop()             # each run starts its parsing process, and its CPU is counted
                times[k].append((w, c, c + children_cpu() - ch))
                for f in Path(d).glob(db.name + '*'): f.unlink()
    print(f"\n{n:,} chunks from {len(files):,} Markdown files ({sum(len(c.content) for cs in files.values() for c in cs)/n:,.0f} "
          f"characters a chunk), best of {args.repeats} interleaved repeats")
    best = {k: tuple(min(x[i] for x in v) for i in range(3)) for k, v in times.items()}
    bw, bc, _ = best['bare FTS5']
    print(f"{'variant':<28} {'chunks/s':>9} {'vs bare':>8} {'CPU chunks/s':>13} {'vs bare':>8} {'all CPU s':>9} {'2-core bound':>12}"
          f"   all runs: wall s (CPU s, all processes' CPU s)")
    for k, v in times.items():
        w, c, a = best[k]
        runs = ' '.join(f'{x:.2f} ({y:.2f}, {z:.2f})' for x, y, z in v)
        print(f"{k:<28} {n/w:>9,.0f} {bw/w:>7.2f}x {n/c:>13,.0f} {bc/c:>7.2f}x {a:>9.2f} {bw/max(c, a/2):>11.2f}x   {runs}")
    for k, v in HERE.items(): print(f"{k}: files parsed in this process while no worker was up, by run: {v} of {len(files)}")
    print("all CPU s: this process's CPU and that of the parsing processes; 2-core bound: the bare insert's best wall time over "
          "max(this process's CPU, all CPU / 2), the ratio a quiet 2-core machine would allow at best")

if __name__ == '__main__': main()
