"""Build the docs site into `_docs/` from `nbs/*.ipynb` without Quarto (what `nbdev_docs` does where Quarto exists).

    python tools/build_docs.py                 # build _docs/
    python tools/build_docs.py --out DIR       # build somewhere else
    python tools/build_docs.py --check         # build into a temp dir; exit 1 if a module has no page, a page is
                                               # empty, a sidebar link is broken, an exported symbol has no API entry,
                                               # nbs/sidebar.yml is stale or nbdev would not use the top-level _quarto.yml
    python tools/build_docs.py --sidebar       # write nbs/sidebar.yml: the pages grouped by chapter (Quarto's sidebar)
    python tools/build_docs.py --proc          # run what `nbdev_docs` runs before Quarto (nbdev's `_pre_docs`: nbdev.yml,
                                               # sidebar, `proc_nbs` into _proc/) without installing Quarto; exit 1 on
                                               # any notebook error or if _proc/_quarto.yml is not the top-level one

The Quarto project is `_quarto.yml` at the top level; `nbs/_quarto.yml` is a symlink to it, because nbdev 2.4.7 reads
`<nbs_path>/_quarto.yml` (`refresh_quarto_yml` writes its default there when none exists, `proc_nbs` copies it into
`_proc/`). This build reads the same file for the stylesheets it names.

Pages follow nbdev's processors: `#| hide`, `#| export`, `#| exporti`, `#| default_exp` and `#| include: false` cells
are dropped (the same cell rules as tools/make_readme.py), every exported public function or class gets an API entry
(signature, docstring, docments table) where its cell was, title and subtitle come from the first markdown cell, and
`20_retrieval.ranking.ipynb` becomes `retrieval.ranking.html`. Nothing here imports multis: the API docs are read from
the source with `ast`.

What Quarto adds, done here without a CDN (the site works offline, from file:// too): TeX (`$...$`, `$$...$$`, Pandoc's
rules) becomes MathML in the page with latex2mathml (Quarto: `html-math-method: mathml`; no script, no font download;
browsers draw MathML natively); a search box over every page's text, headings and API entries (`search.json` in
Quarto's format, and the same as `search.js` for file://, read by tools/docs_site.js, a small script of ours); on narrow
screens the sidebar hides behind a toggle; each API entry links `[source]` to its line in the exported module on GitHub
(settings.ini's `git_url` and `branch`, as nbdev links it). Screenshots the browser tests leave in tests/artifacts/ show
on their page (`SCREENSHOTS`: the explorer's). Only the architecture page's mermaid diagram still loads mermaid.js from
its CDN (offline its source shows).

The sidebar groups pages by chapter, one section per subpackage (`NN_chapter.module.ipynb`); the top-level modules
before the chapters (core, config, cli) form the Core section, and pages outside any chapter (the index, the
architecture page, the closing bot notebook) stay top-level. The same grouping is written to `nbs/sidebar.yml`
(committed; `custom_sidebar = True` in settings.ini, so nbdev_docs keeps it) and drawn by this build.
"""
import argparse, ast, html, io, json, re, shutil, sys, tempfile, tokenize
from pathlib import Path
from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_readme import _directives  # one rule for what a directive is, shared with the README)

try:  # TeX as MathML, written into the page: no script, no font, no network (Quarto: `html-math-method: mathml`)
    from latex2mathml.converter import convert as tex2mathml
    from mdit_py_plugins.dollarmath import dollarmath_plugin
except ImportError: tex2mathml = dollarmath_plugin = None

try:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer
except ImportError: highlight = None

HIDE_DIRS = {'hide', 'export', 'exporti', 'default_exp'}  # nbdev's rm_export: these cells never show their source
DOC_DIRS = {'export', 'exports', 'exec_doc'}              # nbdev's add_show_docs: these cells get API entries
_ansi = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')

# ---------------------------------------------------------------- notebooks

def page_name(nb:Path)->str:
    "The page a notebook becomes, as nbdev names it: `20_retrieval.ranking.ipynb` -> `ranking.html`"
    return re.sub(r'^\d+[a-zA-Z0-9]*_', '', nb.name.lower()).replace('.ipynb', '.html')

def notebooks(nbs:Path)->list:
    "The notebooks that become pages: index first, then the rest in order, `_`-prefixed ones skipped"
    nbs_ = sorted(p for p in nbs.glob('*.ipynb') if not p.name.startswith('_'))
    return sorted(nbs_, key=lambda p: p.name != 'index.ipynb')

def directives(src:str)->dict:
    "`{'hide': '', 'include:': 'false', ...}` for a cell's `#|` lines"
    return {d.split()[0]: ' '.join(d.split()[1:]) for d in _directives(src)}

def title_of(cells:list)->tuple:
    "Title and subtitle from the first markdown cell (`# Title` then `> subtitle`), and that cell's remaining text"
    if not cells or cells[0]['cell_type'] != 'markdown': return '', '', None
    lines = ''.join(cells[0]['source']).strip().splitlines()
    title = lines[0][2:].strip() if lines and lines[0].startswith('# ') else ''
    rest = lines[1:] if title else lines
    while rest and not rest[0].strip(): rest = rest[1:]
    sub = []
    while rest and rest[0].startswith('>'): sub.append(rest.pop(0)[1:].strip())  # whole, even over several lines
    return title, ' '.join(sub), '\n'.join(rest).strip()

