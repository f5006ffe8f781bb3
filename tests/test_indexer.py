"The indexer end to end: parse -> chunk -> store -> search over data/ and real files, on real SQLite files"
import os, tempfile, time, zipfile
from pathlib import Path
import pytest
from conftest import REPO
from multis.core import ParseError, MultisError
from multis.retrieval.store import Store
from multis.documents.indexer import index_file, index_directory, index_upload, IndexLimits, ScopeRefused
from multis.documents.worker import parse_worker

W = 'http://schemas.openxmlformats.org/wordprocessingml/2006/main'
CT = ('<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
      '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
      '<Override PartName="/word/document.xml" '
      'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
RELS = ('<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" '
        'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
        'Target="word/document.xml"/></Relationships>')

@pytest.fixture
def store(tmp_path):
    with Store(tmp_path/'multis.db') as st: yield st

def test_data_folder_end_to_end(store):
    s = index_directory(store, REPO/'data', 'kb', progress=False)
    assert (len(s.indexed), len(s.failed)) == (4, 0)
    stats = store.stats()
    assert stats['files'] == 4 and set(stats['by_type']) == {'pdf', 'docx', 'md', 'txt'}
    hit = store.search('how do I pair my phone', limit=1)[0]
    assert hit.section_path[0] == 'Pairing your phone' and hit.page_start == 4
    hit = store.search('Sintra train', limit=1)[0]
    assert hit.file_path.endswith('travel-notes.docx')

def test_reindex_replaces_and_drops_vanished_chunks(store, tmp_path):
    p = tmp_path/'notes.md'
    p.write_text('# One\nalpha text\n\n# Two\nbeta text\n\n# Three\ngamma text\n')
    assert index_file(store, p).chunks == 3
    p.write_text('# One\nalpha text\n')
    assert index_file(store, p).chunks == 1
    assert [c.name for c in store.file_chunks(str(p))] == ['One']
    assert store.search('gamma') == []

def test_failed_reindex_keeps_old_chunks(store, tmp_path):
    p = tmp_path/'report.pdf'
    import pymupdf
    doc = pymupdf.open(); doc.new_page().insert_text((72, 72), 'quarterly revenue grew'); doc.save(p); doc.close()
    index_file(store, p)
    p.write_bytes(b'%PDF-1.7 truncated garbage')
    with pytest.raises(ParseError, match='report.pdf'): index_file(store, p)
    assert [h.name for h in store.search('quarterly revenue')] == ['report.pdf']

def test_uploads_are_private_and_cleaned(store, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path/'tmp'))
    (tmp_path/'tmp').mkdir()
    a = index_upload(store, b'# Plan\nLisbon on Friday', 'plan.md', 'user:1')
    b = index_upload(store, b'# Plan\nPorto on Monday', 'plan.md', 'user:2')
    assert a.path != b.path
    assert [h.content for h in store.search('plan', scopes=['user:1'])] == ['Lisbon on Friday']
    assert [h.content for h in store.search('plan', scopes=['user:2'])] == ['Porto on Monday']
    assert list((tmp_path/'tmp').iterdir()) == []           # every private upload folder was removed
    with pytest.raises(ParseError): index_upload(store, b'', 'empty.txt', 'user:1')
    assert list((tmp_path/'tmp').iterdir()) == []
    assert store.stats()['files'] == 2

def test_upload_names_cannot_escape(store, tmp_path):
    r = index_upload(store, b'hello there', '../../../etc/passwd.txt', 'kb')
    assert r.path == 'upload:kb/passwd.txt'

def test_size_cap_from_limits(store, tmp_path):
    p = tmp_path/'big.txt'; p.write_text('word ' * 5000)
    with pytest.raises(ParseError, match='big.txt: .* over the .* size cap'): index_file(store, p, limits=IndexLimits(max_mb=0.01))

def long_docx(path:Path, n:int)->Path:
    "A Word file of `n` paragraphs (python-docx takes seconds to read 40,000), its XML written directly"
    body = ''.join(f'<w:p><w:r><w:t>paragraph {i} about bees</w:t></w:r></w:p>' for i in range(n))
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr('[Content_Types].xml', CT); z.writestr('_rels/.rels', RELS)
        z.writestr('word/document.xml', f'<w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>')
    return path

def test_parse_timeout_kills_the_parsing_process(store, tmp_path):
    good = tmp_path/'good.md'; good.write_text('# Good\nfine text')
    index_file(store, good)
    pid = parse_worker().pid
    assert pid and Path(f'/proc/{pid}').exists()
    slow = long_docx(tmp_path/'slow.docx', 40_000)
    t = time.monotonic()
    with pytest.raises(ParseError, match=r'^slow.docx: parsing took longer than 0.2 s; skipped \(indexing.parse_timeout\)$'):
        index_file(store, slow, limits=IndexLimits(timeout=0.2))
    assert time.monotonic() - t < 3
    assert not Path(f'/proc/{pid}').exists()              # killed and reaped: no core kept busy
    assert [f['file_path'] for f in store.files()] == [str(good)]
    good.write_text('# Good\nbetter text')
    assert index_file(store, good).status == 'indexed' and parse_worker().pid != pid   # a fresh worker

