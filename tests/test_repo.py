"The repository keeps its promises: the README's two commands, CI calling the test command, the pinned nbdev set"
import configparser, re
from pathlib import Path
from conftest import REPO

def _readme_commands():
    text = (REPO/'README.md').read_text()
    return re.findall(r'```(?:sh|bash)\n(.*?)\n```', text, re.S)

def test_readme_has_two_setup_commands():
    cmds = _readme_commands()
    assert len(cmds) >= 2
    main, tests = cmds[0].strip(), cmds[1].strip()
    assert '\n' not in main and '\n' not in tests
    assert 'multis index data --scope kb' in main and main.endswith('multis chat')
    assert 'tools/test.sh' in tests and '.[dev]' in tests

def test_ci_runs_the_readme_test_command():
    "CI's last step is the README's test command; before it, only Debian packages are installed (nothing of Python's)"
    ci = [l for l in (REPO/'.ci'/'run').read_text().splitlines() if l and not l.startswith(('#', 'set ', 'cd '))]
    assert ci[-1] == _readme_commands()[1].strip()
    before = '\n'.join(ci[:-1])
    assert 'apt-get install' in before and not re.search(r'\b(pip3?|python3?|venv|tools/)', before), ci[:-1]

def test_test_script_order():
    s = (REPO/'tools'/'test.sh').read_text()
    steps = [s.index(k) for k in ('\nnbdev_clean', '\nnbdev_export', '\npython tools/build_docs.py --proc', '\nnbdev_test',
                                  '\npython -m pytest', '\nruff check multis --select F821,F811')]
    assert steps == sorted(steps)
    assert 'set -euo pipefail' in s

def test_pinned_nbdev_set():
    cfg = configparser.ConfigParser(delimiters=['=']); cfg.read(REPO/'settings.ini')
    dev = cfg['DEFAULT']['dev_requirements'].split()
    for pin in ('nbdev==2.4.7', 'fastcore>=1.8,<1.9', 'execnb>=0.1.16,<0.2'): assert pin in dev

def test_every_notebook_exports_a_module():
    "Each numbered notebook exports its module (`21_retrieval.store` -> multis/retrieval/store.py); the architecture page is prose"
    for nb in sorted((REPO/'nbs').glob('[0-9]*.ipynb')):
        m = re.search(r'#\|\s*default_exp\s+([\w.]+)', nb.read_text())
        if nb.name == '00_architecture.ipynb': assert m is None; continue
        assert m, f'{nb.name} has no default_exp'
        assert (REPO/'multis'/(m.group(1).replace('.', '/') + '.py')).exists(), nb.name
        assert nb.stem.split('_', 1)[1] == m.group(1), f'{nb.name} exports {m.group(1)}'

