"Parsers of the installed package: bad inputs give one ParseError naming the file; real documents keep their structure"
import json, re, zipfile
from pathlib import Path
import docx, pymupdf, pytest
from multis.core import ParseError
from multis.documents.parsers import SUPPORTED, check_file, parse_docx, parse_file, parse_markdown, parse_pdf, parse_text

SHARED = Path(__file__).resolve().parents[1].parent/'shared'/'docs'
needs_shared = pytest.mark.skipif(not SHARED.exists(), reason='shared/docs is not beside the repository')

def make_pdf(path:Path, pages:list, toc=None)->Path:
    "A PDF whose pages have `(y, text)` lines, with an optional outline"
    doc = pymupdf.open()
    for lines in pages:
        page = doc.new_page()
        for y,text in lines: page.insert_text((72, y), text)
    if toc: doc.set_toc(toc)
    doc.save(path)
    return path

W = 'http://schemas.openxmlformats.org/wordprocessingml/2006/main'
CT = ('<?xml version="1.0" encoding="UTF-8"?>'
      '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
      '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
      '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" '
      'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
RELS = ('<?xml version="1.0" encoding="UTF-8"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" '
        'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
        'Target="word/document.xml"/></Relationships>')

def minimal_docx(path:Path, paras:list)->Path:
    "A Word file of `(style id, text)` paragraphs and no styles part, written by hand"
    ps = ''.join(f'<w:p><w:pPr><w:pStyle w:val="{s}"/></w:pPr><w:r><w:t>{t}</w:t></w:r></w:p>' if s else
                 f'<w:p><w:r><w:t>{t}</w:t></w:r></w:p>' for s,t in paras)
    with zipfile.ZipFile(path, 'w') as z:
        z.writestr('[Content_Types].xml', CT); z.writestr('_rels/.rels', RELS)
        body = f'<w:document xmlns:w="{W}"><w:body>{ps}</w:body></w:document>'
        z.writestr('word/document.xml', '<?xml version="1.0" encoding="UTF-8"?>' + body)
    return path

def without_styles(src:Path, dst:Path)->Path:
    "Copy of a python-docx file with word/styles.xml and its relationship removed"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, 'w') as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == 'word/styles.xml': continue
            if item.filename == 'word/_rels/document.xml.rels':
                data = re.sub(rb'<Relationship [^>]*Target="styles.xml"[^>]*/>', b'', data)
            if item.filename == '[Content_Types].xml':
                data = re.sub(rb'<Override [^>]*PartName="/word/styles.xml"[^>]*/>', b'', data)
            zout.writestr(item, data)
    return dst

def outline_pdf(path:Path)->Path:
    page1 = [(60, 'Cover line'), (200, 'Alpha'), (220, 'Alpha text.'), (400, 'Beta'), (420, 'Beta text.')]
    return make_pdf(path, [page1, [(60, 'Gamma'), (80, 'Gamma text.')], [(60, 'More gamma.')]],
                    toc=[[1, 'Alpha', 1], [2, 'Beta', 1], [1, 'Gamma', 2]])

# --- bad inputs: one ParseError each, naming the file

def bad_inputs(d:Path)->dict:
    "name -> (path, kwargs for parse_file, expected reason)"
    (d/'zero.pdf').touch()
    (d/'random.pdf').write_bytes(bytes(range(256)) * 16)
    good = outline_pdf(d/'good.pdf')
    (d/'truncated.pdf').write_bytes(good.read_bytes()[:400])
    with pymupdf.open(good) as doc:
        doc.save(d/'encrypted.pdf', encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw='owner', user_pw='user')
    (d/'notzip.docx').write_text('this is not a zip archive')
    (d/'big.txt').write_text('words ' * 100)
    (d/'binary.txt').write_bytes(b'\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00')
    (d/'latin1.txt').write_bytes('Crème brûlée'.encode('latin-1'))
    (d/'folder.md').mkdir()
    (d/'sheet.xyz').write_text('a,b')
    return {'zero-byte': (d/'zero.pdf', {}, 'empty file'),
            'random bytes PDF': (d/'random.pdf', {}, 'not a readable PDF'),
            'truncated PDF': (d/'truncated.pdf', {}, 'not a readable PDF'),
            'encrypted PDF': (d/'encrypted.pdf', {}, 'encrypted PDF (a password is needed)'),
            'docx not a zip': (d/'notzip.docx', {}, 'not a valid DOCX file (not a zip archive)'),
            'over size cap': (d/'big.txt', {'max_bytes': 100}, '600 bytes is over the 100 bytes size cap'),
            'binary .txt': (d/'binary.txt', {}, 'binary file, not text'),
            'latin-1 text': (d/'latin1.txt', {}, 'not UTF-8 text (invalid byte 0xe8 at offset 2); save it as UTF-8'),
            'directory': (d/'folder.md', {}, 'is a directory'),
            'missing': (d/'missing.pdf', {}, 'file not found'),
            'unsupported': (d/'sheet.xyz', {}, "unsupported file type '.xyz'"),
            'page cap': (good, {'max_pages': 2}, '3 pages is over the 2-page cap')}