def subtitle_problems(nbs:Path=REPO/'nbs')->list:
    "Subtitles written over several `>` lines: nbdev (so Quarto) keeps only the first line"
    errs = []
    for nb in notebooks(nbs):
        cells = json.loads(nb.read_text(encoding='utf-8'))['cells']
        first = ''.join(cells[0]['source']) if cells and cells[0]['cell_type'] == 'markdown' else ''
        if len(re.findall(r'^>', first, re.M)) > 1:
            errs.append(f'{nb.name}: the subtitle spans several ">" lines; nbdev shows only the first: write it on one line')
    return errs

def default_exp(cells:list)->str:
    "The module a notebook exports to ('' if none)"
    for c in cells:
        m = re.search(r'^#\|\s*default_exp\s+(\S+)', ''.join(c['source']), re.MULTILINE)
        if c['cell_type'] == 'code' and m: return m.group(1)
    return ''

# ---------------------------------------------------------------- the sidebar: pages grouped by chapter

def chapter_of(nb:Path, seen:bool=False)->str|None:
    "`21_retrieval.store.ipynb` -> 'retrieval'; a top-level module before the chapters -> 'core'; else None (top-level)"
    stem = re.sub(r'^\d+[a-zA-Z0-9]*_', '', nb.stem)
    if '.' in stem: return stem.split('.')[0]
    has_exp = bool(default_exp(json.loads(nb.read_text(encoding='utf-8'))['cells']))
    return 'core' if has_exp and not seen else None

def sidebar(nbs:Path)->list:
    "The sidebar: page file names and `{'section': chapter, 'contents': [...]}`, in notebook order"
    res, seen = [], False
    for nb in notebooks(nbs):
        ch = chapter_of(nb, seen)
        seen = seen or (ch not in (None, 'core'))
        if ch is None: res.append(nb.name)
        elif res and isinstance(res[-1], dict) and res[-1]['section'] == ch.capitalize(): res[-1]['contents'].append(nb.name)
        else: res.append(dict(section=ch.capitalize(), contents=[nb.name]))
    return res

def sidebar_yml(nbs:Path)->str:
    "`nbs/sidebar.yml` as Quarto reads it (`website.sidebar.contents`, one section per chapter)"
    out = ['# Written by `python tools/build_docs.py --sidebar` (pages grouped by chapter); checked by --check.',
           'website:', '  sidebar:', '    contents:']
    for e in sidebar(nbs):
        if isinstance(e, str): out.append(f'      - {e}'); continue
        out += [f'      - section: {e["section"]}', '        contents:'] + [f'          - {n}' for n in e['contents']]
    return '\n'.join(out) + '\n'

def sidebar_problems(nbs:Path=REPO/'nbs')->list:
    "Why the committed `nbs/sidebar.yml` is not the chapters' sidebar ([] when it is)"
    f = nbs/'sidebar.yml'
    if not f.exists(): return ['nbs/sidebar.yml: missing; run python tools/build_docs.py --sidebar']
    if f.read_text(encoding='utf-8') != sidebar_yml(nbs):
        return ['nbs/sidebar.yml: not the pages grouped by chapter; run python tools/build_docs.py --sidebar']
    return []

# ---------------------------------------------------------------- markdown and code

def slug(s:str)->str:
    s = re.sub(r'<[^>]+>', '', s).lower()
    return re.sub(r'[^\w]+', '-', s).strip('-') or 'section'

def math_html(tex:str, opts:dict)->str:
    "TeX as MathML (the TeX itself, escaped, if latex2mathml cannot read it), spaced as TeX spaces it"
    try: m = tex2mathml(tex, display='block' if opts.get('display_mode') else 'inline')
    except Exception: return html.escape(tex)
    m = re.sub(r'(<mi>(?:ln|log|exp|sin|cos|tan|max|min|lim)</mi>)(?=<m[in][ >])', r'\1<mspace width="0.167em"></mspace>', m)
    return m.replace('<mo>&#x0002F;</mo>', '<mo lspace="0" rspace="0">&#x0002F;</mo>')  # `/` is no binary operator in TeX

def code_html(code:str, lang:str='python')->str:
    "Highlighted code (Pygments when installed)"
    if highlight and lang == 'python': body = highlight(code, PythonLexer(), HtmlFormatter(nowrap=True))
    else: body = html.escape(code)
    return f'<div class="sourceCode cell-code"><pre class="sourceCode {lang} highlight"><code>{body}</code></pre></div>'

def plain(t)->str:
    "An inline token's text without its markdown (`*`, backticks, link targets), as the search index holds it"
    return ''.join(' ' if c.type.endswith('break') else c.content for c in t.children or []
                   if c.type in ('text', 'code_inline', 'math_inline', 'math_inline_double', 'softbreak', 'hardbreak'))

