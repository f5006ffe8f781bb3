"""OCR pages/s through multis (a one-page scanned PDF parsed by the parsing worker: render, Tesseract through PyMuPDF,
chunks) beside a bare `tesseract` command on the same page rendered at the same resolution, in the same run.

    .venv/bin/python bench/ocr.py                 # the 6 pages of data/multis-handbook.pdf, 3 rounds: ~2 min
    .venv/bin/python bench/ocr.py --rounds 1

Each page of the handbook is scanned (rendered at 200 dpi, grey, JPEG, no text layer) into a PDF of its own; the bare
call gets that page rendered at multis' OCR resolution (300 dpi) as a PNG made beforehand, so it pays for Tesseract
only. Pages alternate between the two, and which goes first alternates too. The bare call runs twice: as Tesseract
starts by default, and with OMP_THREAD_LIMIT=1 (its OpenMP threads fight over two cores on small machines).
"""
import argparse, os, shutil, subprocess, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine
import pymupdf
from multis.documents.ocr import OcrOptions, ocr_problem
from multis.documents.indexer import IndexLimits
from multis.documents.worker import ParseWorker

REPO = Path(__file__).resolve().parents[1]

def pages(tmp:Path, dpi:int=300)->list:
    "(scanned one-page PDF, PNG of it at `dpi`) for each page of the handbook"
    out, src = [], pymupdf.open(REPO/'data'/'multis-handbook.pdf')
    for i, p in enumerate(src, 1):
        doc = pymupdf.open(); q = doc.new_page(width=p.rect.width, height=p.rect.height)
        q.insert_image(q.rect, stream=p.get_pixmap(dpi=200, colorspace=pymupdf.csGRAY).tobytes('jpg', jpg_quality=75))
        doc.save(tmp/f'page{i}.pdf')
        doc[0].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY).save(tmp/f'page{i}.png')
        out.append((tmp/f'page{i}.pdf', tmp/f'page{i}.png'))
    return out

def bare(png:Path, env:dict)->float:
    t = time.perf_counter()
    r = subprocess.run(['tesseract', str(png), 'stdout', '-l', 'eng'], capture_output=True, env=env)
    if r.returncode: raise SystemExit(f"tesseract failed: {r.stderr.decode()[:200]}")
    return time.perf_counter() - t

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0]); ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    if (why := ocr_problem(OcrOptions())) or not shutil.which('tesseract'): raise SystemExit(why or 'no tesseract command')
    print(machine()); print(subprocess.run(['tesseract', '--version'], capture_output=True, text=True).stdout.splitlines()[0])
    tmp = Path(tempfile.mkdtemp(prefix='multis-bench-ocr-'))
    ps, w, lim = pages(tmp), ParseWorker(), IndexLimits()
    envs = {'bare': dict(os.environ), 'bare 1 thread': {**os.environ, 'OMP_THREAD_LIMIT': '1'}}
    times = {'multis': [], **{k: [] for k in envs}}
    try:
        w.parse(ps[0][0], lim)                                   # warm-up: the worker starts, Tesseract loads once
        for r in range(a.rounds):
            for i, (pdf, png) in enumerate(ps):
                order = ['multis', *envs] if (i + r) % 2 == 0 else [*envs, 'multis']
                for v in order:
                    if v == 'multis':
                        t = time.perf_counter(); cs = w.parse(pdf, lim); times[v].append(time.perf_counter() - t)
                        assert cs and cs[0].metadata.get('ocr'), pdf
                    else: times[v].append(bare(png, envs[v]))
    finally: w.stop(); shutil.rmtree(tmp, ignore_errors=True)
    n = len(times['multis'])
    print(f"\n{n} pages ({len(ps)} pages x {a.rounds} rounds), 300 dpi, English\n")
    print(f"{'variant':>14} {'pages/s':>8} {'s/page':>7} {'multis / this':>14}")
    mp = n / sum(times['multis'])
    for v, ts in times.items():
        ps_ = len(ts) / sum(ts)
        print(f"{v:>14} {ps_:>8.2f} {1/ps_:>7.2f} {mp/ps_:>13.2f}x")

if __name__ == '__main__': main()