BAD = ['zero-byte', 'random bytes PDF', 'truncated PDF', 'encrypted PDF', 'docx not a zip', 'over size cap',
       'binary .txt', 'latin-1 text', 'directory', 'missing', 'unsupported', 'page cap']

@pytest.mark.parametrize('case', BAD)
def test_bad_input_gives_one_parse_error(tmp_path, case):
    path, kw, reason = bad_inputs(tmp_path)[case]
    before = sorted(tmp_path.rglob('*'))
    with pytest.raises(ParseError) as e: parse_file(path, **kw)
    assert str(e.value) == f"{path.name}: {e.value.reason}"
    assert reason in e.value.reason
    assert Path(e.value.path) == path.resolve()
    assert sorted(tmp_path.rglob('*')) == before  # nothing written

def test_format_parsers_wrap_library_errors(tmp_path):
    (tmp_path/'x.pdf').write_text('%PDF-1.7 nonsense')
    (tmp_path/'x.docx').write_text('nope')
    with zipfile.ZipFile(tmp_path/'zip.docx', 'w') as z: z.writestr('a.txt', 'hi')
    for fn, f in [(parse_pdf, 'x.pdf'), (parse_docx, 'x.docx'), (parse_docx, 'zip.docx')]:
        with pytest.raises(ParseError, match=f"^{f}: not a (readable PDF|valid DOCX file)"): fn(tmp_path/f)

def test_no_text(tmp_path):
    for name, make, reason in [('blank.pdf', lambda p: make_pdf(p, [[], []]), 'no extractable text'),
                               ('blank.md', lambda p: p.write_text('  \n\n'), 'no text found'),
                               ('blank.txt', lambda p: p.write_text('\t\n'), 'no text found'),
                               ('blank.docx', lambda p: minimal_docx(p, [(None, ' ')]), 'no text found')]:
        make(tmp_path/name)
        with pytest.raises(ParseError, match=re.escape(f"{name}: {reason}")):
            parse_file(tmp_path/name)

def test_check_file(tmp_path):
    (tmp_path/'A.MD').write_text('# x')
    assert check_file(tmp_path/'A.MD') == (tmp_path/'A.MD').resolve()
    assert SUPPORTED['.markdown'] == 'md'
    with open(tmp_path/'huge.pdf', 'wb') as f: f.truncate(int(12.3 * 1024 * 1024))
    with pytest.raises(ParseError, match=r'^huge.pdf: 12.3 MB is over the 10 MB size cap$'):
        check_file(tmp_path/'huge.pdf')

# --- small synthetic documents, every format

def test_pdf_outline_sections_cut_at_headings(tmp_path):
    cs = parse_file(outline_pdf(tmp_path/'o.pdf'))
    assert [(c.element_type, c.name, c.section_path, c.section_level) for c in cs] == [
        ('paragraph', 'o.pdf', [], 0), ('section', 'Alpha', ['Alpha'], 1), ('section', 'Beta', ['Alpha', 'Beta'], 2),
        ('section', 'Gamma', ['Gamma'], 1)]
    assert [c.content for c in cs] == ['Cover line', 'Alpha\nAlpha text.', 'Beta\nBeta text.',
                                       'Gamma\nGamma text.\nMore gamma.']
    assert [(c.page_start, c.page_end) for c in cs] == [(1, 1), (1, 1), (1, 1), (2, 3)]
    assert cs[3].metadata == {'page_starts': [[0, 2], [18, 3]]} and cs[3].content[18:] == 'More gamma.'
    assert {(c.file_path, c.document_type, c.scope) for c in cs} == {(str((tmp_path/'o.pdf').resolve()), 'pdf', 'kb')}
    assert [c.chunk_id for c in parse_file(tmp_path/'o.pdf')] == [c.chunk_id for c in cs]

