"""Every page of the built book as a reader's browser shows it: headless Chromium loads each page, waits for
MathJax to typeset it, and reports what a careful reader would call broken (a MathJax error, TeX left as text,
NaN or Python values in the text, a traceback in an output, a table or code block wider than the text column).

Used by ``tests/test_book.py`` on the book it builds, and by ``tests/test_book_browser.py`` on small pages made
to hold each fault. The browser is Debian's ``chromium`` driven through its ``chromium-driver`` by Selenium (no
browser of Selenium's own is downloaded); where it is missing and the tests run as root, :func:`install_chromium`
installs both with apt.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
)
WINDOW = (1280, 1000)  # a laptop's browser window: the book's text column is then about 680 px wide
MATHJAX_TIMEOUT_S = 60

# What the page reports, computed in the browser after MathJax is done. "Prose" is the text a reader reads:
# paragraphs, list items, captions, admonitions, table cells and the Markdown a cell displays, without code (inline
# or blocks), without typeset math and without the notebook's input cells; printed outputs are checked for
# tracebacks and NaN, the tables a cell displays for NaN and Python values.
FIND_FAULTS = r"""
const faults = [];
const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
const say = (kind, where, text) => faults.push({kind, where, text: String(text).slice(0, 160)});
const skip = 'pre, code, script, style, mjx-container, .cell_input, .MathJax, .math, .highlight, .toctree-wrapper';
const where = (node) => {
  const el = node.nodeType === 1 ? node : node.parentElement;
  const section = el.closest('section');
  const heading = section && section.querySelector('h1, h2, h3');
  return heading ? heading.textContent.replace('#', '').trim() : '(top)';
};

// 1. MathJax's own errors (red in the page), and TeX it never typeset
for (const e of article.querySelectorAll('mjx-merror, .MathJax_Error')) {
  say('MathJax error', where(e), e.getAttribute('data-mjx-error') || e.textContent);
}
const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
const prose = [];
for (let n = walker.nextNode(); n; n = walker.nextNode()) {
  if (!n.parentElement || n.parentElement.closest(skip) || !n.textContent.trim()) continue;
  prose.push(n);  // Markdown a cell displays is prose too; printed lines (pre) are not
}
const tex = /\\(?:begin|end|frac|mathrm|mathbb|left|right|alpha|sigma|sqrt|sum|tag|cdot|big|text)\b|\$\$|\\\(|\\\)|\\\[|\\\]|(?:^|\s)\$[^$\s][^$]*\$/;
const pyValue = /\b(?:True|False|None)\b|\{\s*'[^']*'\s*:|\[\s*'[^']*'\s*,|\[(?:\s*-?\d+(?:\.\d+)?(?:e-?\d+)?\s*,){2,}/;
const nan = /\b(?:NaN|nan)\b/;
for (const n of prose) {
  const text = n.textContent;
  if (text.match(tex)) say('TeX not typeset', where(n), text.trim());
  if (text.match(nan)) say('NaN in text', where(n), text.trim());
  if (n.parentElement.closest('dl.py, .sig')) continue;  // the API reference speaks Python: None and True are its words
  if (n.parentElement.closest('.cell_output td, .cell_output th')) continue;  // tables a cell displays: below
  const p = text.match(pyValue);
  // "None" opening a sentence before a lower-case word is English, not Python
  if (p && !(p[0] === 'None' && /(?:^|[.!?:]\s+)None\s+[a-z]/.test(text))) say('Python value in prose', where(n), text.trim());
}

// 2. outputs: tracebacks, NaN in printed lines and in tables
for (const out of article.querySelectorAll('.cell_output')) {
  const text = out.innerText;
  if (/Traceback \(most recent call last\)|\b\w+(?:Error|Exception): /.test(text) || out.querySelector('.traceback'))
    say('traceback in an output', where(out), text.trim());
  const m = text.match(/(?:^|[\s|(\[])(?:NaN|nan)(?=$|[\s|)\],])/m);
  if (m) say('NaN in an output', where(out), text.trim());
  for (const cell of out.querySelectorAll('td, th')) {
    if (/^\s*(?:True|False|None)\s*$/.test(cell.textContent)) say('Python value in a table', where(cell), cell.textContent);
    // pandas' default six decimals: a number nobody chose how to print (five or more decimals and five or more
    // significant digits; 0.00027 is two significant digits, rounded)
    const num = cell.textContent.match(/^\s*[-+]?(\d+)\.(\d{5,})\s*$/);
    if (num && (num[1] + num[2]).replace(/^0+/, '').length >= 5) say('unrounded number in a table', where(cell), cell.textContent);
  }
}

// 3. tables and code blocks wider than the text column (cut at the right, or scrolled sideways), with every
//    drop-down and hidden cell opened, as a reader may open them
for (const d of article.querySelectorAll('details')) d.open = true;
for (const h of article.querySelectorAll('.toggle-hidden')) h.classList.remove('toggle-hidden');
const column = article.getBoundingClientRect();
const style = getComputedStyle(article);
const right = column.right - parseFloat(style.paddingRight) + 1;
for (const el of article.querySelectorAll('table, pre')) {
  const box = el.getBoundingClientRect();
  const scrolls = el.scrollWidth > el.clientWidth + 1;
  let scrollParent = el.parentElement;
  let cut = false;
  while (scrollParent && scrollParent !== article) {
    if (scrollParent.scrollWidth > scrollParent.clientWidth + 1) { cut = true; break; }
    scrollParent = scrollParent.parentElement;
  }
  if (box.width > 0 && (box.right > right || scrolls || cut)) {
    say(el.tagName === 'PRE' ? 'code block wider than the column' : 'table wider than the column', where(el),
        `${Math.round(el.scrollWidth)} px in ${Math.round(right - box.left)} px: ` + el.innerText.split('\n')[0]);
  }
}
return faults;
"""

WAIT_FOR_MATHJAX = r"""
const done = arguments[arguments.length - 1];
const finish = () => done(window.MathJax && MathJax.startup && MathJax.startup.document ? 'typeset' : 'no MathJax');
if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
  MathJax.startup.promise.then(finish, (e) => done('MathJax failed: ' + e));
} else if (document.querySelector('script[src*="mathjax"]')) {
  let waited = 0;  // the deferred MathJax script has not defined its startup yet
  const poll = setInterval(() => {
    waited += 100;
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      clearInterval(poll);
      MathJax.startup.promise.then(finish, (e) => done('MathJax failed: ' + e));
    } else if (waited > 3000) { clearInterval(poll); done('MathJax never started'); }
  }, 100);
} else {
  done('no MathJax');
}
"""


def chromium() -> tuple[str, str] | None:
    """(browser, driver) paths of Debian's chromium and chromium-driver, or None where either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def install_chromium() -> tuple[str, str] | None:
    """Debian's chromium and chromium-driver, installed with apt where missing and this process is root (a fresh
    CI machine); None where they are missing and cannot be installed here."""
    found = chromium()
    if found or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"], env=env, capture_output=True, timeout=900
    )
    return chromium()


