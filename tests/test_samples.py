"The sample documents in data/ are small, well-formed and exactly what tools/make_samples.py makes"
import hashlib, re, subprocess, sys, zipfile
from pathlib import Path

import docx, pymupdf, pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT/'data'
SCRIPT = ROOT/'tools'/'make_samples.py'
NAMES = ['garden-guide.md', 'multis-handbook.pdf', 'recipes.txt', 'travel-notes.docx']

def make(out:Path)->Path:
    "Run the script into `out`, as a user would"
    res = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return out

@pytest.fixture(scope='module')
def fresh(tmp_path_factory): return make(tmp_path_factory.mktemp('samples'))

def sha(p:Path)->str: return hashlib.sha256(p.read_bytes()).hexdigest()

def maker_version(p:Path)->str|None:
    "The library version a sample records it was made with (PDF creator, DOCX comments)"
    meta = pymupdf.open(p).metadata['creator'] if p.suffix == '.pdf' else docx.Document(p).core_properties.comments
    m = re.search(r'\((?:PyMuPDF|python-docx) ([^)]+)\)', meta or '')
    return m and m.group(1)

INSTALLED = {'.pdf': pymupdf.VersionBind, '.docx': docx.__version__}

def test_script_writes_every_sample(fresh):
    assert sorted(p.name for p in fresh.iterdir()) == NAMES
    assert sorted(p.name for p in DATA.iterdir() if not p.name.startswith('.')) == NAMES

def test_two_runs_are_byte_identical(fresh, tmp_path):
    again = make(tmp_path/'again')
    assert {n: sha(fresh/n) for n in NAMES} == {n: sha(again/n) for n in NAMES}

@pytest.mark.parametrize('name', NAMES)
def test_committed_data_is_reproducible(fresh, name):
    committed, made = DATA/name, fresh/name
    if committed.suffix in INSTALLED and maker_version(committed) != INSTALLED[committed.suffix]:
        pytest.skip(f"data/{name} was made with version {maker_version(committed)}, installed is "
                    f"{INSTALLED[committed.suffix]}: run python tools/make_samples.py to regenerate it")
    assert sha(made) == sha(committed), f"data/{name} differs from what tools/make_samples.py makes: regenerate it"

@pytest.mark.parametrize('name', NAMES)
def test_samples_are_small(name):
    assert 0 < (DATA/name).stat().st_size < 50_000

def test_pdf_has_a_three_level_outline():
    doc = pymupdf.open(DATA/'multis-handbook.pdf')
    toc = doc.get_toc()
    assert 4 <= doc.page_count <= 6
    assert {lvl for lvl, _, _ in toc} == {1, 2, 3}
    assert [t for _, t, _ in toc][:3] == ['Getting started', 'Installing', 'First run']
    assert all(1 <= page <= doc.page_count for _, _, page in toc)
    assert doc.metadata['creationDate'] == doc.metadata['modDate'] == 'D:20260115093000Z'
    pairing = doc[[p for _, t, p in toc if t == 'Pairing your phone'][0] - 1].get_text()
    assert 'pairing code' in pairing and len(pairing) > 2000      # long enough for the chunker to split

def test_docx_has_headings_and_a_table():
    d = docx.Document(DATA/'travel-notes.docx')
    styles = [p.style.name for p in d.paragraphs]
    assert styles[0] == 'Title'
    assert {'Heading 1', 'Heading 2', 'Heading 3'} <= set(styles)
    assert len(d.tables) == 1 and d.tables[0].cell(0, 0).text == 'Day' and len(d.tables[0].rows) > 3
    assert d.core_properties.created.year == 2026
    with zipfile.ZipFile(DATA/'travel-notes.docx') as z:
        assert z.testzip() is None
        assert {i.date_time for i in z.infolist()} == {(2026, 1, 15, 9, 30, 0)}

def test_markdown_has_preamble_nested_headings_and_a_code_comment():
    text = (DATA/'garden-guide.md').read_text(encoding='utf-8')
    assert not text.startswith('#')                                  # text before the first heading
    assert {len(m) for m in re.findall(r'^(#+) ', text, re.M)} >= {1, 2, 3}
    fence = text.split('```')[1]
    assert any(line.startswith('# ') for line in fence.splitlines())  # a `#` line that is not a heading
    assert re.search(r'^- ', text, re.M)                             # a list

def test_text_note_is_plain_utf8():
    text = (DATA/'recipes.txt').read_text(encoding='utf-8')
    assert 'tomatoes' in text and '\r' not in text and not text.lstrip().startswith('#')
