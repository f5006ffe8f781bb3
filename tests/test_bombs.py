"Hostile uploads and folders (issue 14 items 2, 6, 18): bombs built here, small enough to be quick, big enough to bite"
import io, json, os, subprocess, sys, time, zipfile, zlib
from pathlib import Path
import docx, pytest
from conftest import REPO
from multis.core import ParseError
from multis.retrieval.store import Store
from multis.documents.indexer import IndexLimits, index_directory, index_file, index_upload
from multis.documents.worker import parse_worker

# --- the bombs (after /work/shared/attacks/make_bombs.py, at test sizes)

def write_pdf(path:Path, objs:list)->Path:
    "A PDF written object by object, with a correct cross-reference table"
    out, offs = bytearray(b'%PDF-1.7\n'), []
    for i, o in enumerate(objs, 1): offs.append(len(out)); out += b'%d 0 obj\n' % i + o + b'\nendobj\n'
    x = len(out)
    out += b'xref\n0 %d\n0000000000 65535 f \n' % (len(objs) + 1) + b''.join(b'%010d 00000 n \n' % o for o in offs)
    path.write_bytes(out + b'trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n' % (len(objs) + 1, x))
    return path

def pdf_stream_bomb(path:Path, mb:int)->Path:
    "One page whose content stream inflates to `mb` MB of text operators (20 MB: ~60 KB on disk, ~700 MB to parse)"
    comp = zlib.compress(b'BT /F1 1 Tf 1 1 Td (bomb bomb bomb bomb) Tj ET\n' * ((mb << 20) // 47), 9)
    return write_pdf(path, [b'<< /Type /Catalog /Pages 2 0 R >>', b'<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
        b'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 50 50] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
        b'<< /Length %d /Filter /FlateDecode >>\nstream\n' % len(comp) + comp + b'\nendstream',
        b'<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>'])

def pdf_ref_loop(path:Path)->Path:
    "A page tree whose Kids point back at the root"
    return write_pdf(path, [b'<< /Type /Catalog /Pages 2 0 R >>', b'<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 100000000 >>',
                            b'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 50 50] >>'])

def pdf_nested(path:Path, depth:int)->Path:
    "A page annotation array nested `depth` deep"
    return write_pdf(path, [b'<< /Type /Catalog /Pages 2 0 R >>', b'<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
        b'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 50 50] /Contents 4 0 R /Annots ' + b'[' * depth + b']' * depth + b' >>',
        b'<< /Length 0 >>\nstream\n\nendstream'])

def docx_bomb(path:Path, mb:int)->Path:
    "A real Word file whose document.xml is `mb` MB of one repeated paragraph"
    base = io.BytesIO(); d = docx.Document(); d.add_paragraph('seed'); d.save(base)
    zin = zipfile.ZipFile(io.BytesIO(base.getvalue()))
    xml = zin.read('word/document.xml').decode()
    head, tail = xml.split('<w:body>')[0] + '<w:body>', '</w:body></w:document>'
    para = '<w:p><w:r><w:t>' + 'bomb ' * 16 + '</w:t></w:r></w:p>'
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for item in zin.infolist():
            if item.filename != 'word/document.xml': z.writestr(item, zin.read(item.filename))
        z.writestr('word/document.xml', head + para * ((mb << 20) // len(para)) + tail)
    return path

@pytest.fixture
def store(tmp_path):
    with Store(tmp_path/'multis.db') as st: yield st

def good_note(folder:Path)->Path:
    p = folder/'good.md'; p.write_text('# Bees\nBees like lavender and thyme.\n')
    return p

# --- item 2: memory, time, zip, text and chunk caps

SCRIPT = '''
import json, resource, sys, time
from multis.retrieval.store import Store
from multis.documents.indexer import IndexLimits, index_directory
t = time.monotonic()
with Store(sys.argv[1]) as st:
    s = index_directory(st, sys.argv[2], 'kb', progress=False, limits=IndexLimits(max_memory_mb=int(sys.argv[3])))
    files = [f['file_path'] for f in st.files()]
res = dict(indexed=[r.path for r in s.indexed], failed=[r.error for r in s.failed], files=files, seconds=time.monotonic() - t,
           worker_mb=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
           # this process's own peak: VmHWM, not ru_maxrss, which keeps the forking pytest's size across exec
           parent_mb=int(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:'))) / 1024)
print(json.dumps(res))
'''

def test_pdf_stream_bomb_is_stopped_by_the_memory_cap(tmp_path):
    "Uncapped, this 60 KB page takes ~700 MB and 4 s to parse; capped at 100 MB it fails at once, the good file stays"
    d = tmp_path/'docs'; d.mkdir(); good = good_note(d)
    pdf_stream_bomb(d/'bomb.pdf', 20)
    assert (d/'bomb.pdf').stat().st_size < 200_000
    r = subprocess.run([sys.executable, '-c', SCRIPT, str(tmp_path/'m.db'), str(d), '100'], capture_output=True, text=True,
                       timeout=120)
    res = json.loads(r.stdout)
    assert res['failed'] == ['bomb.pdf: needs more than 100 MB to parse (indexing.max_parse_memory_mb)']
    assert res['indexed'] == res['files'] == [str(good)]
    assert res['worker_mb'] < 300 and res['parent_mb'] < 300          # the parsing process stayed near its cap
    assert res['seconds'] < 10

def test_upload_bombs_are_refused_and_the_next_upload_works(store):
    pdf = pdf_stream_bomb(Path(store.path).parent/'bomb.pdf', 20).read_bytes()
    with pytest.raises(ParseError, match=r'^invoice.pdf: needs more than 100 MB to parse \(indexing.max_parse_memory_mb\)$'):
        index_upload(store, pdf, 'invoice.pdf', 'user:5', IndexLimits(max_memory_mb=100))
    bomb = docx_bomb(Path(store.path).parent/'bomb.docx', 20).read_bytes()
    t = time.monotonic()
    with pytest.raises(ParseError, match=r'^report.docx: word/document.xml inflates .* \(indexing.max_zip_ratio; a zip bomb\?\)$'):
        index_upload(store, bomb, 'report.docx', 'user:5')
    assert time.monotonic() - t < 2
    assert store.stats()['files'] == 0
    assert index_upload(store, b'# Plan\nLisbon on Friday', 'plan.md', 'user:5').chunks == 1

def test_docx_zip_bomb_caps_apply_before_reading(store, tmp_path):
    bomb = docx_bomb(tmp_path/'bomb.docx', 20)
    assert bomb.stat().st_size < 200_000
    for lim, key in [(IndexLimits(), 'max_zip_ratio'), (IndexLimits(max_zip_ratio=10**6, max_unzipped_mb=10), 'max_unzipped_mb'),
                     (IndexLimits(max_zip_ratio=10**6, max_zip_entries=5), 'max_zip_entries')]:
        t = time.monotonic()
        with pytest.raises(ParseError, match=f'^bomb.docx: .*indexing.{key}'): index_file(store, bomb, limits=lim)
        assert time.monotonic() - t < 2
    # with the zip caps lifted, the memory cap still stops python-docx
    with pytest.raises(ParseError, match=r'bomb.docx: needs more than 60 MB to parse \(indexing.max_parse_memory_mb\)'):
        index_file(store, bomb, limits=IndexLimits(max_zip_ratio=10**6, max_memory_mb=60))
    assert store.stats()['files'] == 0

def test_a_timed_out_bomb_leaves_no_busy_process(store, tmp_path):
    d = tmp_path/'docs'; d.mkdir(); good = good_note(d)
    pdf_stream_bomb(d/'slow.pdf', 20)
    index_file(store, good); pid = parse_worker().pid
    t = time.monotonic()
    s = index_directory(store, d, progress=False, limits=IndexLimits(timeout=0.5, max_memory_mb=4096))
    assert time.monotonic() - t < 5
    assert [r.error for r in s.failed] == ['slow.pdf: parsing took longer than 0.5 s; skipped (indexing.parse_timeout)']
    assert not Path(f'/proc/{pid}').exists()
    assert [Path(f['file_path']).name for f in store.files()] == ['good.md']

def test_text_and_chunk_caps(store, tmp_path):
    d = tmp_path/'docs'; d.mkdir(); good = good_note(d)
    (d/'many.md').write_text(''.join(f'# Heading {i}\nline {i}\n' for i in range(3000)))
    (d/'long.txt').write_text('word ' * 300_000)
    s = index_directory(store, d, progress=False, limits=IndexLimits(max_chunks_per_file=1000, max_text_mb=1))
    assert sorted(r.error for r in s.failed) == [
        'long.txt: more than 1 MB of text (indexing.max_text_mb)',
        'many.md: 3,000 sections is over the 1,000-chunk cap (indexing.max_chunks_per_file)']
    assert [r.path for r in s.indexed] == [str(good)]
    # one long section the chunker splits into more chunks than allowed
    (d/'one.md').write_text('# One\n' + 'A sentence of some words here. ' * 20_000)
    with pytest.raises(ParseError, match=r'^one.md: [\d,]+ chunks is over the 50-chunk cap \(indexing.max_chunks_per_file\)$'):
        index_file(store, d/'one.md', limits=IndexLimits(max_chunks_per_file=50))

# --- item 6: a broken PDF is that file's error, the batch is stored

def test_broken_pdfs_fail_alone(store, tmp_path):
    d = tmp_path/'docs'; d.mkdir(); good = good_note(d)
    pdf_ref_loop(d/'loop.pdf'); pdf_nested(d/'nested.pdf', 100_000)
    s = index_directory(store, d, progress=False)
    assert [r.path for r in s.indexed] == [str(good)]
    assert sorted(r.error for r in s.failed) == ['loop.pdf: not a readable PDF (code=7: Invalid number of pages)',
                                                 'nested.pdf: no extractable text']
    assert store.search('lavender')[0].file_path == str(good)

def test_cli_index_of_a_folder_with_a_broken_pdf(tmp_path):
    d = tmp_path/'docs'; d.mkdir(); good_note(d); pdf_ref_loop(d/'loop.pdf')
    multis = Path(sys.executable).parent/'multis'
    r = subprocess.run([str(multis), 'index', str(d), '--scope', 'kb', '--quiet'], capture_output=True, text=True,
                       env={**os.environ, 'MULTIS_HOME': str(tmp_path/'home')}, timeout=120)
    assert 'Traceback' not in r.stdout + r.stderr
    assert '1 indexed' in r.stdout and 'loop.pdf: not a readable PDF' in r.stdout
    with Store(tmp_path/'home'/'multis.db') as st: assert [Path(f['file_path']).name for f in st.files()] == ['good.md']

# --- item 18: another format under a text name

def test_documents_under_text_names_are_refused(store, tmp_path):
    d = tmp_path/'docs'; d.mkdir(); good = good_note(d)
    pdf_ref_loop(d/'notes.md')                                        # PDF bytes (all ASCII) named .md
    docx_bomb(tmp_path/'x.docx', 1); (d/'report.txt').write_bytes((tmp_path/'x.docx').read_bytes())
    s = index_directory(store, d, progress=False)
    assert sorted(r.error for r in s.failed) == ['notes.md: looks like a PDF, not text; rename it .pdf',
                                                 'report.txt: looks like a Word document, not text; rename it .docx']
    assert [r.path for r in s.indexed] == [str(good)]
    with pytest.raises(ParseError, match=r'^scan.txt: looks like a PDF, not text; rename it .pdf$'):
        index_upload(store, (d/'notes.md').read_bytes(), 'scan.txt', 'user:1')
    assert store.search('Catalog') == [] and store.stats()['files'] == 1