class Page:
    "One HTML page being written: markdown renderer, heading ids, table of contents and search sections"
    def __init__(self, pages:dict):
        self.md = MarkdownIt('commonmark', {'html': True}).enable(['table', 'strikethrough'])
        if dollarmath_plugin:  # Pandoc's rules for `$`: no space inside, no digit after the closing one
            self.md.use(dollarmath_plugin, allow_space=False, allow_digits=False, double_inline=True, renderer=math_html)
        self.inline = MarkdownIt('commonmark').renderInline  # docstrings and docments: `<chatId>` is text, not a tag
        self.pages, self.ids, self.toc, self.sections, self.mermaid, self.sources = pages, set(), [], [], False, {}

    def anchor(self, text:str)->str:
        "A unique id on this page"
        base = slug(text); a, i = base, 1
        while a in self.ids: i += 1; a = f'{base}-{i}'
        self.ids.add(a)
        return a

    def markdown(self, text:str)->str:
        "Markdown as HTML: headings get ids (H2s go in the TOC), links to notebooks go to their pages"
        toks = self.md.parse(text)
        for i, t in enumerate(toks):
            if t.type == 'fence' and t.info.strip() in ('{mermaid}', 'mermaid'):  # Quarto draws it; here mermaid.js does
                t.type, t.content, self.mermaid = 'html_block', f'<pre class="mermaid">{html.escape(t.content)}</pre>\n', True
            if t.type == 'heading_open':
                txt = toks[i+1].content
                t.attrSet('id', self.anchor(txt))
                if t.tag == 'h2': self.toc.append((txt, t.attrGet('id')))
                if t.tag in ('h2', 'h3'): self.sections.append([txt, t.attrGet('id'), ''])
            if t.type == 'inline' and self.sections and toks[i-1].type != 'heading_open': self.sections[-1][2] += ' ' + plain(t)
            for c in t.children or []:
                href = c.attrGet('href') if c.type == 'link_open' else None
                if href and not re.match(r'\w+://', href) and '.ipynb' in href:
                    f, _, frag = href.partition('#')
                    c.attrSet('href', page_name(Path(f)) + (f'#{frag}' if frag else ''))
        return self.md.renderer.render(toks, self.md.options, {})

    def output(self, o:dict)->str:
        "A saved cell output as HTML"
        t = o.get('output_type')
        if t == 'stream':
            text = _ansi.sub('', ''.join(o['text']))
            return f'<div class="cell-output cell-output-{o.get("name", "stdout")}"><pre><code>{html.escape(text.rstrip())}</code></pre></div>'
        if t == 'error':
            tb = _ansi.sub('', '\n'.join(o.get('traceback', [])))
            return f'<div class="cell-output cell-output-error"><pre><code>{html.escape(tb)}</code></pre></div>'
        d = o.get('data', {})
        if 'image/png' in d: body = f'<img src="data:image/png;base64,{"".join(d["image/png"]).strip()}" alt="output">'
        elif 'image/svg+xml' in d: body = ''.join(d['image/svg+xml'])
        elif 'text/html' in d: body = ''.join(d['text/html'])
        elif 'text/markdown' in d: body = self.markdown(''.join(d['text/markdown']))
        elif 'text/plain' in d: body = f'<pre><code>{html.escape(_ansi.sub("", "".join(d["text/plain"])).rstrip())}</code></pre>'
        else: return ''
        return f'<div class="cell-output cell-output-display">{body}</div>'

# ---------------------------------------------------------------- API docs from source

def _comments(src:str)->dict:
    "Line number -> comment text, for the docments"
    res = {}
    try:
        for t in tokenize.generate_tokens(io.StringIO(src).readline):
            if t.type == tokenize.COMMENT and not t.string.startswith('#|'): res[t.start[0]] = t.string[1:].strip()
    except (tokenize.TokenError, IndentationError, SyntaxError): pass
    return res

def _patch_name(node)->str:
    "`Class.method` for a `@patch`ed function (nbdev's patch_name), else the plain name"
    for d in getattr(node, 'decorator_list', []):
        nm = ast.unparse(d.func if isinstance(d, ast.Call) else d)
        if nm in ('patch', 'fastcore.basics.patch') and node.args.args and node.args.args[0].annotation is not None:
            a = node.args.args[0].annotation
            cls = [ast.unparse(x) for x in (a.left, a.right)] if isinstance(a, ast.BinOp) else [ast.unparse(a)]
            return ' | '.join(f'{c}.{node.name}' for c in cls)
        if nm == 'patch_to' and isinstance(d, ast.Call) and d.args: return f'{ast.unparse(d.args[0])}.{node.name}'
    return node.name

def _type_of(default)->str:
    try: return type(ast.literal_eval(default)).__name__
    except (ValueError, TypeError, SyntaxError, RecursionError): return ''

