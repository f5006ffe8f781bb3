"""Browser test of the docs site: the offline build (tools/build_docs.py, into a temporary folder) served on 127.0.0.1,
Debian's Chromium driven by Playwright, launched as tests/test_browser.py launches it.

Types "activation" in the search box and lands on the ranking page; checks that the ranking page's TeX is typeset
(MathML, no `$` left), that at 400 px the sidebar hides behind a toggle that opens it, that the index subtitle shows
whole, that API entries link to their source line, and that the explorer's page shows tests/test_browser.py's screenshot.
Screenshots go to tests/artifacts/docs-*.png. Skips, saying why, without Chromium or Playwright.
"""
import functools, http.server, re, struct, sys, threading
from pathlib import Path
import pytest
from test_browser import ARTIFACTS, CHROME_ARGS, chromium_path, shot

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO/'tools'))
import build_docs

@pytest.fixture(scope='module')
def site(tmp_path_factory):
    "The site built from this checkout, with the explorer screenshot if tests/test_browser.py has saved one"
    out = tmp_path_factory.mktemp('site')
    build_docs.build(out)
    return out

@pytest.fixture(scope='module')
def base(site):
    "The site served on 127.0.0.1 (a free port), as a URL ending in /"
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a): pass
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(Quiet, directory=str(site)))
    t = threading.Thread(target=srv.serve_forever, daemon=True); t.start()
    yield f'http://127.0.0.1:{srv.server_address[1]}/'
    srv.shutdown(); srv.server_close()

@pytest.fixture(scope='module')
def browser():
    exe = chromium_path()
    if exe is None: pytest.skip('Chromium is not installed (Debian: apt-get install chromium); .ci/run installs it')
    try: from playwright.sync_api import sync_playwright
    except ImportError: pytest.skip('playwright is not installed (pip install playwright; it is a dev requirement)')
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROME_ARGS, timeout=30_000)
        try: yield b
        finally: b.close()

def new_page(browser, width=1280, height=900):
    page = browser.new_page(viewport={'width': width, 'height': height})
    page.set_default_timeout(15_000)
    errors = []
    page.on('pageerror', lambda e: errors.append(str(e)))
    page.on('requestfailed', lambda r: errors.append(f'{r.url}: {r.failure}'))
    page.js_errors = errors
    return page

def test_search_activation_lands_on_the_ranking_page(browser, base):
    page = new_page(browser)
    page.goto(base + 'index.html')
    box = page.locator('#search-input')
    box.click()
    box.press_sequentially('activation', delay=20)
    results = page.locator('#search-results li[role=option] a')
    results.first.wait_for()
    hrefs = [a.get_attribute('href') for a in results.all()]
    assert hrefs[0] == 'retrieval.ranking.html#activation', hrefs
    assert page.locator('#search-results li.selected .where').inner_text() == 'Ranking › activation'
    assert '<mark>' in page.locator('#search-results').inner_html()
    shot(page, 'docs-search.png')
    results.first.click()
    page.wait_for_url(re.compile(r'/retrieval\.ranking\.html#activation$'))
    assert page.locator('h1.title').inner_text() == 'Ranking'
    assert page.locator('#activation').is_visible()
    page.keyboard.press('/')                                                         # "/" focuses the box
    page.keyboard.type('reciprocal rank', delay=10)                                  # Enter opens the first result
    page.locator('#search-results li.selected').wait_for()
    first = page.locator('#search-results li.selected a').get_attribute('href')
    page.locator('#search-input').press('Enter')
    page.wait_for_url(re.compile(re.escape(first) + '$'))
    assert page.locator('#search-input').input_value() == '' and not page.locator('#search-results').is_visible()
    page.locator('#search-input').press_sequentially('zzqqxx', delay=10)
    assert page.locator('#search-results li.none').inner_text() == 'No results for “zzqqxx”'
    assert page.js_errors == []

def test_ranking_page_math_is_typeset(browser, base):
    page = new_page(browser)
    page.goto(base + 'retrieval.ranking.html')
    assert page.locator('math').count() >= 20
    main = page.locator('main').inner_text()
    assert '$' not in main.replace('$(', '') and '\\ln' not in main and '\\sum' not in main, 'raw TeX left on the page'
    block = page.locator('math[display=block]').first
    block.scroll_into_view_if_needed()
    sizes = page.evaluate("""() => {
        const m = document.querySelector('math[display=block]'), r = m.getBoundingClientRect();
        const sum = [...m.querySelectorAll('munderover')][0].getBoundingClientRect();
        const line = parseFloat(getComputedStyle(m.closest('p, div') || document.body).fontSize);
        return {height: r.height, width: r.width, sum: sum.height, font: line};
    }""")
    assert sizes['height'] > 1.8 * sizes['font'] and sizes['sum'] > 1.8 * sizes['font'], sizes   # the sum has its limits stacked
    assert sizes['width'] > 5 * sizes['font'], sizes
    page.evaluate("document.querySelector('math[display=block]').scrollIntoView({block: 'center'})")
    shot(page, 'docs-math.png')
    assert page.js_errors == []