def test_readme_is_generated_from_index():
    import subprocess, sys
    r = subprocess.run([sys.executable, str(REPO/'tools'/'make_readme.py'), '--check'], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr

# ---- the workbench (issue 14, item 24): `pip install -e ".[explorer]"` is enough for Run All, from the venv

WORKBENCH = ('90_workbench.explorer.ipynb', '91_workbench.experiments.ipynb', '92_workbench.variants.ipynb', '93_workbench.locomo.ipynb')

def _settings()->dict:
    cfg = configparser.ConfigParser(delimiters=['='], interpolation=None); cfg.read(REPO/'settings.ini')
    return cfg['DEFAULT']

def _name(req:str)->str:
    from packaging.requirements import Requirement
    return Requirement(req).name.lower().replace('_', '-')

def _imports(src:str, deep:bool=True)->set:
    "Top-level names of the modules `src` imports: anywhere (a cell runs whole), or only at module level (a library's lazy imports belong to other extras)"
    import ast
    tree = ast.parse('\n'.join(l for l in src.splitlines() if not l.lstrip().startswith(('%', '!'))))
    res = set()
    for n in (ast.walk(tree) if deep else tree.body):
        if isinstance(n, ast.Import): res |= {a.name.split('.')[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module: res.add(n.module.split('.')[0])
    return res

def _multis_imports(src:str, pkg:str)->list:
    "The multis modules `src` imports, relative imports (`from ..core import`) resolved against its package `pkg`"
    res = re.findall(r'^\s*(?:from|import) (multis(?:\.\w+)*)', src, re.M)
    for dots, rest in re.findall(r'^\s*from (\.+)([\w.]*) import', src, re.M):
        base = pkg.split('.')[:len(pkg.split('.')) - (len(dots) - 1)]
        res.append('.'.join(base + ([rest] if rest else [])))
    return res

def _run_all_imports()->set:
    "What Run All of the workbench notebooks imports, following the multis modules they import"
    import json, sys
    todo = [(''.join(c['source']), True, 'multis') for nb in WORKBENCH for c in json.loads((REPO/'nbs'/nb).read_text())['cells']
            if c['cell_type'] == 'code']
    mods, seen = set(), set()
    while todo:
        src, deep, pkg = todo.pop()
        mods |= _imports(src, deep)
        for mod in _multis_imports(src, pkg):
            f = REPO/(mod.replace('.', '/') + '.py')
            if f not in seen and f.exists(): seen.add(f); todo.append((f.read_text(), False, '.'.join(mod.split('.')[:-1])))
    return {m for m in mods if m not in sys.stdlib_module_names and m != 'multis'}

def _closure(reqs:list)->set:
    "Distributions the requirements install: themselves and, from the installed metadata, what they require"
    from importlib import metadata
    from packaging.requirements import Requirement
    todo, res = [_name(r) for r in reqs], set()
    while todo:
        n = todo.pop()
        if n in res: continue
        res.add(n)
        try: reqs = metadata.requires(n) or []
        except metadata.PackageNotFoundError: continue
        for r in map(Requirement, reqs):
            if r.marker is None or r.marker.evaluate({'extra': ''}): todo.append(_name(str(r)))
    return res

def test_explorer_extra_installs_what_run_all_imports():
    from importlib import metadata
    s = _settings()
    have = _closure(s['requirements'].split() + s['explorer_requirements'].split())
    dists = metadata.packages_distributions()
    mods = _run_all_imports()
    assert {'nbdev', 'ipywidgets', 'pandas', 'matplotlib', 'fastcore'} <= mods
    missing = {m: dists.get(m) for m in mods if not any(_name(d) in have for d in dists.get(m, [m]))}
    assert not missing, f'the explorer extra lacks what the workbench notebooks import: {missing}'
    assert {'nbdev', 'execnb', 'jupyterlab', 'numpy'} <= {_name(r) for r in s['explorer_requirements'].split()}

def test_explorer_pins_agree_with_dev_requirements():
    s = _settings()
    pins = lambda key: {_name(r): r for r in s[key].split()}
    dev, explorer, base = pins('dev_requirements'), pins('explorer_requirements'), pins('requirements')
    for n in ('nbdev', 'fastcore', 'execnb'): assert explorer[n] == dev[n], n
    assert explorer['fastcore'] == base['fastcore']

def test_readme_workbench_command_uses_the_venv():
    cmds = [c.strip() for c in _readme_commands() if '[explorer]' in c]
    assert cmds == ['.venv/bin/pip install -q -e ".[explorer]" && .venv/bin/jupyter lab nbs/90_workbench.explorer.ipynb']
    text = (REPO/'README.md').read_text()
    assert not re.search(r'(?<![/\w])jupyter lab', text), 'every jupyter in the README is the venv\'s'
    assert 'MULTIS_EVAL_DIR' in text

def test_readme_names_the_chapters_and_links_the_architecture_page():
    "The README's notebook links point into nbs/ (index.ipynb's are relative to nbs/, as Quarto reads them)"
    text = (REPO/'README.md').read_text()
    links = re.findall(r'\]\(([^)\s]+\.ipynb)\)', text)
    assert 'nbs/00_architecture.ipynb' in links and all((REPO/l).exists() for l in links), links
    for ch in ('documents', 'retrieval', 'answer', 'memory', 'governance', 'chat', 'platforms', 'run'): assert f'`{ch}`' in text
    assert 'from multis.documents.parsers import parse_file' in text and 'from multis.retrieval.store import Store' in text