def _params(node)->list:
    "(name, annotation, default, docment) for a function's or dataclass's parameters, and `return`"
    if isinstance(node, ast.ClassDef):
        init = next((b for b in node.body if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and b.name == '__init__'), None)
        if init is None:
            fs = [b for b in node.body if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name)
                  and not ast.unparse(b.annotation).startswith('ClassVar')]
            return [(f.target.id, ast.unparse(f.annotation), ast.unparse(f.value) if f.value else None, f.lineno) for f in fs]
        node = init
    a = node.args
    pos = a.posonlyargs + a.args
    defs = [None]*(len(pos)-len(a.defaults)) + [ast.unparse(d) for d in a.defaults]
    ps = [(p.arg, ast.unparse(p.annotation) if p.annotation else '', d, p.lineno) for p, d in zip(pos, defs)]
    if ps and (ps[0][0] in ('self', 'cls') or node.name == '__init__' or _patch_name(node) != node.name): ps = ps[1:]
    if a.vararg: ps.append(('*' + a.vararg.arg, ast.unparse(a.vararg.annotation) if a.vararg.annotation else '', None, a.vararg.lineno))
    ps += [(p.arg, ast.unparse(p.annotation) if p.annotation else '', ast.unparse(d) if d else None, p.lineno)
           for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg: ps.append(('**' + a.kwarg.arg, ast.unparse(a.kwarg.annotation) if a.kwarg.annotation else '', None, a.kwarg.lineno))
    if node.returns is not None and node.name != '__init__': ps.append(('return', ast.unparse(node.returns), None, node.returns.lineno))
    return ps

def _docment(line:int, comments:dict, lines:set)->str:
    "The comment on a parameter's line, or the comment lines just above it (fastcore's docments rule)"
    if line in comments: return comments[line]
    res, line = [], line - 1
    while line in comments and line not in lines: res.insert(0, comments[line]); line -= 1
    return ' '.join(res)

def _sig(name:str, ps:list)->str:
    args = []
    for n, anno, dflt, _ in ps:
        if n == 'return': continue
        s = n + (f':{anno}' if anno else '')
        if dflt is not None: s += f'={dflt}'
        args.append(s)
    ret = next((anno for n, anno, *_ in ps if n == 'return'), '')
    return f'{name} ({", ".join(args)})' + (f' -> {ret}' if ret else '')

def api_entries(src:str)->list:
    "(name, kind, signature, docstring, docments rows) for every public function and class defined in a cell"
    code = '\n'.join(l for l in src.splitlines() if not l.lstrip().startswith(('%', '!')))
    try: tree = ast.parse(code)
    except SyntaxError: return []
    comments, res = _comments(code), []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): continue
        if node.name.startswith('_') and not node.name.startswith('__'): continue
        ps = _params(node)
        lines = {p[3] for p in ps}
        rows = [(n, anno or _type_of(d) if d else anno, d, _docment(ln, comments, lines)) for n, anno, d, ln in ps]
        doc = ast.get_docstring(node) or ''
        if isinstance(node, ast.ClassDef) and not doc:
            init = next((b for b in node.body if getattr(b, 'name', '') == '__init__'), None)
            doc = ast.get_docstring(init) if init else ''
        name = _patch_name(node)
        kind = 'class' if isinstance(node, ast.ClassDef) else 'function'
        res.append((name, kind, _sig(name, ps), doc or '', rows))
    return res

def source_links(module:str, src:dict)->dict:
    "Name -> URL of its line in the exported module, as nbdev links `[source]` (`git_url/blob/branch/lib_path/mod.py#Lline`)"
    py = src['repo']/src['lib_path']/(module.replace('.', '/') + '.py')
    if not src.get('git_url') or not py.exists(): return {}
    res = {}
    for node in ast.parse(py.read_text(encoding='utf-8')).body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): continue
        line = min([node.lineno] + [d.lineno for d in node.decorator_list])  # inspect.getsourcelines starts at a decorator
        for n in _patch_name(node).split(' | '):
            res.setdefault(n, f"{src['git_url'].rstrip('/')}/blob/{src['branch']}/{py.relative_to(src['repo']).as_posix()}#L{line}")
    return res

def api_html(page:Page, entry:tuple)->str:
    "One API entry as HTML, like nbdev's show_doc"
    name, kind, sig, doc, rows = entry
    a = page.anchor(name)
    page.sections.append([name, a, f'{sig} {doc.replace("`", "")}'])
    url = page.sources.get(name.split(' | ')[0])
    src = f'<a class="source-link" href="{html.escape(url)}">source</a>' if url else ''
    out = [f'<div class="api-entry {kind}" id="{a}">', f'{src}<h3 class="anchored">{html.escape(name)}</h3>',
           f'<blockquote><pre><code>{html.escape(sig)}</code></pre></blockquote>']
    if doc: out.append(f'<p class="docstring"><em>{page.inline(doc)}</em></p>')
    shown = [r for r in rows if r[0] != 'return' or r[3]]
    if any(r[3] for r in rows):
        out.append('<table class="docments table"><thead><tr><th></th><th>Type</th><th>Default</th><th>Details</th></tr></thead><tbody>')
        for n, anno, d, dm in shown:
            out.append(f'<tr><td><strong>{html.escape(n)}</strong></td><td>{html.escape(anno or "")}</td>'
                       f'<td>{html.escape(d) if d is not None else ""}</td><td>{page.inline(dm or "")}</td></tr>')
        out.append('</tbody></table>')
    out.append('</div>')
    return '\n'.join(out)

# ---------------------------------------------------------------- cells and pages

def cell_html(page:Page, c:dict, api:list)->str:
    "One processed notebook cell as HTML: markdown, or shown code with its outputs, then API entries of exports"
    src = ''.join(c['source'])
    if c['cell_type'] == 'markdown': return page.markdown(src)
    if c['cell_type'] != 'code': return ''
    d = directives(src)
    if d.get('include:') == 'false': return ''
    out = []
    if DOC_DIRS & d.keys() and 'hide' not in d:
        for e in api_entries(src):
            out.append(api_html(page, e)); api.append((e[0], out[-1].split('id="', 1)[1].split('"', 1)[0]))
    if HIDE_DIRS & d.keys():
        return '\n'.join(out)
    code = '\n'.join(l for l in src.splitlines() if not l.startswith('#|') and not l.rstrip().endswith('#|hide_line')).strip()
    cell = []
    if code and d.get('echo:') != 'false': cell.append(code_html(code))
    if d.get('output:') != 'false': cell += [h for h in (page.output(o) for o in c.get('outputs', [])) if h]
    if cell: out.insert(0, '<div class="cell">\n' + '\n'.join(cell) + '\n</div>')
    return '\n'.join(out)

