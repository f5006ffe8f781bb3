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
    "CI's last step is the README's test command; before it, only Debian's Chromium is installed for the browser test"
    ci = [l for l in (REPO/'.ci'/'run').read_text().splitlines() if l and not l.startswith(('#', 'set ', 'cd '))]
    assert ci[-1] == _readme_commands()[1].strip()
    assert all('apt-get' in l or l.startswith(('if ', 'fi')) for l in ci[:-1]), ci[:-1]

def test_test_script_order():
    s = (REPO/'tools'/'test.sh').read_text()
    steps = [s.index(k) for k in ('nbdev_clean', 'nbdev_export', 'nbdev_test', 'pytest', 'ruff check multis --select F821,F811')]
    assert steps == sorted(steps)
    assert 'set -euo pipefail' in s

def test_pinned_nbdev_set():
    cfg = configparser.ConfigParser(delimiters=['=']); cfg.read(REPO/'settings.ini')
    dev = cfg['DEFAULT']['dev_requirements'].split()
    for pin in ('nbdev==2.4.7', 'fastcore>=1.8,<1.9', 'execnb>=0.1.16,<0.2'): assert pin in dev

def test_every_notebook_exports_a_module():
    for nb in sorted((REPO/'nbs').glob('[0-9]*.ipynb')):
        m = re.search(r'#\|\s*default_exp\s+(\w+)', nb.read_text())
        assert m, f'{nb.name} has no default_exp'
        assert (REPO/'multis'/f'{m.group(1)}.py').exists(), nb.name

def test_readme_is_generated_from_index():
    import subprocess, sys
    r = subprocess.run([sys.executable, str(REPO/'tools'/'make_readme.py'), '--check'], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