# --- who may index what: writable scopes (issue 14 item 1) and path checks (item 5)

def test_scope_limited_caller_cannot_move_admin_files(store, tmp_path):
    d = tmp_path/'docs'; d.mkdir()
    (d/'plan.md').write_text('# Plan\nthe merger closes in May'); (d/'pay.md').write_text('# Pay\npayroll figures')
    s = index_directory(store, d, 'admin', progress=False)
    before = {f['file_path']: (f['scope'], f['chunks']) for f in store.files()}
    ids = sorted(c.chunk_id for f in before for c in store.file_chunks(f))
    s = index_directory(store, d, 'user:7', progress=False, writable={'user:7'})
    assert (len(s.indexed), len(s.failed)) == (0, 2)
    assert all("already indexed in scope 'admin', which you may not change" in r.error for r in s.failed)
    assert {f['file_path']: (f['scope'], f['chunks']) for f in store.files()} == before
    assert sorted(c.chunk_id for f in before for c in store.file_chunks(f)) == ids
    assert store.search('payroll', scopes=['user:7']) == [] and store.stats()['by_scope'] == {'admin': 2}
    with pytest.raises(ScopeRefused, match="plan.md: already indexed in scope 'admin'"):
        index_file(store, d/'plan.md', 'user:7', writable={'user:7'})
    with pytest.raises(ScopeRefused): index_directory(store, d, 'admin', progress=False, writable={'user:7'})
    assert index_file(store, d/'plan.md', 'user:7').status == 'indexed'   # the owner (writable=None) may move it

def test_removal_of_vanished_files_only_in_writable_scopes(store, tmp_path):
    d = tmp_path/'docs'; d.mkdir()
    (d/'a.md').write_text('# A\nalpha'); (d/'b.md').write_text('# B\nbeta')
    index_directory(store, d, 'admin', progress=False)
    (d/'a.md').unlink(); (d/'c.md').write_text('# C\ngamma')
    s = index_directory(store, d, 'user:7', progress=False, writable={'user:7'})
    assert s.removed == [] and [Path(r.path).name for r in s.indexed] == ['c.md']
    assert {Path(f['file_path']).name: f['scope'] for f in store.files()} == {'a.md': 'admin', 'b.md': 'admin', 'c.md': 'user:7'}
    (d/'c.md').unlink()
    s = index_directory(store, d, 'user:7', progress=False, writable={'user:7'})
    assert [Path(p).name for p in s.removed] == ['c.md']
    assert index_directory(store, d, 'admin', progress=False).removed == [str(d/'a.md')]   # the owner's run

def deny(folder:Path):
    "A path check that refuses every file under `folder`, as governance does for denied roots"
    def check(p:Path):
        assert p == p.resolve()                           # always given the resolved path
        if p.is_relative_to(folder): raise MultisError(f"{p}: denied")
    return check

def test_symlink_into_a_denied_folder_is_refused(store, tmp_path):
    secret, d = tmp_path/'memory', tmp_path/'inbox'; secret.mkdir(); d.mkdir()
    (secret/'memory.md').write_text('# Memory\nanother chat said the safe code is 4711')
    (d/'note.md').write_text('# Note\nbuy milk'); (d/'link.md').symlink_to(secret/'memory.md')
    (d/'sub').symlink_to(secret, target_is_directory=True)
    s = index_directory(store, d, 'kb', progress=False, path_check=deny(secret))
    assert [Path(r.path).name for r in s.indexed] == ['note.md']
    assert s.failed and all(r.error.endswith('memory.md: denied') for r in s.failed)
    assert store.search('safe code') == []
    with pytest.raises(MultisError, match='memory.md: denied'): index_file(store, d/'link.md', path_check=deny(secret))
    assert store.search('safe code') == []
    assert index_file(store, d/'note.md', force=True, path_check=deny(secret)).status == 'indexed'

def test_shared_docs_index(store, shared_docs):
    s = index_directory(store, shared_docs, 'kb', progress=False)
    assert len(s.failed) == 1 and s.failed[0].error == 'empty.txt: empty file'   # small/empty.txt
    assert len(s.indexed) == len(list(shared_docs.rglob('*.pdf'))) + len(list(shared_docs.rglob('*.docx'))) + \
        len([p for p in shared_docs.rglob('*') if p.suffix in ('.md', '.txt')]) - 1
    ru = store.search('Установка', limit=3)
    assert ru and ru[0].file_path.endswith('docx4j-russian.docx')
    nist = store.search('parallel file system', limit=5)
    assert any('nist' in h.file_path for h in nist)