def test_narrow_screen_sidebar_behind_a_toggle(browser, base):
    page = new_page(browser, width=400, height=800)
    page.goto(base + 'retrieval.store.html')
    side, toggle = page.locator('nav.sidebar'), page.locator('button.nav-toggle')
    assert not side.is_visible() and toggle.is_visible()
    assert page.evaluate('document.documentElement.scrollWidth') <= 400, 'the page scrolls sideways at 400 px'
    assert page.locator('#search-input').is_visible()
    toggle.click()
    assert side.is_visible() and toggle.get_attribute('aria-expanded') == 'true'
    box = side.bounding_box()
    assert box['x'] >= 0 and box['x'] + box['width'] <= 400
    shot(page, 'docs-narrow.png')
    toggle.click()
    assert not side.is_visible() and toggle.get_attribute('aria-expanded') == 'false'
    page.locator('#search-input').press_sequentially('activation', delay=10)   # the search box works at 400 px too
    hit = page.locator('#search-results li.selected a')
    assert hit.get_attribute('href') == 'retrieval.ranking.html#activation'
    box = page.locator('#search-results').bounding_box()
    assert box['x'] >= 0 and box['x'] + box['width'] <= 400, box
    shot(page, 'docs-narrow-search.png')
    page.keyboard.press('Escape')
    toggle.click()
    side.get_by_role('link', name='Ranking', exact=True).click()
    page.wait_for_url(re.compile(r'/retrieval\.ranking\.html$'))
    assert not page.locator('nav.sidebar').is_visible()
    wide = new_page(browser)
    wide.goto(base + 'retrieval.store.html')
    assert wide.locator('nav.sidebar').is_visible() and not wide.locator('button.nav-toggle').is_visible()
    assert page.js_errors == [] and wide.js_errors == []

def test_index_subtitle_shown_whole(browser, base):
    nb = __import__('json').loads((REPO/'nbs'/'index.ipynb').read_text(encoding='utf-8'))
    want = build_docs.title_of(nb['cells'])[1]
    assert want.endswith('on your own machine')
    for width in (1280, 400):
        page = new_page(browser, width=width)
        page.goto(base + 'index.html')
        sub = page.locator('main header .description')
        assert sub.inner_text() == want
        clipped = sub.evaluate('e => e.scrollWidth > e.clientWidth || e.scrollHeight > e.clientHeight')
        assert sub.is_visible() and not clipped, width
    assert build_docs.subtitle_problems() == []

def test_api_entries_link_to_their_source_line(browser, base):
    page = new_page(browser)
    page.goto(base + 'retrieval.ranking.html')
    href = page.locator('#activation a.source-link').get_attribute('href')
    m = re.fullmatch(r'https://github\.com/multis-dev/multis/blob/main/(multis/retrieval/ranking\.py)#L(\d+)', href)
    assert m, href
    assert (REPO/m.group(1)).read_text().splitlines()[int(m.group(2)) - 1].startswith('def activation(')
    assert page.locator('#activation a.source-link').inner_text() == 'source'

def _png_width(f:Path)->int: return struct.unpack('>I', f.read_bytes()[16:20])[0]

def test_explorer_page_shows_the_browser_tests_screenshot(browser, base, site):
    if not (ARTIFACTS/'explorer.png').exists():
        pytest.skip('tests/artifacts/explorer.png is missing: tests/test_browser.py makes it (it runs first in the suite)')
    page = new_page(browser)
    page.goto(base + 'workbench.explorer.html')
    img = page.locator('figure.screenshot img')
    img.scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelector('figure.screenshot img').complete")
    assert img.evaluate('i => i.naturalWidth') == _png_width(ARTIFACTS/'explorer.png') > 0
    assert (site/'images'/'explorer.png').read_bytes() == (ARTIFACTS/'explorer.png').read_bytes()
    shot(page, 'docs-explorer.png')
    assert page.js_errors == []

def test_search_works_from_a_file_url(browser, site):
    "Opened from disk (file://, no server, offline): the index loads as a script, not by fetch"
    page = new_page(browser)
    page.goto((site/'retrieval.store.html').as_uri())
    page.locator('#search-input').press_sequentially('activation', delay=10)
    page.locator('#search-results li.selected a').click()
    page.wait_for_url(re.compile(r'/retrieval\.ranking\.html#activation$'))
    assert page.url.startswith('file://') and page.js_errors == []