LAYOUT_CSS = """
*{box-sizing:border-box} body{margin:0;font:16px/1.6 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#212529}
a{color:#2780e3;text-decoration:none} a:hover{text-decoration:underline}
.topbar{background:#2780e3;color:#fff;padding:.45rem 1.2rem;font-size:1.15rem;position:sticky;top:0;z-index:4;display:flex;align-items:center;gap:.8rem;min-height:2.9rem}
.topbar a.site-title{color:#fff;font-weight:600}
.nav-toggle{display:none;background:none;border:1px solid rgba(255,255,255,.6);border-radius:4px;color:#fff;font-size:1.1rem;line-height:1;padding:.3rem .5rem;cursor:pointer}
.search{position:relative;margin-left:auto;flex:0 1 18rem;min-width:0}
.search input{width:100%;font:inherit;font-size:.9rem;padding:.3rem .6rem;border:0;border-radius:4px}
.search-results{position:absolute;right:0;top:calc(100% + .3rem);width:min(34rem,calc(100vw - 1rem));max-height:70vh;overflow:auto;margin:0;padding:.3rem 0;list-style:none;background:#fff;color:#212529;border:1px solid #dee2e6;border-radius:6px;box-shadow:0 4px 16px rgba(0,0,0,.15);font-size:.88rem}
.search-results a{display:block;padding:.35rem .8rem;color:#212529} .search-results a:hover,.search-results li.selected a{background:#e9f2fc;text-decoration:none}
.search-results .where{font-weight:600;color:#2780e3} .search-results .snippet{display:block;color:#6c757d;font-size:.82rem} .search-results mark{background:#fff3b0;color:inherit}
.search-results li.none{padding:.35rem .8rem;color:#6c757d}
.layout{display:flex;align-items:flex-start}
nav.sidebar{width:240px;flex:none;position:sticky;top:2.9rem;max-height:calc(100vh - 2.9rem);overflow:auto;padding:1rem;border-right:1px solid #dee2e6;font-size:.92rem}
nav.sidebar ul{list-style:none;margin:0;padding:0} nav.sidebar li{margin:.15rem 0}
nav.sidebar a{color:#495057;display:block;padding:.1rem .5rem;border-radius:4px}
nav.sidebar .section-title{display:block;margin:.7rem 0 .1rem;padding:0 .5rem;font-weight:600;color:#212529}
nav.sidebar li.sidebar-section ul{padding-left:.5rem}
nav.sidebar a.active{background:#e9f2fc;color:#2780e3;font-weight:600}
main{flex:1;min-width:0;max-width:900px;padding:1.5rem 2.5rem}
nav.toc{width:220px;flex:none;position:sticky;top:2.9rem;padding:1.5rem 1rem;font-size:.85rem}
nav.toc h2{font-size:.9rem;margin:0 0 .4rem} nav.toc ul{list-style:none;padding:0;margin:0} nav.toc li{margin:.2rem 0}
h1.title{margin-bottom:.2rem} [id]{scroll-margin-top:3.5rem} main h2{border-bottom:1px solid #dee2e6;padding-bottom:.2rem;margin-top:2rem}
pre.mermaid{background:#fff;border:1px solid #dee2e6}
pre{background:#f8f9fa;padding:.6rem .8rem;border-radius:4px;overflow-x:auto;font-size:.86rem;line-height:1.45}
code{font-family:SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em} p code,li code,td code{color:#9753b8} a code{color:inherit!important}
.api-entry{border:1px solid #dee2e6;border-radius:6px;padding:.2rem 1rem .6rem;margin:1.2rem 0;box-shadow:0 1px 2px rgba(0,0,0,.05)}
.api-entry .source-link{float:right;font-size:.8rem;margin-top:.6rem} .api-entry .source-link::before{content:"["} .api-entry .source-link::after{content:"]"}
figure.screenshot{margin:1rem 0} figure.screenshot img{max-width:100%;border:1px solid #dee2e6;border-radius:4px} figure.screenshot figcaption{color:#6c757d;font-size:.85rem}
math{font-family:"STIX Two Math","Latin Modern Math","Cambria Math","DejaVu Math TeX Gyre",math;font-size:1.1em} math[display=block]{margin:.8rem 0;font-size:1.3em} .math.block{overflow-x:auto}
.api-entry h3{margin:.5rem 0 .3rem;font-family:SFMono-Regular,Menlo,Consolas,monospace;font-size:1.05rem}
.api-entry blockquote{margin:0} .api-entry blockquote pre{background:#f1f3f5}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem;display:block;max-width:100%;overflow-x:auto} p code,li code,td code{overflow-wrap:anywhere}
.cell-output-display{overflow-x:auto} main img,main svg{max-width:100%;height:auto} th,td{border-bottom:1px solid #dee2e6;padding:.3rem .6rem;text-align:left;vertical-align:top}
.cell-output img{max-width:100%} .cell-output-stderr pre{background:#fff5f5}
footer{color:#6c757d;font-size:.8rem;margin-top:3rem}
@media (max-width:1100px){nav.toc{display:none}}
@media (max-width:700px){nav.sidebar{display:none} main{padding:1rem} .nav-toggle{display:block} .topbar{padding:.45rem .6rem;gap:.5rem}
  body.nav-open nav.sidebar{display:block;position:fixed;top:2.9rem;left:0;bottom:0;width:min(18rem,85vw);max-height:none;background:#fff;z-index:3;box-shadow:2px 0 12px rgba(0,0,0,.2)}}
"""

