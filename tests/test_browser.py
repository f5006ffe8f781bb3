"""Browser test of the explorer notebook: JupyterLab on 127.0.0.1, Debian's Chromium driven by Playwright.

Copies nbs/90_workbench.explorer.ipynb and data/ into a temporary folder, serves it with JupyterLab, runs all cells, types a
query, moves a BM25 slider, then the vector weight slider, and checks that the results table changed each time. The
screenshot goes to tests/artifacts/explorer.png.
Never downloads a browser: it uses the system's `chromium` (`apt-get install chromium`) and skips without it.
"""
import json, os, secrets, shutil, socket, subprocess, sys, time, urllib.request
from pathlib import Path
import pytest
try: from playwright.sync_api import TimeoutError as PWTimeout
except ImportError: PWTimeout = Exception

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(__file__).resolve().parent/'artifacts'
NB = '90_workbench.explorer.ipynb'
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

def lab_env(tmp:Path)->dict:
    "Environment isolating JupyterLab's settings, with the news notification off"
    env = {**os.environ, 'MULTIS_HOME': str(tmp/'home'), 'JUPYTER_CONFIG_DIR': str(tmp/'jcfg'),
           'JUPYTER_RUNTIME_DIR': str(tmp/'jrun'), 'JUPYTERLAB_SETTINGS_DIR': str(tmp/'jset'),
           'JUPYTERLAB_WORKSPACES_DIR': str(tmp/'jws'), 'PATH': f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    note = tmp/'jset'/'@jupyterlab'/'apputils-extension'/'notification.jupyterlab-settings'
    note.parent.mkdir(parents=True); note.write_text(json.dumps({'fetchNews': 'false', 'checkForUpdates': False}))
    tracker = tmp/'jset'/'@jupyterlab'/'notebook-extension'/'tracker.jupyterlab-settings'
    tracker.parent.mkdir(parents=True); tracker.write_text(json.dumps({'windowingMode': 'none'}))  # every cell in the DOM
    return env

def start_lab(root:Path, tmp:Path, port:int, token:str):
    "JupyterLab serving root on 127.0.0.1:port, once it answers (30 s at most)"
    log = open(tmp/'lab.log', 'w')
    proc = subprocess.Popen([sys.executable, '-m', 'jupyterlab', '--no-browser', '--ip=127.0.0.1', f'--port={port}',
                             f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={root}', '--LabApp.extension_manager=readonly',
                             *(['--allow-root'] if os.geteuid() == 0 else [])],
                            env=lab_env(tmp), stdout=log, stderr=subprocess.STDOUT, cwd=root)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None: break
        try:
            with urllib.request.urlopen(f'http://127.0.0.1:{port}/api/status?token={token}', timeout=2) as r:
                if r.status == 200: return proc
        except OSError: time.sleep(0.3)
    stop(proc)
    pytest.fail(f"JupyterLab did not start in 30 s:\n{(tmp/'lab.log').read_text()[-2000:]}")

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
        try: return page.locator('.multis-query input').first.wait_for(timeout=30_000)
        except PWTimeout:
            if attempt: raise

def results_text(page)->str: return page.locator('.multis-results').inner_text()

def move_slider(page, cls:str, presses:int=5):
    "Press ArrowRight on a slider's handle"
    handle = page.locator(f'.{cls} .noUi-handle').first
    handle.focus()
    for _ in range(presses): handle.press('ArrowRight')

def shot(page, name:str):
    "Save a screenshot to tests/artifacts/"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS/name))

def test_explorer_in_jupyterlab(tmp_path):
    exe = _need()
    from playwright.sync_api import sync_playwright
    root, port, token = make_root(tmp_path), free_port(), secrets.token_hex(16)
    proc = start_lab(root, tmp_path, port, token)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=CHROME_ARGS, timeout=30_000)
            try:
                page = browser.new_page(viewport={'width': 1400, 'height': 1000})
                page.set_default_timeout(30_000)
                page.goto(f'http://127.0.0.1:{port}/lab/tree/nbs/{NB}?token={token}')
                page.locator('.jp-Notebook .jp-Cell').first.wait_for()
                try: run_all(page)
                except Exception: shot(page, 'explorer-failed.png'); raise
                query = page.locator('.multis-query input').first
                query.fill('water garden')
                page.locator('.multis-results table').first.wait_for(timeout=20_000)
                before = results_text(page)
                assert 'rank' in before and 'bm25' in before, before
                move_slider(page, 'multis-bm25-content')
                page.wait_for_function('b => document.querySelector(".multis-results").innerText !== b', arg=before,
                                       timeout=20_000)
                after = results_text(page)
                assert after != before
                assert 'vector' in after and 'hybrid' in after, after    # the demo store searches hybrid
                move_slider(page, 'multis-vector-weight')                 # re-blends the cached candidates
                page.wait_for_function('b => document.querySelector(".multis-results").innerText !== b', arg=after,
                                       timeout=20_000)
                assert ' blend in ' in page.locator('.multis-status').inner_text()
                query.scroll_into_view_if_needed()
                shot(page, 'explorer.png')
            finally: browser.close()
    finally: stop(proc)
