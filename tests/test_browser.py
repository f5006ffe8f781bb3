"""Browser test of the explorer notebook: JupyterLab on 127.0.0.1, Debian's Chromium driven by Playwright.

Follows the README's workbench command from a fresh venv (`pip install -q -e ".[explorer]"` into a new virtual
environment, then its JupyterLab), copies nbs/90_workbench.explorer.ipynb and data/ into a temporary folder, serves it,
runs all cells, types a query (keyword search: the demo uses no embedder unless config.json names a real one) and
moves a BM25 slider; then loads SciFact's train judgements from ../shared/eval/scifact (a tiny BEIR folder written on
the spot when it is absent), picks a judged query, moves a slider and sees its nDCG@10 change, pins the settings as A
and compares, and exports the runs. Screenshots go to tests/artifacts/ (explorer.png: the comparison).
Never downloads a browser: it uses the system's `chromium` (`apt-get install chromium`) and skips without it.
"""
import json, os, re, secrets, shutil, socket, subprocess, sys, time, urllib.request
from pathlib import Path
import pytest
try: from playwright.sync_api import TimeoutError as PWTimeout
except ImportError: PWTimeout = Exception

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(__file__).resolve().parent/'artifacts'
NB = '90_workbench.explorer.ipynb'
SCIFACT = REPO.parent/'shared'/'eval'/'scifact'
CHROME_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
               '--disable-sync', '--no-first-run', '--disable-quic']

def chromium_path()->str|None:
    "The system Chromium, if installed"
    found = shutil.which('chromium') or shutil.which('chromium-browser')
    return found or ('/usr/bin/chromium' if Path('/usr/bin/chromium').exists() else None)

def _need():
    "Skip with the reason when something the test needs is missing"
    exe = chromium_path()
    if exe is None: pytest.skip('Chromium is not installed (Debian: apt-get install chromium); .ci/run installs it')
    for mod, pkg in (('playwright.sync_api', 'playwright'), ('jupyterlab', 'jupyterlab'), ('ipywidgets', 'ipywidgets')):
        try: __import__(mod)
        except ImportError: pytest.skip(f"{pkg} is not installed (pip install {pkg}; it is a dev requirement)")
    return exe

def free_port()->int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def make_root(tmp:Path)->Path:
    "A folder with the explorer notebook (its nbdev_export cell left out) in nbs/ and a copy of data/"
    root = tmp/'root'; (root/'nbs').mkdir(parents=True)
    shutil.copytree(REPO/'data', root/'data')
    nb = json.loads((REPO/'nbs'/NB).read_text())
    nb['cells'] = [c for c in nb['cells'] if 'nbdev_export(' not in ''.join(c['source'])]
    (root/'nbs'/NB).write_text(json.dumps(nb))
    return root