@contextmanager
def browser(paths: tuple[str, str]) -> Iterator[object]:
    """A headless Chromium (Selenium WebDriver) with a fresh profile, closed on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager: never fetch a browser or a driver
    binary, driver = paths
    with tempfile.TemporaryDirectory(prefix="canlib-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={profile}")
        options.add_argument(f"--window-size={WINDOW[0]},{WINDOW[1]}")
        session = webdriver.Chrome(options=options, service=Service(executable_path=driver))
        try:
            session.set_script_timeout(MATHJAX_TIMEOUT_S)
            session.set_page_load_timeout(MATHJAX_TIMEOUT_S)
            yield session
        finally:
            session.quit()


def page_faults(session: object, page: Path) -> list[dict[str, str]]:
    """Load ``page`` (an HTML file), wait for MathJax and return its faults: {kind, where, text} each."""
    session.get(page.resolve().as_uri())
    state = session.execute_async_script(WAIT_FOR_MATHJAX)
    faults = [] if state in ("typeset", "no MathJax") else [{"kind": "MathJax error", "where": "(page)", "text": state}]
    return faults + session.execute_script(FIND_FAULTS)


def book_faults(session: object, pages: list[Path]) -> dict[str, list[dict[str, str]]]:
    """:func:`page_faults` of every page, by file name (pages without faults left out)."""
    found = {page.name: page_faults(session, page) for page in pages}
    return {name: faults for name, faults in found.items() if faults}


def report(found: dict[str, list[dict[str, str]]]) -> str:
    """One line per fault: page, kind, section and the start of the text."""
    return "\n".join(
        f"{name}: {f['kind']} [{f['where']}]: {f['text']}" for name, faults in found.items() for f in faults
    )