def test_pdf_without_outline(tmp_path):
    lines = [[(72 + 14*i, f"Page {n} line {i} about widgets and gadgets.") for i in range(8)] for n in (1, 2)]
    cs = parse_pdf(make_pdf(tmp_path/'p.pdf', lines + [[], [(72, 'Last.')]]))
    assert [(c.name, c.element_type, c.page_start, c.page_end, c.section_path) for c in cs] == [
        ('p.pdf (page 1)', 'section', 1, 1, []), ('p.pdf (page 2)', 'section', 2, 2, []),
        ('p.pdf (page 4)', 'section', 4, 4, [])]
    c, = parse_pdf(make_pdf(tmp_path/'s.pdf', [[(72, 'One.')], [(72, 'Two.')]]))
    assert (c.name, c.content, c.page_start, c.page_end, c.metadata) == (
        's.pdf', 'One.\nTwo.', 1, 2, {'page_starts': [[0, 1], [5, 2]]})

def test_docx_headings_tables_and_unicode(tmp_path):
    d = docx.Document()
    d.add_paragraph('Preface.')
    d.add_heading('Глава', level=2)
    d.add_heading('Раздел', level=3)
    t = d.add_table(rows=2, cols=3)
    t.cell(0, 0).merge(t.cell(0, 1)).text = 'Wide'
    t.cell(0, 2).text = 'C'
    for j,s in enumerate('xyz'): t.cell(1, j).text = s
    d.add_heading('', level=1)
    d.add_paragraph('Tail.')
    d.save(tmp_path/'g.docx')
    cs = parse_docx(tmp_path/'g.docx')
    assert [(c.element_type, c.name, c.section_path, c.section_level) for c in cs] == [
        ('paragraph', 'g.docx', [], 0), ('section', 'Глава', ['Глава'], 2),
        ('section', 'Раздел', ['Глава', 'Раздел'], 3)]
    assert cs[2].content == 'Wide | C\nx | y | z\nTail.'
    assert cs[1].content == 'Глава'

def test_docx_heading_ids_without_styles_part(tmp_path):
    paras = [('Title', 'Doc'), ('heading2', 'Two'), (None, 'Body.'), ('Heading3', 'Three')]
    cs = parse_docx(minimal_docx(tmp_path/'m.docx', paras))
    assert [c.section_path for c in cs] == [['Doc'], ['Doc', 'Two'], ['Doc', 'Two', 'Three']]
    d = docx.Document()
    d.add_heading('Top', level=1); d.add_heading('Sub', level=3); d.add_paragraph('Text.')
    d.save(tmp_path/'styled.docx')
    cs = parse_docx(without_styles(tmp_path/'styled.docx', tmp_path/'bare.docx'))
    assert 'word/styles.xml' not in zipfile.ZipFile(tmp_path/'bare.docx').namelist()
    assert [(c.section_path, c.content) for c in cs] == [(['Top'], 'Top'), (['Top', 'Sub'], 'Text.')]

def test_markdown(tmp_path):
    (tmp_path/'a.md').write_text('---\ntitle: Notes\n---\nIntro.\n\n```\n# code\n```\n\n'
                                 'Setext\n======\nbody\n\n### Deep\nmore\n')
    cs = parse_markdown(tmp_path/'a.md')
    assert [(c.element_type, c.name, c.section_path, c.content) for c in cs] == [
        ('paragraph', 'Notes', [], 'Intro.\n\n```\n# code\n```'), ('section', 'Setext', ['Setext'], 'body'),
        ('section', 'Deep', ['Setext', 'Deep'], 'more')]
    (tmp_path/'b.markdown').write_bytes(b'\xef\xbb\xbfjust text\r\n')
    c, = parse_file(tmp_path/'b.markdown')
    assert (c.name, c.content, c.document_type) == ('b.markdown', 'just text', 'md')