def pygments_css()->str:
    return HtmlFormatter().get_style_defs('.highlight') if highlight else ''

def link_symbols(body:str, symbols:dict, here:str)->str:
    "Backticked names of documented symbols link to their API entry (nbdev's doclinks)"
    def _link(m):
        tgt = symbols.get(m.group(1))
        if not tgt: return m.group(0)
        href = (f'#{tgt[1]}' if tgt[0] == here else f'{tgt[0]}#{tgt[1]}')
        return f'<a href="{href}">{m.group(0)}</a>'
    parts = re.split(r'(<pre.*?</pre>|<h[1-6][^>]*>.*?</h[1-6]>|<a\b.*?</a>)', body, flags=re.DOTALL)
    return ''.join(p if i % 2 else re.sub(r'<code>([A-Za-z_][\w.]*)(?:\(\))?</code>', _link, p) for i, p in enumerate(parts))

def render(nb:Path, pages:dict, src:dict|None=None)->dict:
    "A notebook as a page: {'name', 'title', 'subtitle', 'body', 'toc', 'api', 'module', 'sections'}; `src`: `source_links`'"
    cells = json.loads(nb.read_text(encoding='utf-8'))['cells']
    title, sub, rest = title_of(cells)
    page, api, mod = Page(pages), [], default_exp(cells)
    page.sources = source_links(mod, src) if mod and src else {}
    page.sections.append([title or nb.stem, '', sub])   # the text before the first heading is searchable too
    body = [page.markdown(rest) if rest else ''] + [cell_html(page, c, api) for c in (cells[1:] if rest is not None else cells)]
    return dict(nb=nb.name, name=page_name(nb), title=title or nb.stem, subtitle=sub, body='\n'.join(b for b in body if b),
                mermaid=page.mermaid, toc=page.toc, api=api, module=mod, sections=page.sections, ids=page.ids, sources=page.sources)

def page_html(p:dict, pages:list, site:dict)->str:
    "A full HTML page: top bar, sidebar with every page, the content and its table of contents"
    side = nav_html(p, pages, site.get('sidebar') or [q['nb'] for q in pages])
    toc = '\n'.join(f'<li><a href="#{a}">{html.escape(re.sub(r"`", "", t))}</a></li>' for t, a in p['toc'])
    sub = f'<div class="description">{page_md_inline(p["subtitle"])}</div>' if p['subtitle'] else ''
    css = ''.join(f'<link rel="stylesheet" href="{html.escape(c)}">' for c in site.get('css', ['styles.css']))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(p['title'])} – {html.escape(site['title'])}</title>
