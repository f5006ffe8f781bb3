"""The seams of issue 15, checked on the package as generated: SQL only in retrieval, one `main`, classes complete on
import, platforms named only by their own modules, and the notebook rhythm of STYLE.md"""
import ast, json, re, subprocess, sys
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO/'multis'
MODULES = sorted(p for p in PKG.rglob('*.py') if p.name != '_modidx.py')

def rel(p): return p.relative_to(REPO).as_posix()

SQL_CALL = re.compile(r'\.(execute|executemany|executescript|_sql)\(|\bsqlite3\.connect\(|\.conn\.')

def test_no_sql_outside_retrieval():
    "Only `multis/retrieval/` runs SQL or holds a database connection"
    found = [f"{rel(p)}:{i}: {l.strip()}" for p in MODULES if 'retrieval' not in p.parts
             for i, l in enumerate(p.read_text().splitlines(), 1)
             if SQL_CALL.search(l) and 'Connection' not in l and 'self.conn' not in l]
    assert found == []

def test_sql_check_sees_a_call():
    assert SQL_CALL.search("    store._sql('DELETE FROM chunks')") and SQL_CALL.search('con = sqlite3.connect(p)')

def test_one_main():
    "`multis.cli:main` is the only entry point"
    mains = [rel(p) for p in MODULES if re.search(r'^def main\(', p.read_text(), re.M)]
    assert mains == ['multis/cli.py']

CHECK_COMPLETE = """
from multis.retrieval.store import Store
from multis.retrieval.contract import contract_members
st = Store(':memory:')
missing = [m for m in contract_members() if not hasattr(st, m)]
assert not missing, missing
import multis.governance.rules as r
assert all(hasattr(r.Governance, m) for m in ('check', 'run', 'read', 'check_path', 'check_file')), 'Governance incomplete'
print('complete')
"""

def test_classes_are_complete_on_import():
    "Importing the store or the governance rules alone gives the whole class (no method arrives from a later import)"
    r = subprocess.run([sys.executable, '-c', CHECK_COMPLETE], capture_output=True, text=True)
    assert r.stdout.strip() == 'complete', r.stderr

# --- notebook rhythm (STYLE.md section 3): size, one thing per exported cell, short prose

NBS = sorted(p for p in (REPO/'nbs').glob('*.ipynb'))
PAGES = ('index.ipynb', '00_architecture.ipynb')   # documentation pages, not modules

def rhythm(p:Path)->dict:
    "Exported non-blank lines, exported cells with 3+ top-level definitions, prose cells over 150 words"
    lines, multi, prose = 0, [], []
    for i, c in enumerate(json.loads(p.read_text())['cells']):
        s = ''.join(c['source'])
        if c['cell_type'] == 'code' and s.lstrip().startswith('#| export'):
            lines += sum(1 for l in s.splitlines() if l.strip() and not l.startswith('#|'))
            defs = [b for b in ast.parse(s).body if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
            if len(defs) >= 3: multi.append(i)
        if c['cell_type'] == 'markdown' and p.name not in PAGES and len(s.split()) > 150: prose.append(i)
    return dict(lines=lines, multi=multi, prose=prose)

@pytest.mark.parametrize('nb', NBS, ids=lambda p: p.stem)
def test_notebook_rhythm(nb):
    r = rhythm(nb)
    assert r['lines'] <= 400, f"{nb.name}: {r['lines']} exported lines; split it (STYLE.md: about 400)"
    assert r['multi'] == [], f"{nb.name}: exported cells {r['multi']} define 3 or more things"
    assert r['prose'] == [], f"{nb.name}: prose cells {r['prose']} run over 150 words"

def test_rhythm_sees_a_wall(tmp_path):
    cell = lambda t, s: {'cell_type': t, 'source': [s], 'metadata': {}}
    nb = tmp_path/'x.ipynb'
    nb.write_text(json.dumps({'cells': [cell('markdown', 'word ' * 151), cell('code', '#| export\ndef a(): pass\ndef b(): pass\nclass C: pass')]}))
    assert rhythm(nb) == dict(lines=3, multi=[1], prose=[0])

# --- platforms are named only by their own modules

PLATFORM_FREE = ['multis/config.py', 'multis/chat/router.py', 'multis/chat/commands.py', 'multis/chat/platform.py',
                 'multis/run/daemon.py', 'multis/run/onboarding.py']

def _code_words(p:Path)->str:
    "The module's code without its docstrings and comments"
    tree = ast.parse(p.read_text())
    for n in ast.walk(tree):
        body = getattr(n, 'body', None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], 'value', None), ast.Constant):
            body[0].value.value = ''
    return ast.unparse(tree)

@pytest.mark.parametrize('mod', PLATFORM_FREE)
def test_router_daemon_config_and_init_name_no_platform(mod):
    "Adding a platform touches its own files and one registration, never the router, the daemon, config or init"
    code = _code_words(REPO/mod).lower()
    assert not re.search(r'telegram|beeper', code), f"{mod} names a platform"