def test_text(tmp_path):
    (tmp_path/'t.txt').write_text('Привет, мир.\n')
    c, = parse_file(tmp_path/'t.txt')
    assert parse_text(tmp_path/'t.txt') == [c]
    assert (c.name, c.content, c.element_type, c.section_level, c.section_path, c.document_type) == (
        't.txt', 'Привет, мир.', 'paragraph', 0, [], 'txt')

# --- the shared real documents

def manifest()->dict: return {m['file']: m for m in json.loads((SHARED/'manifest.json').read_text())}

def breadcrumbs(toc:list)->list:
    "Expected section paths of an outline, computed independently of the parser"
    out, stack = [], []
    for level,title,_ in toc:
        stack = [s for s in stack if s[0] < level] + [(level, title.strip())]
        out.append([t for _,t in stack])
    return out

@needs_shared
@pytest.mark.parametrize('name', ['pymupdf-docs-v1.8.pdf', 'nist-sp800-223-hpc-security.pdf',
                                  'qwen2-technical-report.pdf', 'french-dossier-outline.pdf'])
def test_outlined_pdfs_follow_their_outline(name):
    with pymupdf.open(SHARED/name) as doc:
        toc, n = doc.get_toc(), doc.page_count
        flags = pymupdf.TEXTFLAGS_TEXT & ~pymupdf.TEXT_PRESERVE_LIGATURES
        nonblank = sum(len(''.join(p.get_text(flags=flags).split())) for p in doc)
    cs = parse_file(SHARED/name)
    secs = [c for c in cs if c.element_type == 'section']
    assert len(secs) == len(toc) == manifest()[name]['outline_entries']
    assert [c.name for c in secs] == [t.strip() for _,t,_ in toc]
    assert [c.section_level for c in secs] == [lvl for lvl,_,_ in toc]
    assert [c.section_path for c in secs] == breadcrumbs(toc)
    assert all(1 <= c.page_start <= c.page_end <= n for c in cs)
    assert [c.page_start for c in secs] == [p for _,_,p in toc]
    # each section starts at its heading (possibly after its number), and no text is repeated or lost
    assert all(' '.join(c.name.lower().split()) in ' '.join(c.content[:len(c.name) + 12].lower().split()) for c in secs)
    assert abs(sum(len(''.join(c.content.split())) for c in cs) - nonblank) <= nonblank * 0.01
    assert all(c.metadata['page_starts'][0] == [0, c.page_start] for c in cs if c.page_end > c.page_start)

@needs_shared
def test_pdf_without_outline_one_chunk_per_page():
    with pymupdf.open(SHARED/'news-no-outline.pdf') as doc:
        with_text = [i + 1 for i,p in enumerate(doc) if p.get_text().strip()]
        assert doc.page_count == 15
    cs = parse_file(SHARED/'news-no-outline.pdf')
    assert [(c.page_start, c.page_end) for c in cs] == [(p, p) for p in with_text]
    assert all(c.element_type == 'section' and f"page {c.page_start}" in c.name for c in cs)

def levels(cs:list)->dict:
    res = {}
    for c in cs:
        if c.element_type == 'section': res[c.section_level] = res.get(c.section_level, 0) + 1
    return res

@needs_shared
def test_docx_getting_started_structure():
    cs = parse_file(SHARED/'docx4j-getting-started.docx')
    styles = manifest()['docx4j-getting-started.docx']['heading_styles']
    assert levels(cs) == {1: styles['Title'] + styles['Heading 1'], 2: styles['Heading 2']}
    last1 = None
    for c in cs:
        if c.section_level == 1: last1 = c; assert c.section_path == [c.name]
        if c.section_level == 2: assert c.section_path == last1.section_path + [c.name]
    assert [c.name for c in cs if c.section_level == 1][:2] == ['Docx4j - Getting Started', 'What is docx4j?']
    assert not any('What is docx4j?\t' in c.content for c in cs)  # the table of contents is left out

