"The offline docs build (tools/build_docs.py): one page per notebook, navigation, API docs, outputs, no Quarto, no network"
import json, re, shutil, subprocess, sys, textwrap
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO/'tools'))
import build_docs

# Runs the real script with sockets and subprocesses refused, and checks that it never imported multis
GUARDED = textwrap.dedent("""
    import runpy, socket, subprocess, sys
    def refuse(*a, **k): raise RuntimeError('the docs build must not use the network or run programs')
    socket.socket.connect = socket.socket.connect_ex = socket.socket.sendto = refuse  # the class stays: ssl subclasses it
    socket.create_connection = subprocess.Popen = refuse
    sys.argv = ['build_docs.py', '--check', '--out', sys.argv[1]]
    runpy.run_path({script!r}, run_name='__main__')
    assert not [m for m in sys.modules if m == 'multis' or m.startswith('multis.')], 'the docs build imported multis'
""").format(script=str(REPO/'tools'/'build_docs.py'))

@pytest.fixture(scope='module')
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp('docs')
    r = subprocess.run([sys.executable, '-c', GUARDED, str(out)], cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    return out

def page(site, name): return (site/name).read_text(encoding='utf-8')
def text(h): return re.sub(r'\s+', ' ', re.sub(r'<[^>]+>', ' ', h))

def test_one_page_per_notebook(site):
    nbs = build_docs.notebooks(REPO/'nbs')
    names = {p.name for p in site.glob('*.html')}
    assert names == {build_docs.page_name(nb) for nb in nbs}
    assert {'index.html', 'architecture.html', 'core.html', 'retrieval.ranking.html', 'retrieval.store.html',
            'retrieval.evaluate.html'} <= names
    assert (site/'styles.css').read_text() == (REPO/'nbs'/'styles.css').read_text()
    assert 'Store' in page(site, 'index.html') or 'multis' in page(site, 'index.html')

def test_every_module_has_its_page(site):
    mods = {}
    for nb in build_docs.notebooks(REPO/'nbs'):
        m = build_docs.default_exp(json.loads(nb.read_text(encoding='utf-8'))['cells'])
        if m: mods[m] = build_docs.page_name(nb)
    assert {'core', 'retrieval.store', 'retrieval.ranking', 'platforms.telegram', 'cli'} <= set(mods)
    assert mods['platforms.telegram'] == 'platforms.telegram.html'
    for m, name in mods.items():
        h = page(site, name)
        for sym in build_docs.module_symbols(REPO/'multis'/(m.replace('.', '/') + '.py')):
            assert f'<h3 class="anchored">{sym}</h3>' in h, f'{m}.{sym} has no API entry on {name}'

def test_sidebar_links_resolve(site):
    pages = sorted(site.glob('*.html'))
    for p in pages:
        nav = re.search(r'<nav class="sidebar".*?</nav>', p.read_text(encoding='utf-8'), re.DOTALL).group(0)
        links = re.findall(r'href="([^"]+)"', nav)
        assert sorted(links) == sorted(q.name for q in pages)
        assert all((site/l).exists() for l in links)
        assert f'href="{p.name}" class="active"' in nav
    assert re.findall(r'<nav class="sidebar".*?href="([^"]+)"', page(site, 'retrieval.store.html'), re.DOTALL)[0] == 'index.html'

def test_api_entries_have_signature_docstring_and_docments(site):
    core = text(page(site, 'core.html'))
    assert 'DocChunk (file_path:str, name:str, content:str, page_start:int | None=None' in core
    assert 'One searchable piece of a document' in core
    store = text(page(site, 'retrieval.store.html'))
    assert 'Store (path:str | Path | None=None' in store and 'The SQLite store: chunks, their full-text index' in store
    assert 'Store.transaction ()' in store  # a @patch method is documented as Class.method, without self
    rank = page(site, 'retrieval.ranking.html')
    assert 'activation (access_times:Iterable, now, decay:float=0.5, max_accesses:int=50) -&gt; float' in rank
    assert re.search(r'<td><strong>decay</strong></td><td>float</td><td>0.5</td><td>d: how fast a trace fades', rank)
    assert re.search(r'<a href="core.html#[\w-]+"><code>DocChunk</code></a>', page(site, 'retrieval.store.html'))

def test_outputs_shown_hidden_cells_not(site):
    rank = page(site, 'retrieval.ranking.html')
    assert rank.count('<img src="data:image/png;base64,') >= 1
    assert re.search(r'<div class="cell-output cell-output-display"><pre><code>\[0\.\d+', rank)
    assert '<div class="cell-output cell-output-stdout">' in ''.join(p.read_text() for p in site.glob('*.html'))
    for p in site.glob('*.html'):
        h = p.read_text(encoding='utf-8')
        assert 'from fastcore.test import' not in h and 'nbdev.nbdev_export()' not in h, p.name
        code = ''.join(re.findall(r'<pre class="sourceCode.*?</pre>', h, re.DOTALL))
        assert '#|' not in code and 'default_exp' not in code, p.name

def test_title_subtitle_toc_and_search(site):
    h = page(site, 'retrieval.store.html')
    assert '<h1 class="title">Store</h1>' in h and '<div class="description">The SQLite store: chunks in an FTS5 index' in h
    toc = re.search(r'<nav class="toc".*?</nav>', h, re.DOTALL).group(0)
    assert re.findall(r'href="#([^"]+)"', toc) and all(f'id="{a}"' in h for a in re.findall(r'href="#([^"]+)"', toc))
    search = json.loads((site/'search.json').read_text())
    assert any(e['href'].startswith('retrieval.store.html#') and e['title'] == 'Store' for e in search)

# ---- the sidebar groups pages by chapter, in Quarto (nbs/sidebar.yml) and in the offline build alike (issue 15, item 1)

CHAPTERS = ['Core', 'Documents', 'Retrieval', 'Answer', 'Memory', 'Governance', 'Chat', 'Platforms', 'Run', 'Workbench',
            'Testing']

def _sidebar_yml()->list:
    import yaml
    return yaml.safe_load((REPO/'nbs'/'sidebar.yml').read_text())['website']['sidebar']['contents']

def test_sidebar_yml_groups_notebooks_by_chapter():
    "Quarto's sidebar: index, architecture, one section per chapter holding exactly its notebooks, the bot last"
    import configparser
    cfg = configparser.ConfigParser(interpolation=None); cfg.read(REPO/'settings.ini')
    assert cfg['DEFAULT']['custom_sidebar'] == 'True', 'nbdev_docs would overwrite nbs/sidebar.yml'
    side = _sidebar_yml()
    assert side[:2] == ['index.ipynb', '00_architecture.ipynb'] and side[-1] == '99_bot.ipynb'
    sections = [e for e in side if isinstance(e, dict)]
    assert [e['section'] for e in sections] == CHAPTERS
    for e in sections[1:]:
        assert e['contents'] and all(re.match(rf'\d+[a-z]?_{e["section"].lower()}\.\w+\.ipynb$', n) for n in e['contents']), e
    assert sections[0]['contents'][:3] == ['00_core.ipynb', '01_config.ipynb', '02_cli.ipynb']
    listed = [n for e in side for n in ([e] if isinstance(e, str) else e['contents'])]
    assert sorted(listed) == sorted(nb.name for nb in build_docs.notebooks(REPO/'nbs')), 'every page listed once'
    assert build_docs.sidebar_problems() == []

def test_offline_sidebar_draws_the_same_sections(site):
    "The offline build's sidebar: the same entries and sections, in the same order, as nbs/sidebar.yml"
    nav = re.search(r'<nav class="sidebar".*?</nav>', page(site, 'architecture.html'), re.DOTALL).group(0)
    drawn = re.findall(r'<span class="section-title">([^<]+)</span>|<a href="([^"]+)"', nav)
    want = []
    for e in _sidebar_yml():
        if isinstance(e, str): want.append(('', build_docs.page_name(Path(e))))
        else: want += [(e['section'], '')] + [('', build_docs.page_name(Path(n))) for n in e['contents']]
    assert drawn == want
    assert 'href="architecture.html" class="active"' in nav

def test_stale_sidebar_is_named(tmp_path):
    "A notebook added without rewriting nbs/sidebar.yml fails --check with the command that fixes it"
    nbs = tmp_path/'nbs'; nbs.mkdir()
    (nbs/'index.ipynb').write_text(_nb(('markdown', '# Home', [])))
    (nbs/'00_core.ipynb').write_text(_nb(('markdown', '# Core', []), ('code', '#| default_exp core', [])))
    (nbs/'10_documents.parsers.ipynb').write_text(_nb(('markdown', '# Parsers', []), ('code', '#| default_exp documents.parsers', [])))
    assert build_docs.sidebar_problems(nbs) == ['nbs/sidebar.yml: missing; run python tools/build_docs.py --sidebar']
    (nbs/'sidebar.yml').write_text(build_docs.sidebar_yml(nbs))
    assert build_docs.sidebar_problems(nbs) == []
    assert build_docs.sidebar(nbs) == ['index.ipynb', {'section': 'Core', 'contents': ['00_core.ipynb']},
                                       {'section': 'Documents', 'contents': ['10_documents.parsers.ipynb']}]
    (nbs/'11_documents.chunker.ipynb').write_text(_nb(('markdown', '# Chunker', []), ('code', '#| default_exp documents.chunker', [])))
    assert build_docs.sidebar_problems(nbs) == ['nbs/sidebar.yml: not the pages grouped by chapter; run python tools/build_docs.py --sidebar']

# ---- the architecture page, right after the index (issue 15, item 8)

def test_architecture_page_names_every_chapter_and_the_message_path(site):
    h = page(site, 'architecture.html')
    assert '<h1 class="title">Architecture</h1>' in h and '<pre class="mermaid">' in h and 'mermaid.esm.min.mjs' in h
    t = text(h)
    for ch in CHAPTERS[1:]: assert f'{ch.lower()}:' in t and f'<code>{ch.lower()}</code>' in h, ch
    path = t[t.index('One Telegram message'):]
    steps = ['TelegramPlatform.on_message', 'Router.handle', 'Conversation.reply', 'ask_config', 'Store.search',
             'Provider.generate', 'audit', 'TelegramPlatform.send']
    assert [path.index(s) for s in steps] == sorted(path.index(s) for s in steps)
    assert 'mermaid' not in page(site, 'core.html')

def _nb(*cells): return json.dumps({'cells': [{'cell_type': t, 'source': s, 'metadata': {}, 'outputs': o}
                                              for t, s, o in cells], 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5})

def test_check_finds_missing_entries_and_empty_pages(tmp_path):
    (tmp_path/'nbs').mkdir(); (tmp_path/'multis').mkdir()
    (tmp_path/'nbs'/'index.ipynb').write_text(_nb(('markdown', '# Home\n> the tour\n\nWelcome.', [])))
    (tmp_path/'nbs'/'01_foo.ipynb').write_text(_nb(
        ('markdown', '# Foo\n> foo things', []),
        ('code', '#| default_exp foo', []),
        ('code', '#| hide\nsecret_setup()', []),
        ('code', '#| export\ndef bar(x:int=1, # how many\n        )->str: # the text\n    "Bar it"\n    return str(x)',
         []),
        ('code', 'bar(2)', [{'output_type': 'execute_result', 'data': {'text/plain': "'2'"}, 'metadata': {}}])))
    (tmp_path/'nbs'/'02_empty.ipynb').write_text(_nb(('code', '#| default_exp empty', [])))
    (tmp_path/'nbs'/'_draft.ipynb').write_text(_nb(('markdown', '# Draft', [])))
    (tmp_path/'multis'/'foo.py').write_text("__all__ = ['bar', 'baz']\ndef bar(x): pass\ndef baz(): pass\n")
    (tmp_path/'multis'/'empty.py').write_text("__all__ = []\n")
    out = tmp_path/'_docs'
    pages = build_docs.build(out, tmp_path/'nbs', tmp_path)
    assert sorted(p.name for p in out.glob('*.html')) == ['empty.html', 'foo.html', 'index.html']
    foo = (out/'foo.html').read_text()
    assert 'bar (x:int=1) -&gt; str' in foo and 'Bar it' in foo and 'how many' in foo and 'the text' in foo
    assert 'secret_setup' not in foo and '<pre><code>&#x27;2&#x27;</code></pre>' in foo
    assert sorted(build_docs.check(out, pages, tmp_path)) == ['empty.html: empty page', 'foo.html: foo.baz has no API entry']
    (out/'foo.html').unlink()
    assert 'foo.html: not written' in build_docs.check(out, pages, tmp_path)

# ---- the Quarto project: _quarto.yml at the top level, and the one nbdev_docs uses (issue 14, item 26)

def test_top_level_quarto_yml_is_the_one_nbdev_reads():
    top, link = REPO/'_quarto.yml', REPO/'nbs'/'_quarto.yml'
    assert top.is_file() and not top.is_symlink()
    assert link.is_symlink() and link.resolve() == top.resolve(), 'nbdev 2.4.7 reads <nbs_path>/_quarto.yml'
    assert build_docs.quarto_problems() == []
    assert build_docs.stylesheets() == ['styles.css']

def test_quarto_problems_name_a_missing_or_stale_config(tmp_path):
    (tmp_path/'nbs').mkdir()
    assert build_docs.quarto_problems(tmp_path) == ['_quarto.yml: missing at the top level']
    (tmp_path/'_quarto.yml').write_text('format:\n  html:\n    css: site-extra.css\n')
    (tmp_path/'nbs'/'_quarto.yml').write_text('project:\n  type: website\n')   # a copy, not the link: it drifts
    assert build_docs.quarto_problems(tmp_path) == ['nbs/_quarto.yml: must be a symlink to ../_quarto.yml (nbdev reads <nbs_path>/_quarto.yml)']
    (tmp_path/'nbs'/'_quarto.yml').unlink(); (tmp_path/'nbs'/'_quarto.yml').symlink_to('../_quarto.yml')
    assert build_docs.quarto_problems(tmp_path) == ['_quarto.yml: stylesheet site-extra.css not in nbs/']
    assert build_docs.stylesheets(tmp_path) == ['site-extra.css']

PROC = textwrap.dedent("""
    import sys; from pathlib import Path
    sys.path.insert(0, {tools!r}); import build_docs
    build_docs.main_proc(Path(sys.argv[1]))
""").format(tools=str(REPO/'tools'))

def _project(tmp:Path, *cells)->Path:
    "A one-notebook nbdev project with this repository's settings.ini and _quarto.yml layout"
    shutil.copy(REPO/'settings.ini', tmp/'settings.ini')
    (tmp/'multis').mkdir(); (tmp/'multis'/'__init__.py').write_text('')
    (tmp/'nbs').mkdir(); shutil.copy(REPO/'nbs'/'styles.css', tmp/'nbs'/'styles.css')
    (tmp/'_quarto.yml').write_text((REPO/'_quarto.yml').read_text() + '# marker: the top-level file\n')
    (tmp/'nbs'/'_quarto.yml').symlink_to('../_quarto.yml')
    (tmp/'nbs'/'index.ipynb').write_text(_nb(('markdown', '# Home\n> the tour', []), *cells))
    return tmp

def _proc(tmp): return subprocess.run([sys.executable, '-c', PROC, str(tmp)], cwd=tmp, capture_output=True, text=True, timeout=300)

def test_nbdev_proc_uses_the_top_level_quarto_yml(tmp_path):
    "nbdev's own processing (what nbdev_docs runs before Quarto) copies the top-level _quarto.yml into _proc/"
    p = _project(tmp_path, ('code', 'x = 1', []))
    r = _proc(p)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (p/'_proc'/'_quarto.yml').read_text() == (p/'_quarto.yml').read_text()
    assert '# marker: the top-level file' in (p/'_proc'/'_quarto.yml').read_text()
    assert (p/'_proc'/'index.ipynb').exists() and (p/'_proc'/'styles.css').exists()
    assert (p/'nbs'/'_quarto.yml').is_symlink()   # nbdev's refresh_quarto_yml left the link alone

def test_nbdev_proc_fails_on_a_notebook_error(tmp_path):
    "06_search's bug: a cell mixing an import with code runs in the docs build without the notebook's earlier cells"
    p = _project(tmp_path, ('code', '#| export\ndef half(x): return x / 2', []), ('code', 'docs = [1, 2]', []),
                 ('code', 'import math\nmath.floor(half(len(docs)))', []))
    r = _proc(p)
    assert r.returncode == 1
    assert "nbdev_proc_nbs failed: Error in notebook: Home in cell" in r.stderr
    assert "NameError: name 'docs' is not defined" in r.stderr.splitlines()[-1]

def test_docs_processing_runs_search_and_the_workbench(tmp_path):
    "nbdev's processors (exec_show_docs runs export cells and any cell holding an import) pass on these notebooks"
    code = textwrap.dedent("""
        import sys; from pathlib import Path
        from nbdev.serve_drv import exec_nb
        from nbdev.processors import FilterDefaults
        for nb in sys.argv[2:]: exec_nb(Path('nbs')/nb, Path(sys.argv[1])/nb, FilterDefaults)
    """)
    nbs = ['22_retrieval.search.ipynb', '90_workbench.explorer.ipynb', '91_workbench.experiments.ipynb']
    r = subprocess.run([sys.executable, '-W', 'ignore', '-c', code, str(tmp_path), *nbs], cwd=REPO, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.glob('*.ipynb')) == nbs

# ---- the site Quarto would make, offline: search, math, source links, narrow screens, screenshots (issue 21, item 4)

def test_search_index_in_quartos_format_covers_every_page(site):
    "search.json as Quarto writes it (search.js the same, for file://): every page's text, headings and API entries"
    search = json.loads((site/'search.json').read_text(encoding='utf-8'))
    assert (site/'search.js').read_text(encoding='utf-8') == f"window.SEARCH_INDEX = {(site/'search.json').read_text(encoding='utf-8')};\n"
    assert all(set(e) == {'objectID', 'href', 'title', 'section', 'text', 'crumbs'} for e in search)
    assert {e['href'].split('#')[0] for e in search} == {p.name for p in site.glob('*.html')}
    ids = {}
    for e in search:
        page_, _, a = e['href'].partition('#')
        if a: assert f'id="{a}"' in ids.setdefault(page_, page(site, page_)), e['href']
    act = next(e for e in search if e['href'] == 'retrieval.ranking.html#activation')
    assert act['title'] == 'Ranking' and act['section'] == 'activation' and 'ACT-R base-level activation' in act['text']
    home = next(e for e in search if e['href'] == 'index.html')
    assert home['section'] == '' and 'BM25' in home['text']          # the text before the first heading
    assert any(e['href'].startswith('retrieval.ranking.html#') and e['section'] == 'ACT-R base-level activation' for e in search)
    for p in site.glob('*.html'):
        h = p.read_text(encoding='utf-8')
        assert 'id="search-input"' in h and '<script defer src="site.js"></script>' in h and 'class="nav-toggle"' in h, p.name
    js = (site/'site.js').read_text(encoding='utf-8')
    assert "s.src = 'search.js'" in js and 'nav-open' in js

def test_math_is_mathml_in_the_page(site):
    rank = page(site, 'retrieval.ranking.html')
    assert rank.count('<math ') >= 20 and '<math xmlns="http://www.w3.org/1998/Math/MathML" display="block">' in rank
    assert '<munderover><mo>&#x02211;</mo>' in rank                 # the sum in B = ln(1 + sum t_j^-d)
    assert '$' not in text(rank) and 'mathjax' not in rank.lower()
    assert '<code>$(...)</code>' in page(site, 'governance.rules.html')   # `$` in code stays code
    for p in site.glob('*.html'):                                        # offline: nothing from a CDN but mermaid
        h = p.read_text(encoding='utf-8')
        remote = re.findall(r'<(?:script|link)\b[^>]*(?:src|href)="(https?://[^"]+)"', h) + re.findall(r'from "(https?://[^"]+)"', h)
        assert remote == ([] if 'class="mermaid"' not in h else [re.search(r'from "(https?://[^"]+)"', build_docs.MERMAID).group(1)]), p.name

def test_math_rules_follow_pandoc(tmp_path):
    (tmp_path/'nbs').mkdir()
    (tmp_path/'nbs'/'index.ipynb').write_text(_nb(('markdown', '# Home\n> math\n\nLet $x_1$ be 2$ and $ 3 $, or $20,000 and $30,000.'
                                                     '\n\nRun `$(cmd)` and $$\\frac{1}{2}$$ then $\\notacommand{$, $\\ln 2$, $1/60$.\n\n$$\na^2\n$$', [])))
    build_docs.build(tmp_path/'out', tmp_path/'nbs', tmp_path)
    h = (tmp_path/'out'/'index.html').read_text()
    assert '<math xmlns="http://www.w3.org/1998/Math/MathML" display="inline"><mrow><msub><mi>x</mi><mn>1</mn></msub></mrow></math>' in h
    assert 'be 2$ and $ 3 $, or $20,000 and $30,000.' in h and '<code>$(cmd)</code>' in h and '<mfrac>' in h and '<msup><mi>a</mi><mn>2</mn></msup>' in h
    assert '<mi>ln</mi><mspace width="0.167em"></mspace><mn>2</mn>' in h                   # spaced as TeX spaces it
    assert '<mn>1</mn><mo lspace="0" rspace="0">&#x0002F;</mo><mn>60</mn>' in h
    assert '\\notacommand{' in h                                        # TeX latex2mathml cannot read stays readable

def test_api_entries_link_to_their_source_line(site, tmp_path):
    "Every API entry of a module links [source] to its def/class (or decorator) line on GitHub, as nbdev does"
    n = 0
    for p in site.glob('*.html'):
        for url, name in re.findall(r'<a class="source-link" href="([^"]+)">source</a><h3 class="anchored">([^<]+)</h3>', p.read_text()):
            m = re.fullmatch(r'https://github\.com/multis-dev/multis/blob/main/(multis/[\w/]+\.py)#L(\d+)', url)
            assert m, url
            lines = (REPO/m.group(1)).read_text(encoding='utf-8').splitlines()[int(m.group(2)) - 1:]
            head = next(l for l in lines if not l.startswith('@'))
            assert re.match(rf'(async )?(def|class) {re.escape(name.split(" | ")[0].split(".")[-1])}\b', head), (url, name, head)
            n += 1
    assert n >= 600
    assert not [e for e in build_docs.check(tmp_path, build_docs.build(tmp_path)) if 'source' in e]

def test_subtitle_over_several_lines_is_whole_and_named(tmp_path):
    "nbdev keeps only the first `>` line (so Quarto would cut the subtitle): the build shows it whole, --check names it"
    nbs = tmp_path/'nbs'; nbs.mkdir()
    (nbs/'index.ipynb').write_text(_nb(('markdown', '# Home\n\n> first half\n> second half\n\nBody.', [])))
    assert build_docs.title_of(json.loads((nbs/'index.ipynb').read_text())['cells']) == ('Home', 'first half second half', 'Body.')
    assert build_docs.subtitle_problems(nbs) == ['index.ipynb: the subtitle spans several ">" lines; nbdev shows only the first: write it on one line']
    assert build_docs.subtitle_problems() == []
    home = (REPO/'nbs'/'index.ipynb').read_text(encoding='utf-8')
    assert build_docs.title_of(json.loads(home)['cells'])[1].endswith('searched and remembered on your own machine')

def test_screenshot_shown_on_its_page_when_the_browser_test_made_it(tmp_path):
    shots = tmp_path/'shots'; shots.mkdir()
    (tmp_path/'nbs').mkdir()
    for nb in ('index.ipynb', '90_workbench.explorer.ipynb'): shutil.copy(REPO/'nbs'/nb, tmp_path/'nbs'/nb)
    build_docs.build(tmp_path/'a', tmp_path/'nbs', tmp_path, shots=shots)
    assert 'class="screenshot"' not in (tmp_path/'a'/'workbench.explorer.html').read_text() and not (tmp_path/'a'/'images').exists()
    (shots/'explorer.png').write_bytes(b'\x89PNG fake')
    build_docs.build(tmp_path/'b', tmp_path/'nbs', tmp_path, shots=shots)
    h = (tmp_path/'b'/'workbench.explorer.html').read_text()
    assert re.search(r'</header>\n<figure class="screenshot"><img src="images/explorer.png" alt="The explorer in JupyterLab', h)
    assert (tmp_path/'b'/'images'/'explorer.png').read_bytes() == b'\x89PNG fake'
    assert 'class="screenshot"' not in (tmp_path/'b'/'index.html').read_text()

def test_quarto_yml_has_search_and_math():
    "A Quarto build (nbdev_docs) would have the same: search box in the navbar, TeX as MathML (no CDN)"
    q = build_docs.quarto()
    assert q['format']['html']['html-math-method'] == 'mathml'
    assert q['website']['search'] == {'location': 'navbar', 'type': 'textbox'} and q['website']['navbar']['search'] is True
