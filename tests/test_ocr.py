"""Scans, photos and their OCR: a scanned handbook found by the words on its pages, text layers never OCR'd, images
of every type, and one clear line when Tesseract or a language is missing or a page runs too long"""
import json, os, subprocess, sys
from pathlib import Path
import pymupdf, pytest
from PIL import Image
from multis.core import ParseError
from multis.documents import ocr
from multis.documents.ocr import OcrOptions, ocr_problem
from multis.documents.parsers import parse_file
from multis.documents.images import parse_image
from multis.documents.indexer import IndexLimits, index_file
from multis.documents.worker import ParseWorker
from multis.retrieval.store import Store

REPO = Path(__file__).resolve().parents[1]
MULTIS = str(Path(sys.executable).parent/'multis')
HANDBOOK = REPO/'data'/'multis-handbook.pdf'
needs_tesseract = pytest.mark.skipif(ocr_problem(OcrOptions()) is not None,
                                     reason=f"Tesseract with English data is not installed: {ocr_problem(OcrOptions())}")

def scan_pdf(src:Path, dst:Path, pages:set|None=None, dpi:int=200)->Path:
    "A copy of `src` whose pages (all, or those in `pages`, 1-based) are images with no text layer, and no outline"
    doc, out = pymupdf.open(src), pymupdf.open()
    for i, p in enumerate(doc, 1):
        if pages is None or i in pages:
            q = out.new_page(width=p.rect.width, height=p.rect.height)
            q.insert_image(q.rect, stream=p.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY).tobytes('jpg', jpg_quality=75))
        else: out.insert_pdf(doc, from_page=i-1, to_page=i-1)
    out.set_toc([]); out.save(dst)
    return dst

def photo(lines:list, path:Path, dpi:int=150)->Path:
    "An image file of `lines` of text, its type from its suffix"
    doc = pymupdf.open(); p = doc.new_page()
    for i, line in enumerate(lines): p.insert_text((72, 100 + 24*i), line, fontsize=16)
    pix = p.get_pixmap(dpi=dpi)
    Image.frombytes('RGB', (pix.width, pix.height), pix.samples).save(path)
    return path

def run(home:Path, *args:str, env:dict|None=None)->subprocess.CompletedProcess:
    return subprocess.run([MULTIS, *args], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                          env={**os.environ, 'MULTIS_HOME': str(home), **(env or {})})

@needs_tesseract
def test_scanned_handbook_is_found_by_the_words_on_its_pages(tmp_path):
    scan = scan_pdf(HANDBOOK, tmp_path/'handbook-scan.pdf')
    assert all(not p.get_text().strip() for p in pymupdf.open(scan))             # truly no text layer
    home = tmp_path/'home'
    r = run(home, 'index', str(scan), '--scope', 'kb', '--quiet')
    assert r.returncode == 0 and r.stdout.startswith('indexed: handbook-scan.pdf ('), r.stdout + r.stderr
    for query, page in [('pairing stranger hint', 4), ('shared knowledge base searchable paired', 5),
                        ('virtual environment clash', 2), ('daemon status foreground', 6)]:
        r = run(home, 'search', query, '--json', '--limit', '1')
        hit = json.loads(r.stdout)[0]
        assert (Path(hit['file_path']).name, hit['page_start'], hit['page_end']) == ('handbook-scan.pdf', page, page), (query, hit)
    with Store(home/'multis.db') as st:
        cs = st.file_chunks(str(scan))
        assert {c.page_start for c in cs} == {1, 2, 3, 4, 5, 6}
        assert all(c.metadata.get('ocr') is True and c.document_type == 'pdf' for c in cs)

@needs_tesseract
def test_text_pages_are_never_ocred(tmp_path):
    mixed = scan_pdf(HANDBOOK, tmp_path/'mixed.pdf', pages={3})
    cs = parse_file(mixed)
    by_page = {c.page_start: c for c in cs}
    assert by_page[3].metadata.get('ocr') is True and 'sample documents' in by_page[3].content
    exact = pymupdf.open(HANDBOOK)[1].get_text()
    for p in (1, 2, 4, 5, 6): assert 'ocr' not in by_page[p].metadata
    assert by_page[2].content.split() == exact.split()                          # the text layer, word for word

@needs_tesseract
@pytest.mark.parametrize('suffix', ['.png', '.jpg', '.tiff', '.webp'])
def test_photos_of_every_type_are_indexed(tmp_path, suffix):
    img = photo(['Roast tomato soup', 'Six ripe tomatoes, two onions and a clove of garlic.'], tmp_path/f'recipe{suffix}')
    with Store(tmp_path/'m.db') as st:
        res = index_file(st, img, 'kb')
        assert res.status == 'indexed' and res.chunks == 1
        hits = st.search('tomatoes garlic onions')
        assert hits and hits[0].chunk.document_type == 'image' and hits[0].chunk.metadata.get('ocr') is True
        assert hits[0].chunk.page_start == 1

@needs_tesseract
def test_multipage_tiff_keeps_its_pages(tmp_path):
    pages = [photo([f'Page {w} of the ledger', f'The {w} account is settled.'], tmp_path/f'{w}.png') for w in ('alpha', 'omega')]
    ims = [Image.open(p) for p in pages]
    ims[0].save(tmp_path/'ledger.tiff', save_all=True, append_images=ims[1:])
    cs = parse_image(tmp_path/'ledger.tiff')
    assert [(c.page_start, 'omega' in c.content.lower()) for c in cs] == [(1, False), (2, True)] or \
           (len(cs) == 1 and cs[0].page_start == 1 and cs[0].page_end == 2)