@needs_shared
def test_docx_starting_at_heading_2():
    cs = parse_file(SHARED/'docx4j-headers-footers.docx')
    styles = manifest()['docx4j-headers-footers.docx']['heading_styles']
    assert levels(cs) == {1: styles['Title'], 2: styles['Heading 2'], 3: styles['Heading 3']}
    last2 = None
    for c in cs:
        if c.section_level == 2: last2 = c
        if c.section_level == 3: assert c.section_path[:-1] == last2.section_path and c.section_path[-1] == c.name
    assert sum(' | ' in c.content for c in cs) > 0  # its tables are kept as text

@needs_shared
def test_docx_six_levels():
    cs = parse_file(SHARED/'pandoc-headers.docx')
    six, = [c for c in cs if c.section_level == 6]
    assert six.section_path == ['A Test of Headers', 'Second Level', 'Third level', 'Fourth level', 'Fifth level',
                                'Sixth level']

@needs_shared
def test_docx_cyrillic():
    cs = parse_file(SHARED/'docx4j-russian.docx')
    assert 'Введение в docx4j' in [c.name for c in cs]
    styles = manifest()['docx4j-russian.docx']['heading_styles']
    assert levels(cs) == {1: styles['Title'] + styles['Heading 1'], 2: styles['Heading 2']}
    assert any('Согласно' in c.content for c in cs)

@needs_shared
def test_small_files():
    small = SHARED/'small'
    c, = parse_file(small/'sample.pdf')
    assert (c.page_start, c.page_end, c.element_type) == (1, 1, 'paragraph')
    c, = parse_file(small/'two-page.pdf')
    assert (c.page_start, c.page_end, c.metadata['page_starts'][1][1]) == (1, 2, 2)
    cs = parse_file(small/'sample.md')
    assert [c.section_path for c in cs][:4] == [['Widget User Manual'], ['Widget User Manual', 'Installation'],
                                                 ['Widget User Manual', 'Installation', 'Prerequisites'],
                                                 ['Widget User Manual', 'Installation', 'Download']]
    assert len(cs) == 8 and cs[-1].content.startswith('If the widget fails')
    c, = parse_file(small/'no-headings.md')
    assert c.element_type == 'paragraph' and 'Another paragraph' in c.content
    c, = parse_file(small/'sample.txt')
    assert c.content.startswith('This is a plain text document')
    with pytest.raises(ParseError, match='^empty.txt: empty file$'): parse_file(small/'empty.txt')

# --- Markdown headings: the line scan agrees with markdown-it wherever it is used

def test_markdown_line_scan_finds_what_markdown_it_finds():
    "Random texts of Markdown punctuation: every one the line scan accepts has the headings CommonMark's block parser finds"
    import random
    from multis.documents.markdown import _MD_BLOCKS, _md_headings, _plain_headings
    def blocks(text):
        toks = _MD_BLOCKS.parse(text)
        return [(t.map[0], t.map[1], int(t.tag[1]), toks[i+1].content) for i, t in enumerate(toks)
                if t.type == 'heading_open' and t.level == 0]
    bits = ['#', '##', '###', '#######', ' ', '\t', 'word', '*', '`', '#x', '\\#', '&amp;', '_', 'é', '\u00a0', '\f', '\v',
            '-', '=', '1.', '>', '<b>', '[a]: /u', '~~~', '\u2028', '\x1c', '\x85', '# a #', ' #', '#\t', 'a#', '**b**']
    r, plain = random.Random(7), 0
    for _ in range(20_000):
        text = '\n'.join(''.join(r.choice(bits) for _ in range(r.randint(0, 5))) for _ in range(r.randint(1, 8)))
        if (hs := _plain_headings(text)) is not None: plain += 1; assert hs == blocks(text), text
    assert plain > 2000
    md = '# Guide\n\nIntro.\n\n## Setup ##\nText #1 here.\n'
    assert _plain_headings(md) is not None and _md_headings(md) == [(0, 1, 1, 'Guide'), (4, 5, 2, 'Setup')]
    assert _plain_headings(md + '\n- a list\n') is None and _md_headings(md + '\n- a list\n') == _md_headings(md)
