"The indexer end to end: parse -> chunk -> store -> search over data/ and real files, on real SQLite files"
import os, tempfile
from pathlib import Path
import pytest
from conftest import REPO
from multis.core import ParseError, MultisError
from multis.store import Store
from multis.indexer import index_file, index_directory, index_upload, IndexLimits

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

def test_parse_timeout(store, tmp_path, monkeypatch):
    import multis.indexer as ix, time
    monkeypatch.setattr(ix, 'parse_file', lambda *a, **k: time.sleep(2))
    p = tmp_path/'slow.md'; p.write_text('# Slow\ntext')
    with pytest.raises(ParseError, match='slow.md: parsing took longer than 0.2 s'):
        index_file(store, p, limits=IndexLimits(timeout=0.2))
    assert store.stats()['chunks'] == 0

def test_shared_docs_index(store, shared_docs):
    s = index_directory(store, shared_docs, 'kb', progress=False)
    assert len(s.failed) == 1 and s.failed[0].error == 'empty.txt: empty file'   # small/empty.txt
    assert len(s.indexed) == len(list(shared_docs.rglob('*.pdf'))) + len(list(shared_docs.rglob('*.docx'))) + \
        len([p for p in shared_docs.rglob('*') if p.suffix in ('.md', '.txt')]) - 1
    ru = store.search('Установка', limit=3)
    assert ru and ru[0].file_path.endswith('docx4j-russian.docx')
    nist = store.search('parallel file system', limit=5)
    assert any('nist' in h.file_path for h in nist)
