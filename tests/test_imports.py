"The package's import graph: no cycles, every module imports alone, no runtime module imports `multis.testing`, chapter arrows hold"
import ast, json, subprocess, sys
from pathlib import Path
import pytest
from conftest import REPO

PKG = REPO/'multis'

# STYLE.md section 1: run -> platforms -> chat -> answer / memory / governance -> retrieval / documents -> core.
# config and core at the bottom, cli at the top. A module may import its own level or lower, never higher.
LEVELS = {'multis': 0, 'core': 0, 'config': 0, 'retrieval': 1, 'documents': 1, 'answer': 2, 'memory': 2,
          'governance': 2, 'chat': 3, 'platforms': 4, 'run': 5, 'workbench': 5, 'cli': 6, 'bot': 6}

def module_name(path:Path)->str:
    "`multis/a/b.py` -> 'multis.a.b'; `multis/a/__init__.py` -> 'multis.a'"
    parts = list(path.relative_to(REPO).with_suffix('').parts)
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)

def modules()->dict:
    "Every module of the package (but the generated `_modidx`), by name"
    return {module_name(p): p for p in sorted(PKG.rglob('*.py')) if p.name != '_modidx.py'}

def _resolve(mod:str, is_pkg:bool, node:ast.ImportFrom)->str:
    "The absolute module an `ImportFrom` names"
    if not node.level: return node.module or ''
    base = mod.split('.') if is_pkg else mod.split('.')[:-1]
    base = base[:len(base) - node.level + 1]
    return '.'.join(base + ([node.module] if node.module else []))

def imports_of(mod:str, path:Path, known:dict)->set:
    "The package modules `mod` imports anywhere in its file, lazily inside functions too"
    found, is_pkg = set(), path.name == '__init__.py'
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
        if isinstance(node, ast.Import): names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(mod, is_pkg, node)
            names = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names]
        else: continue
        for n in names:
            while n and n not in known: n = n.rpartition('.')[0]   # `import multis.a.b as x`: the module itself
            if n and n != mod: found.add(n)
    return found

def graph()->dict:
    known = modules()
    return {m: imports_of(m, p, known) for m, p in known.items()}

def cycles(g:dict)->list:
    "The strongly connected components of more than one module (Tarjan), each sorted"
    index, low, stack, on, res, n = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in g.get(v, ()):
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: res.append(tuple(sorted(comp)))
    for v in sorted(g):
        if v not in index: visit(v)
    return sorted(res)

def chapter(mod:str)->str:
    parts = mod.split('.')
    return parts[1] if len(parts) > 1 else 'multis'

def arrow_violations(g:dict)->list:
    "(importer, imported) pairs where a lower chapter imports a higher one (`testing` is outside the arrows)"
    return sorted((a, b) for a, bs in g.items() for b in bs
                  if 'testing' not in (chapter(a), chapter(b)) and LEVELS[chapter(a)] < LEVELS[chapter(b)])

# ---- the graph builder itself

def test_graph_sees_relative_absolute_and_lazy_imports(tmp_path):
    known = {'multis.a': None, 'multis.a.x': None, 'multis.b': None, 'multis.c': None, 'multis.a.y': None}
    f = tmp_path/'y.py'
    f.write_text("from .x import f\nfrom ..b import g\nimport json\ndef h():\n    import multis.c as c\n    from . import x\n")
    assert imports_of('multis.a.y', f, known) == {'multis.a.x', 'multis.b', 'multis.c'}
    assert cycles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [('a', 'b', 'c')]
    assert arrow_violations({'multis.core': {'multis.cli'}, 'multis.cli': {'multis.core'},
                             'multis.testing.x': {'multis.cli'}}) == [('multis.core', 'multis.cli')]

def test_every_module_has_a_chapter():
    assert {chapter(m) for m in modules()} - set(LEVELS) - {'testing', '_modidx'} == set()

# ---- cycles

def test_no_import_cycles():
    assert cycles(graph()) == [], "import cycles"

# ---- chapter arrows

def test_chapter_arrows_hold():
    assert arrow_violations(graph()) == [], "a lower chapter imports a higher one"

def test_retrieval_embed_no_longer_imports_answer():
    assert not any(chapter(b) == 'answer' for b in graph()['multis.retrieval.embed'])

# ---- testing stays out of the runtime

def test_no_runtime_module_imports_testing():
    bad = sorted((a, b) for a, bs in graph().items() for b in bs if chapter(a) != 'testing' and chapter(b) == 'testing')
    assert bad == []

def test_fake_provider_is_not_a_runtime_provider():
    from multis.answer.llm import PROVIDERS
    from multis.retrieval.embed import EMBEDDERS
    assert set(PROVIDERS) == {'anthropic', 'openai', 'ollama'} and set(EMBEDDERS) == {'local', 'ollama', 'openai', 'hash'}

# ---- each module alone

LONER = """
import importlib, json, sys
failed = {}
for m in json.loads(sys.argv[1]):
    for k in [k for k in sys.modules if k == 'multis' or k.startswith('multis.')]: del sys.modules[k]
    try: importlib.import_module(m)
    except Exception as e: failed[m] = f"{type(e).__name__}: {e}"
print(json.dumps(failed))
"""

def failed_alone()->dict:
    "Module -> the error importing it alone (fresh `multis` modules for each), for every module that fails"
    p = subprocess.run([sys.executable, '-c', LONER, json.dumps(sorted(modules()))], capture_output=True, text=True,
                       timeout=300, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])

def test_each_module_imports_alone_in_a_fresh_interpreter():
    assert failed_alone() == {}
