"""PDF parsing speed: multis.documents.parsers.parse_pdf next to a bare PyMuPDF text loop over the same files.

    python bench/parse.py [--docs PATH] [--repeat N]

For every PDF under the docs folder (default: the `shared/docs` folder beside the repository), both are timed in the
same run, interleaved, N times; the best time of each counts. Times are the CPU time of this process
(`time.process_time`), so other work on a shared machine disturbs them less than wall-clock time would. It prints
pages per second for each file and the overall ratio (multis pages/s divided by bare pages/s; the aim is 0.8 or
better), with the machine it ran on.
"""
import argparse, os, platform, sys, time
from pathlib import Path
import pymupdf
import multis
from multis.documents.parsers import parse_pdf

DEFAULT_DOCS = Path(__file__).resolve().parents[1].parent/'shared'/'docs'

def bare(path:Path):
    "Extract every page's text with PyMuPDF and nothing else"
    with pymupdf.open(path) as doc:
        for page in doc: page.get_text()

def best_times(path:Path, repeat:int)->tuple:
    "Best of `repeat` runs of the bare loop and of parse_pdf, alternating which goes first"
    bests = {bare: float('inf'), parse_pdf: float('inf')}
    for i in range(repeat):
        for fn in ((bare, parse_pdf) if i % 2 == 0 else (parse_pdf, bare)):
            t = time.process_time(); fn(path)
            bests[fn] = min(bests[fn], time.process_time() - t)
    return bests[bare], bests[parse_pdf]

def machine()->str:
    "Where the figures come from"
    return (f"{platform.platform()}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
            f"Python {platform.python_version()}, PyMuPDF {pymupdf.__version__} (MuPDF {pymupdf.mupdf_version}), "
            f"multis {multis.__version__}")

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--docs', type=Path, default=DEFAULT_DOCS, help='folder holding the PDFs (searched recursively)')
    ap.add_argument('--repeat', type=int, default=5, help='runs per file and method; the best counts')
    args = ap.parse_args(argv)
    files = sorted(args.docs.rglob('*.pdf'))
    if not files: sys.exit(f"no PDFs under {args.docs}")
    parse_pdf(files[0]); bare(files[0])  # warm up imports and caches
    print(f"{'file':<36} {'pages':>5} {'bare p/s':>9} {'multis p/s':>10} {'ratio':>6}")
    tot_pages = tot_bare = tot_multis = 0
    for f in files:
        with pymupdf.open(f) as doc: n = doc.page_count
        tb, tm = best_times(f, args.repeat)
        print(f"{str(f.relative_to(args.docs)):<36} {n:>5} {n/tb:>9.0f} {n/tm:>10.0f} {tb/tm:>6.2f}")
        tot_pages, tot_bare, tot_multis = tot_pages + n, tot_bare + tb, tot_multis + tm
    ratio = tot_bare / tot_multis
    print(f"{'all':<36} {tot_pages:>5} {tot_pages/tot_bare:>9.0f} {tot_pages/tot_multis:>10.0f} {ratio:>6.2f}")
    print(f"overall ratio (multis pages/s / bare pages/s): {ratio:.2f} (aim: 0.8 or better), best of {args.repeat}")
    print(f"machine: {machine()}")

if __name__ == '__main__': main()
