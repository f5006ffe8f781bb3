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