def lab_env(tmp:Path, python:str=sys.executable)->dict:
    "Environment isolating JupyterLab's settings, with the news notification off"
    env = {**os.environ, 'MULTIS_HOME': str(tmp/'home'), 'JUPYTER_CONFIG_DIR': str(tmp/'jcfg'),
           'JUPYTER_RUNTIME_DIR': str(tmp/'jrun'), 'JUPYTERLAB_SETTINGS_DIR': str(tmp/'jset'),
           'JUPYTERLAB_WORKSPACES_DIR': str(tmp/'jws'), 'PATH': f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    note = tmp/'jset'/'@jupyterlab'/'apputils-extension'/'notification.jupyterlab-settings'
    note.parent.mkdir(parents=True); note.write_text(json.dumps({'fetchNews': 'false', 'checkForUpdates': False}))
    tracker = tmp/'jset'/'@jupyterlab'/'notebook-extension'/'tracker.jupyterlab-settings'
    tracker.parent.mkdir(parents=True); tracker.write_text(json.dumps({'windowingMode': 'none'}))  # every cell in the DOM
    return env

def readme_venv(tmp:Path)->Path:
    "A fresh venv with the README's workbench install command run into it (its `.venv/` made this one); its python"
    cmd = next(l.strip() for l in (REPO/'README.md').read_text().splitlines() if '[explorer]' in l and 'pip install' in l)
    install = cmd.split(' && ')[0]
    assert install == '.venv/bin/pip install -q -e ".[explorer]"', install
    venv = tmp/'venv'
    subprocess.run([shutil.which('python3') or sys.executable, '-m', 'venv', str(venv)], check=True, timeout=120)
    r = subprocess.run(install.replace('.venv/', f'{venv}/'), shell=True, cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, f"the README's install failed:\n{r.stderr[-3000:]}"
    return venv/'bin'/'python'

def start_lab(root:Path, tmp:Path, port:int, token:str, python:str=sys.executable):
    "JupyterLab (of `python`'s environment) serving root on 127.0.0.1:port, once it answers (60 s at most)"
    log = open(tmp/'lab.log', 'w')
    proc = subprocess.Popen([python, '-m', 'jupyterlab', '--no-browser', '--ip=127.0.0.1', f'--port={port}',
                             f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={root}', '--LabApp.extension_manager=readonly',
                             *(['--allow-root'] if os.geteuid() == 0 else [])],
                            env=lab_env(tmp, python), stdout=log, stderr=subprocess.STDOUT, cwd=root)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None: break
        try:
            with urllib.request.urlopen(f'http://127.0.0.1:{port}/api/status?token={token}', timeout=2) as r:
                if r.status == 200: return proc
        except OSError: time.sleep(0.3)
    stop(proc)
    pytest.fail(f"JupyterLab did not start in 60 s:\n{(tmp/'lab.log').read_text()[-2000:]}")

def stop(proc):
    proc.terminate()
    try: proc.wait(10)
    except subprocess.TimeoutExpired: proc.kill(); proc.wait(5)

def run_all(page):
    "Once the kernel is idle, Run > Run All Cells from the menu bar until the explorer shows (twice at most)"
    page.locator('.jp-StatusBar-TextItem', has_text='| Idle').first.wait_for(timeout=30_000)
    for attempt in range(2):
        page.keyboard.press('Escape')   # close any dialog or menu left open
        page.locator('.lm-MenuBar-itemLabel', has_text='Run').first.click()
        page.locator('.lm-Menu-itemLabel', has_text='Run All Cells').first.click()
        try: return page.locator('.multis-query input').first.wait_for(timeout=90_000)
        except PWTimeout:
            if attempt: raise

def results_text(page)->str: return page.locator('.multis-results').inner_text()

def move_slider(page, cls:str, presses:int=5, key:str='ArrowRight'):
    "Press an arrow key on a slider's handle"
    handle = page.locator(f'.{cls} .noUi-handle').first
    handle.focus()
    for _ in range(presses): handle.press(key)

def shot(page, name:str):
    "Save a screenshot to tests/artifacts/"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS/name))

def write_tiny_beir(d:Path)->Path:
    "A BEIR folder whose one judged query ranks its relevant document first only when titles weigh more"
    (d/'qrels').mkdir(parents=True)
    docs = {'d1': ('Tomato watering', 'How often plants need it.'), 'd2': ('Allotment diary', 'Tomato watering again.'),
            'd3': ('Bread', 'A slow rise makes better bread.'), 'd4': ('Roses', 'Prune roses in spring.')}
    (d/'corpus.jsonl').write_text('\n'.join(json.dumps({'_id': k, 'title': t, 'text': x}) for k, (t, x) in docs.items()))
    (d/'queries.jsonl').write_text(json.dumps({'_id': 'q1', 'text': 'tomato watering'}))
    (d/'qrels'/'train.tsv').write_text('query-id\tcorpus-id\tscore\nq1\td1\t1\n')
    return d

def judged_query(folder:Path)->tuple:
    "(label in the picker, id) of the train query whose nDCG@10 changes most when the name weight goes up by 1 from its default"
    from multis.retrieval.ranking import DEFAULTS, load_beir, ndcg_at_k
    from multis.retrieval.evaluate import beir_store, search_fn
    corpus, queries, qrels = load_beir(folder, 'train')
    with beir_store(corpus) as st:
        n = DEFAULTS['bm25_weights'][0]
        a, b = search_fn(st, bm25_weights=(n, 1.5, 0.5)), search_fn(st, bm25_weights=(n + 1, 1.5, 0.5))  # the demo moved content to 1.5
        change = {q: abs(ndcg_at_k(a(queries[q], 10), qrels[q]) - ndcg_at_k(b(queries[q], 10), qrels[q]))
                  for q in queries if any(g > 0 for g in qrels[q].values())}
        q = max(change, key=lambda q: (round(change[q], 6), -list(queries).index(q)))
        assert change[q] > 0.05, change[q]
    return f"{q}: {queries[q][:80]}", q