def test_without_tesseract_one_line_and_text_pages_still_indexed(tmp_path, monkeypatch):
    monkeypatch.setattr(ocr, 'tessdata', lambda: None)
    mixed = scan_pdf(HANDBOOK, tmp_path/'mixed.pdf', pages={3})
    cs = parse_file(mixed)
    assert sorted(c.page_start for c in cs) == [1, 2, 4, 5, 6]
    assert cs[0].metadata['skipped'] == f"1 scanned page not read: scanned pages need OCR: {ocr.OCR_INSTALL}"
    scan = scan_pdf(HANDBOOK, tmp_path/'scan.pdf')
    with pytest.raises(ParseError) as e: parse_file(scan)
    assert str(e.value) == f"scan.pdf: 6 scanned pages not read: scanned pages need OCR: {ocr.OCR_INSTALL}"
    img = photo(['hello'], tmp_path/'a.png')
    with pytest.raises(ParseError) as e: parse_file(img)
    assert str(e.value) == f"a.png: an image needs OCR: scanned pages need OCR: {ocr.OCR_INSTALL}"

def test_missing_language_through_the_cli_is_one_line_and_nothing_is_lost(tmp_path):
    home, docs = tmp_path/'home', tmp_path/'docs'; docs.mkdir()
    (docs/'notes.md').write_text('# Notes\nThe kettle is in the left cupboard.\n')
    scan_pdf(HANDBOOK, docs/'mixed.pdf', pages={3})
    photo(['hello there'], docs/'card.png')
    home.mkdir(); (home/'config.json').write_text(json.dumps({'indexing': {'ocr_languages': 'eng+xyz'}}))
    r = run(home, 'index', str(docs), '--scope', 'kb', '--quiet')
    out = r.stdout
    assert r.returncode == 1 and '2 indexed' in out and '1 failed' in out, out + r.stderr
    assert "note: mixed.pdf: 1 scanned page not read: OCR language 'xyz' is not installed (Debian/Ubuntu: apt install tesseract-ocr-xyz)" in out
    assert "failed: card.png: an image needs OCR: OCR language 'xyz' is not installed" in out
    assert json.loads(run(home, 'search', 'kettle cupboard', '--json').stdout)[0]['name'] == 'Notes'

def test_bad_language_setting_is_named(tmp_path):
    img = photo(['hello'], tmp_path/'a.png')
    with pytest.raises(ParseError, match=r"indexing.ocr_languages must be Tesseract language codes"):
        parse_file(img, ocr=OcrOptions('eng;rm -rf /'))

def test_broken_and_fake_images_are_one_line(tmp_path):
    (tmp_path/'broken.png').write_bytes(b'\x89PNG\r\n\x1a\n' + os.urandom(200))
    (tmp_path/'text.jpg').write_text('not a picture at all, just words in a file named like one')
    for f in ('broken.png', 'text.jpg'):
        with Store(tmp_path/'m.db') as st:
            with pytest.raises(ParseError) as e: index_file(st, tmp_path/f, 'kb')
        assert str(e.value).startswith(f'{f}: ') and '\n' not in str(e.value)

@needs_tesseract
def test_huge_image_is_bounded(tmp_path):
    "A 20000 x 20000 picture (a few KB as PNG): rendered under the pixel cap, or refused at the memory cap; never more"
    big = tmp_path/'huge.png'
    Image.new('1', (20000, 20000), 1).save(big)
    assert big.stat().st_size < 200_000
    w = ParseWorker()
    try:
        try: res = w.parse(big, IndexLimits(max_memory_mb=700))
        except ParseError as e: res = str(e)
        assert res == 'huge.png: no text found in the image' or 'needs more than 700 MB' in res, res
        (tmp_path/'after.md').write_text('# After\nStill working.\n')
        assert w.parse(tmp_path/'after.md', IndexLimits())[0].content == 'Still working.'   # the next file is parsed
    finally: w.stop()

@needs_tesseract
def test_ocr_time_is_per_page(tmp_path):
    "A 3-page scan takes longer than `parse_timeout` but each page less than `ocr_page_timeout`: read; a tiny page limit: refused"
    scan = scan_pdf(HANDBOOK, tmp_path/'scan3.pdf', pages={1, 2, 3})
    d = pymupdf.open(scan); d.select([0, 1, 2]); d.save(tmp_path/'three.pdf')
    w = ParseWorker()
    try:
        cs = w.parse(tmp_path/'three.pdf', IndexLimits(timeout=0.5, ocr_page_timeout=120))
        assert {c.page_start for c in cs} == {1, 2, 3}
        group = w.pid
        with pytest.raises(ParseError, match=r"three.pdf: OCR of page 1 took longer than 0.05 s; skipped \(indexing.ocr_page_timeout\)"):
            w.parse(tmp_path/'three.pdf', IndexLimits(timeout=0.05, ocr_page_timeout=0.05))
        assert w.pid is None                                                     # the busy worker was killed
        with pytest.raises(ProcessLookupError): os.killpg(group, 0)              # and the tesseract it ran
    finally: w.stop()

@needs_tesseract
def test_ocr_page_cap(tmp_path):
    scan = scan_pdf(HANDBOOK, tmp_path/'scan.pdf')
    cs = parse_file(scan, ocr=OcrOptions(max_pages=2))
    assert sorted(c.page_start for c in cs) == [1, 2]
    assert cs[0].metadata['skipped'] == '4 scanned pages not read: over the 2-page OCR cap (indexing.max_ocr_pages)'