<meta name="description" content="{html.escape(p['subtitle'] or site['description'])}">
<link rel="stylesheet" href="site.css">{css}{MERMAID if p.get('mermaid') else ''}
<script defer src="site.js"></script>
</head><body>
<header class="topbar"><button class="nav-toggle" type="button" aria-controls="sidebar" aria-expanded="false" aria-label="Pages">&#9776;</button>
<a class="site-title" href="index.html">{html.escape(site['title'])}</a>
<div class="search" role="search"><input id="search-input" type="search" placeholder="Search" aria-label="Search the site" autocomplete="off">
<ul id="search-results" class="search-results" role="listbox" hidden></ul></div></header>
<div class="layout">
<nav class="sidebar" id="sidebar" aria-label="pages"><ul>
{side}
</ul></nav>
<main id="content">
<header><h1 class="title">{html.escape(p['title'])}</h1>{sub}</header>{p.get('figure', '')}
<!-- WARNING: THIS FILE WAS AUTOGENERATED from nbs/ by tools/build_docs.py! DO NOT EDIT! -->
{p['body']}
<footer>{html.escape(site.get('copyright', ''))}</footer>
</main>
<nav class="toc" aria-label="on this page">{'<h2>On this page</h2><ul>' + toc + '</ul>' if toc else ''}</nav>
</div></body></html>
"""

# Screenshots the browser tests save in tests/artifacts/, shown at the top of their page when present
SCREENSHOTS = {'workbench.explorer.html': ('explorer.png', 'The explorer in JupyterLab after a query and two slider moves '
                                           '(the screenshot tests/test_browser.py takes)')}

def figure_html(shot:tuple)->str:
    f, alt = shot
    return (f'\n<figure class="screenshot"><img src="images/{f}" alt="{html.escape(alt)}">'
            f'<figcaption>{html.escape(alt)}</figcaption></figure>')

def nav_html(p:dict, pages:list, side:list)->str:
    "The sidebar's items: a link per page, a titled list per chapter section"
    by_nb = {q['nb']: q for q in pages}
    def _li(n):
        q = by_nb[n]; active = ' class="active"' if q['name'] == p['name'] else ''
        return f'<li><a href="{q["name"]}"{active}>{html.escape(q["title"])}</a></li>'
    return '\n'.join(_li(e) if isinstance(e, str) else
                     f'<li class="sidebar-section"><span class="section-title">{html.escape(e["section"])}</span><ul>'
                     + ''.join(_li(n) for n in e['contents']) + '</ul></li>' for e in side)

# Mermaid diagrams, as Quarto draws them (mermaid.js from its CDN when the reader is online; offline the source shows)
MERMAID = ('\n<script type="module">import mermaid from "https://cdn.jsdelivr.net/npm/mermaid@11/dist/mermaid.esm.min.mjs";'
           'mermaid.initialize({startOnLoad: true});</script>')

def page_md_inline(s:str)->str: return MarkdownIt('commonmark').renderInline(s)

def quarto(repo:Path=REPO)->dict:
    "The top-level `_quarto.yml` ({} when there is none)"
    import yaml
    f = repo/'_quarto.yml'
    return (yaml.safe_load(f.read_text(encoding='utf-8')) or {}) if f.exists() else {}

def stylesheets(repo:Path=REPO)->list:
    "The stylesheets `_quarto.yml` names for HTML (`format.html.css`), relative to nbs/ as in Quarto's _proc/"
    css = (((quarto(repo).get('format') or {}).get('html') or {}).get('css')) or ['styles.css']
    return [css] if isinstance(css, str) else list(css)

def quarto_problems(repo:Path=REPO, nbs:Path|None=None)->list:
    "Why nbdev would not use the top-level `_quarto.yml` ([] when it would)"
    top, link = repo/'_quarto.yml', (nbs or repo/'nbs')/'_quarto.yml'
    if not top.exists(): return ['_quarto.yml: missing at the top level']
    if not link.exists() or link.resolve() != top.resolve():
        return [f'{link.relative_to(repo)}: must be a symlink to ../_quarto.yml (nbdev reads <nbs_path>/_quarto.yml)']
    return [f'_quarto.yml: stylesheet {c} not in nbs/' for c in stylesheets(repo) if not (link.parent/c).exists()]

def settings(repo:Path)->dict:
    "title, description, copyright from settings.ini (read as text: no nbdev config lookup)"
    import configparser
    cp = configparser.ConfigParser(interpolation=None); cp.read(repo/'settings.ini', encoding='utf-8')
    d = cp['DEFAULT'] if cp.has_section('DEFAULT') or cp.defaults() else {}
    return dict(title=d.get('title', 'docs'), description=d.get('description', ''), copyright=d.get('copyright', ''),
                git_url=d.get('git_url', ''), branch=d.get('branch', 'main'), lib_path=d.get('lib_path', 'multis'))

def search_index(pages:list)->list:
    "Quarto's `search.json` entries: one per page (its text before the first heading) and per heading or API entry"
    return [dict(objectID=p['name'] + (f'#{a}' if a else ''), href=p['name'] + (f'#{a}' if a else ''), title=p['title'],
                 section='' if not a else re.sub(r'`', '', t), text=re.sub(r'\s+', ' ', x).strip()[:600], crumbs=[p['title']])
            for p in pages for t, a, x in p['sections']]

def build(out:Path, nbs:Path=REPO/'nbs', repo:Path=REPO, shots:Path|None=None)->list:
    "Write the site into `out`; returns the rendered pages. `shots`: the browser tests' screenshots (tests/artifacts/)"
    site = dict(settings(repo), css=stylesheets(repo), sidebar=sidebar(nbs))
    src = dict(repo=repo, **{k: site[k] for k in ('git_url', 'branch', 'lib_path')})
    pages = [render(nb, {}, src) for nb in notebooks(nbs)]
    shots = repo/'tests'/'artifacts' if shots is None else shots
    for p in pages:
        shot = SCREENSHOTS.get(p['name'])
        if shot and (shots/shot[0]).exists():
            (out/'images').mkdir(parents=True, exist_ok=True); shutil.copy(shots/shot[0], out/'images'/shot[0])
            p['figure'] = figure_html(shot)
    symbols = {}
    for p in pages:
        for nm, a in p['api']:
            for n in nm.split(' | '): symbols.setdefault(n, (p['name'], a))
    out.mkdir(parents=True, exist_ok=True)
    for p in pages:
        p['body'] = link_symbols(p['body'], symbols, p['name'])
        (out/p['name']).write_text(page_html(p, pages, site), encoding='utf-8')
    for css in stylesheets(repo):
        if (nbs/css).exists(): shutil.copy(nbs/css, out/css)
    if not (out/'styles.css').exists(): (out/'styles.css').write_text('', encoding='utf-8')
    (out/'site.css').write_text(LAYOUT_CSS + pygments_css(), encoding='utf-8')
    search = json.dumps(search_index(pages), ensure_ascii=False)
    (out/'search.json').write_text(search, encoding='utf-8')
    (out/'search.js').write_text(f'window.SEARCH_INDEX = {search};\n', encoding='utf-8')  # a script loads from file:// too
    shutil.copy(Path(__file__).resolve().parent/'docs_site.js', out/'site.js')
    return pages

# ---------------------------------------------------------------- checks

def module_symbols(py:Path)->set:
    "Public functions and classes a generated module exports (its `__all__`), read without importing it"
    tree = ast.parse(py.read_text(encoding='utf-8'))
    alls = next((ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                 and any(getattr(t, 'id', '') == '__all__' for t in n.targets)), [])
    defs = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    return {a for a in alls if a in defs and not a.startswith('_')}

def check(out:Path, pages:list, repo:Path=REPO)->list:
    "Problems with a built site: missing or empty pages, broken sidebar links, exported symbols without an entry or [source]"
    errs, lib, linked = [], repo/'multis', bool(settings(repo)['git_url'])
    names = {p['name'] for p in pages}
    if 'index.html' not in names: errs.append('no index.html (nbs/index.ipynb)')
    for p in pages:
        f = out/p['name']
        if not f.exists(): errs.append(f'{p["name"]}: not written'); continue
        text = f.read_text(encoding='utf-8')
        if not re.sub(r'<[^>]+>|\s', '', p['body']): errs.append(f'{p["name"]}: empty page')
        for href in re.findall(r'<nav class="sidebar".*?</nav>', text, re.DOTALL)[0:1]:
            for h in re.findall(r'href="([^"#]+)"', href):
                if not (out/h).exists(): errs.append(f'{p["name"]}: broken sidebar link {h}')
        for h in re.findall(r'href="([\w.-]+\.html)#([^"]+)"', text):
            tgt = next((q for q in pages if q['name'] == h[0]), None)
            if tgt is None or h[1] not in tgt['ids']: errs.append(f'{p["name"]}: broken link {h[0]}#{h[1]}')
        if p['module']:
            py = lib/(p['module'].replace('.', '/') + '.py')
            if not py.exists(): errs.append(f'{p["name"]}: module {p["module"]} has no {py.relative_to(repo)}'); continue
            documented = {n for nm, _ in p['api'] for n in nm.split(' | ')}
            for s in sorted(module_symbols(py) - documented): errs.append(f'{p["name"]}: {p["module"]}.{s} has no API entry')
            if linked:
                for s in sorted(module_symbols(py) & documented - set(p['sources'])):
                    errs.append(f'{p["name"]}: {p["module"]}.{s} has no [source] link')
    return errs

def proc_nbs(repo:Path=REPO, n_workers:int=2)->Path:
    "nbdev's `_pre_docs` (what `nbdev_docs` runs before Quarto) minus its Quarto install: returns `_proc/`"
    import os
    from unittest.mock import patch as mock_patch
    os.chdir(repo)  # nbdev finds settings.ini from the working directory
    import nbdev.quarto as q
    side = repo/'nbs'/'sidebar.yml'
    kept = side.read_text(encoding='utf-8') if side.exists() else None
    try:
        with mock_patch.object(q, '_ensure_quarto', lambda: None):  # it would download Quarto and run `sudo dpkg -i`
            return q._pre_docs(n_workers=n_workers, force=True)[0]
    finally:  # `force` also makes nbdev rewrite the sidebar flat, ignoring `custom_sidebar`: keep the chapters' one
        if kept is not None: side.write_text(kept, encoding='utf-8')

def _first_error(e:BaseException)->str:
    "The notebook and cell, and the error under it, from a `proc_nbs` failure (its cause is a worker's traceback)"
    head = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    tb = str(e.__cause__ or '')
    errs = re.findall(r'^((?:\w+\.)*\w+(?:Error|Exception)\b.*)$', tb, re.M)
    return head + (f' -> {errs[-1]}' if errs else '')

def main_proc(repo:Path=REPO)->None:
    "`--proc`: run nbdev's notebook processing; exit 1 naming the failing notebook cell, or a stale `_quarto.yml`"
    try: cache = proc_nbs(repo)
    except Exception as e: sys.exit(f'nbdev_proc_nbs failed: {_first_error(e)}')
    top, used = repo/'_quarto.yml', cache/'_quarto.yml'
    if not used.exists() or used.read_bytes() != top.read_bytes():
        sys.exit('nbdev_proc_nbs: _proc/_quarto.yml is not the top-level _quarto.yml')
    print(f'nbdev_proc_nbs: {len(list(cache.glob("*.ipynb")))} notebooks processed into {cache.name}/ with the top-level _quarto.yml')

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', type=Path, help='output folder (default: _docs, or a temp dir with --check)')
    ap.add_argument('--check', action='store_true', help='build and exit 1 on a missing/empty page, broken link or undocumented export')
    ap.add_argument('--sidebar', action='store_true', help='write nbs/sidebar.yml: the pages grouped by chapter')
    ap.add_argument('--proc', action='store_true', help="run nbdev's proc_nbs (what nbdev_docs runs before Quarto); exit 1 on an error")
    a = ap.parse_args(argv)
    if a.proc: return main_proc()
    if a.sidebar:
        (REPO/'nbs'/'sidebar.yml').write_text(sidebar_yml(REPO/'nbs'), encoding='utf-8')
        return print('nbs/sidebar.yml: ' + ', '.join(e if isinstance(e, str) else e['section'] for e in sidebar(REPO/'nbs')))
    with tempfile.TemporaryDirectory() as tmp:
        out = a.out or (Path(tmp) if a.check else REPO/'_docs')
        pages = build(out)
        mods = [p for p in pages if p['module']]
        if a.check:
            errs = check(out, pages) + quarto_problems() + sidebar_problems() + subtitle_problems()
            for e in errs: print(e, file=sys.stderr)
            if errs: sys.exit(f'docs check failed: {len(errs)} problem(s)')
        print(f'{len(pages)} pages ({len(mods)} modules, {sum(len(p["api"]) for p in pages)} API entries) -> {out}')

if __name__ == '__main__': main()