def ndcg_shown(page)->str:
    "The nDCG@10 figures of the metrics line"
    return ' '.join(re.findall(r'nDCG@10 [0-9.]+', page.locator('.multis-metrics').inner_text()))

def wait_changed(page, selector:str, before:str, timeout:int=30_000):
    page.wait_for_function('([s, b]) => document.querySelector(s).innerText !== b', arg=[selector, before], timeout=timeout)

def demo(page):
    "The sample store: keyword search, the table changes when a BM25 slider moves"
    query = page.locator('.multis-query input').first
    query.fill('water garden')
    page.locator('.multis-results table').first.wait_for(timeout=20_000)
    before = results_text(page)
    assert 'rank' in before and 'bm25' in before and 'vector' not in before, before   # no embedder configured: BM25
    assert 'score = bm25 + activation weight × activation' in page.locator('.multis-help').inner_text()
    move_slider(page, 'multis-bm25-content')
    wait_changed(page, '.multis-results', before)
    shot(page, 'explorer-demo.png')

def research(page, folder:Path, label:str, root:Path):
    "Load the judgements, pick a judged query, move a slider, pin A and compare, export"
    page.locator('.multis-load input').first.fill(str(folder))
    page.locator('.multis-load-button').first.click()
    page.wait_for_function('() => document.querySelector(".multis-status").innerText.startsWith("loaded")', timeout=180_000)
    page.locator('.multis-judged select').first.select_option(label=label)
    page.wait_for_function('() => /nDCG@10/.test(document.querySelector(".multis-metrics").innerText)', timeout=30_000)
    assert '✓' in results_text(page)                                  # the judged-relevant hits are marked
    before = ndcg_shown(page)
    move_slider(page, 'multis-bm25-name', presses=10)                # name weight +1 (3 -> 4 at the defaults)
    page.wait_for_function('b => (document.querySelector(".multis-metrics").innerText.match(/nDCG@10 [0-9.]+/) || [""])[0] !== b',
                           arg=before, timeout=30_000)
    assert ndcg_shown(page) != before
    page.locator('.multis-pin').first.click()                         # A: name weight 4
    page.wait_for_function('() => document.querySelector(".multis-pin").innerText.includes("unpin")', timeout=30_000)
    move_slider(page, 'multis-bm25-name', presses=10, key='ArrowLeft')  # B: back to 3
    page.wait_for_function('() => /▲|▼/.test(document.querySelector(".multis-results").innerText)', timeout=30_000)
    metrics = page.locator('.multis-metrics').inner_text()
    assert 'A: nDCG@10' in metrics and 'B: nDCG@10' in metrics, metrics
    assert 'A: pinned' in page.locator('.multis-results-a').inner_text()
    page.locator('.multis-query').first.evaluate('e => e.scrollIntoView()')   # the whole widget from its top
    shot(page, 'explorer.png')
    page.locator('.multis-export').first.click()
    page.wait_for_function('() => document.querySelector(".multis-status").innerText.startsWith("exported")', timeout=300_000)
    assert {'A.trec', 'B.trec', 'A.csv', 'B.csv'} <= {p.name for p in (root/'nbs'/'runs').iterdir()}
    line = (root/'nbs'/'runs'/'A.trec').read_text().splitlines()[0].split()
    assert line[1] == 'Q0' and line[3] == '1' and line[5] == 'A', line
    page.locator('.multis-query').first.evaluate('e => e.scrollIntoView()')
    shot(page, 'explorer-export.png')

def test_explorer_in_jupyterlab(tmp_path):
    exe = _need()
    from playwright.sync_api import sync_playwright
    folder = SCIFACT if SCIFACT.is_dir() else write_tiny_beir(tmp_path/'tiny-beir')
    label, _ = judged_query(folder)
    python = readme_venv(tmp_path)
    root, port, token = make_root(tmp_path), free_port(), secrets.token_hex(16)
    proc = start_lab(root, tmp_path, port, token, str(python))
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=CHROME_ARGS, timeout=30_000)
            try:
                page = browser.new_page(viewport={'width': 1400, 'height': 1000})
                page.set_default_timeout(30_000)
                page.goto(f'http://127.0.0.1:{port}/lab/tree/nbs/{NB}?token={token}')
                page.locator('.jp-Notebook .jp-Cell').first.wait_for()
                try:
                    run_all(page)
                    demo(page)
                    research(page, folder, label, root)
                except Exception: shot(page, 'explorer-failed.png'); raise
            finally: browser.close()
    finally: stop(proc)
