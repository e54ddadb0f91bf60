"""Every page of the built book as a reader's browser shows it: headless Chromium loads each page, waits for
MathJax to typeset it, and reports what a careful reader would call broken: a MathJax error, TeX left as text,
NaN or Python values in the text, a traceback in an output, a table or code block wider than the text column, an
equation numbered twice (Sphinx's number beside the TeX \\tag), a glyph of a formula cut off by its box, a line of
code wrapped, template grammar ("is holds"), a number or one-word cell broken across lines in a table, a table cell
cut short ("..."), a verdict word in the text's colour, an image whose alt text is its file's name, an empty legend
entry in an SVG figure, a plot shrunk until its text is illegible, a paragraph with more than five numbers (a table or
a figure written out as prose), and a chapter without its link to its notebook (a valid .ipynb with code cells).

Used by ``tests/book/test_book.py`` on the book it builds, and by ``tests/book/test_book_browser.py`` on small pages made
to hold each fault. The browser is Debian's ``chromium`` driven through its ``chromium-driver`` by Selenium (no
browser of Selenium's own is downloaded); where it is missing and the tests run as root, :func:`install_chromium`
installs both with apt.
"""

from __future__ import annotations

import io
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
MOST_NUMBERS = 5  # more numbers than this in one paragraph: a table or a figure written out as prose
CROWDED = "paragraph with more than five numbers"
# A plot's text as the reader sees it. The book's plots are matplotlib PNGs of the inline backend: figure.dpi 100
# (savefig.dpi "figure"; bbox_inches="tight" only crops), font.size 10 pt, the size of the tick and axis labels of
# book/_code/plots.py and figures.py (their titles 9 to 10 pt, legends 7 to 8 pt, heatmap numbers 7 to 10 pt): 10 pt
# is 10 * 100 / 72 = 13.9 image pixels. A figure wider than the text column is shrunk to it, and its text with it;
# below 8 CSS px (7.5 in for 8 pt text, 6 px for the 7 pt numbers) it is no longer read.
FIGURE_DPI = 100
FIGURE_FONT_PT = 10
MIN_FIGURE_TEXT_PX = 8
SMALL_FIGURE = "figure text too small"
NOTEBOOK_LINK = "Download this chapter as a notebook (.ipynb)"  # book/_ext/notebook_download.py

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
// pandas cuts a cell longer than display.max_colwidth and ends it with "...", in a cell's output or in a table
// glued elsewhere (a drop-down's provenance table)
for (const cell of article.querySelectorAll('td, th')) {
  if (/(?:\.\.\.|…)\s*$/.test(cell.textContent)) say('truncated table cell', where(cell), cell.textContent);
}

// 2a. a verdict word (the registry's mark) in its verdict's colour, not in the text's
const textColour = getComputedStyle(article).color;
for (const v of article.querySelectorAll('span.claim-verdict')) {
  if (getComputedStyle(v).color === textColour) say('verdict word uncoloured', where(v), v.textContent);
}

// 2b. figures: an image's alt text is what a reader without the image gets, not the file's name or hash (Sphinx's
//     default); a legend drawn as SVG in the page lists no entry without a label or without a key
for (const img of article.querySelectorAll('img')) {
  const alt = (img.getAttribute('alt') || '').trim();
  if (!alt || /[0-9a-f]{16,}|\.(?:png|jpe?g|svg|gif)$/i.test(alt)) say('image alt text is a file name', where(img), alt || '(none)');
}
for (const legend of article.querySelectorAll('svg g[id^="legend"]')) {
  for (const text of legend.querySelectorAll('g[id^="text"]')) {
    if (!text.querySelector('path, use') && !text.textContent.trim()) say('empty legend entry', where(legend), text.id);
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

// 3a. a plot shrunk to the column: its text, FIGURE_FONT_PT at FIGURE_DPI in the PNG (arguments[1] image px), as
//     displayed (the displayed width over the image's own) must keep MIN_FIGURE_TEXT_PX (arguments[2]) CSS px
for (const img of article.querySelectorAll('.cell_output img, figure img')) {
  const shown = img.getBoundingClientRect().width;
  if (!img.naturalWidth || !shown) continue;  // not loaded, or not shown
  const px = arguments[1] * shown / img.naturalWidth;
  if (px < arguments[2]) say('figure text too small', where(img),
    `${img.naturalWidth} px shown at ${Math.round(shown)} px: ${arguments[1].toFixed(1)} px text at ${px.toFixed(1)} px: ` +
    (img.getAttribute('alt') || ''));
}

// 3b. a line of code that wraps (a cell's input or a listing written for the page; not printed output, and not a
//     block marked `verbatim`: canlib's own source, whose lines run to 120 characters, or a command as the library
//     prints it): a line longer than the block holds, measured in the block's own monospace characters
for (const pre of article.querySelectorAll('div.highlight pre')) {
  if (!pre.clientWidth || pre.closest('.cell_output, .verbatim')) continue;
  const cs = getComputedStyle(pre);
  if (!cs.whiteSpace.startsWith('pre-') && cs.whiteSpace !== 'break-spaces') continue;  // it scrolls: checked above
  const ruler = document.createElement('span');  // ten characters that may not wrap, in the block's font
  Object.assign(ruler.style, {whiteSpace: 'pre', display: 'inline-block', overflowWrap: 'normal'});
  ruler.textContent = 'x'.repeat(10);
  pre.appendChild(ruler);
  const char = ruler.getBoundingClientRect().width / 10;
  ruler.remove();
  const room = pre.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  const wide = pre.textContent.split('\n').filter((line) => line.length * char > room + 0.5);
  if (wide.length) say('code line wrapped', where(pre), `${wide.length} line(s), e.g. ${wide[0].trim()}`);
}

// 4. an equation numbered twice: Sphinx numbers an amsmath block (span.eqno) that also carries a TeX \tag
for (const m of article.querySelectorAll('div.math')) {
  const tag = m.querySelector('mjx-labels, mjx-mlabeledtr');
  const eqno = m.querySelector('span.eqno');
  if (tag && eqno) say('equation numbered twice', where(m), `${eqno.textContent.replace('#', '').trim()} beside ${tag.textContent || 'a \\tag'}`);
}

// 5. a number, or a one-word cell (a task like "en-de"), broken across lines in a table
const numberCell = /^[\s+\-−–±]*\d[\d\s.,:;+\-−–±%()x×/e]*$/;
for (const cell of article.querySelectorAll('td, th')) {
  const text = cell.innerText.trim();
  if (!text || !(numberCell.test(text) || (!/\s/.test(text) && text.length > 1))) continue;
  const range = document.createRange();
  range.selectNodeContents(cell);
  const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
  if (tops.size > 1) say('number broken across lines in a table', where(cell), cell.innerText);
}

// the text a reader sees in an element: its words, its inline code, and each formula as its TeX without the
// sub- and superscripts (the 1 of W_{v1} is a name, not a number); the cells' code and tables are not prose
const texOf = new Map();
if (window.MathJax && MathJax.startup && MathJax.startup.document) {
  for (const item of MathJax.startup.document.math) if (item.typesetRoot) texOf.set(item.typesetRoot, item.math);
}
const unscripted = (tex) => {
  let out = tex, before;
  do { before = out; out = out.replace(/[_^](?:\{[^{}]*\}|\\[A-Za-z]+|[^\s{}\\])/g, ' '); } while (out !== before);
  return out.replace(/\\[A-Za-z]+/g, ' ');
};
const seen = (el) => {
  let out = '';
  for (const n of el.childNodes) {
    if (n.nodeType === 3) out += n.textContent;
    else if (n.nodeType === 1 && n.matches('mjx-container')) out += ' ' + unscripted(texOf.get(n) || '') + ' ';
    else if (n.nodeType === 1 && !n.matches('script, style, mjx-assistive-mml, a.headerlink, .headerlink')) out += seen(n);
  }
  return out;
};

// 6. template grammar: a verdict word glued after a verb ("is holds"), a word twice
const grammar = /\b(?:is|are|was|were)\s+(?:holds|does not hold|fails|did not hold)\b|\b(is|the|a|an|of|to|and|in|on|for)\s+\1\b/i;
// 7. paragraphs: every number a reader sees, none over MOST
const numbers = /(?<![\p{L}\d_.\\])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\p{L}\d_.\\])\d+(?:\.\d+)?/gu;
const paragraphs = [...article.querySelectorAll('p, li, figcaption, caption, dd')].filter((el) =>
  !el.closest('pre, .cell_input, .highlight, table, .toctree-wrapper, nav') &&
  !(el.matches('li, dd, figcaption') && el.querySelector('p, li')));
for (const el of paragraphs) {
  const text = seen(el).replace(/\s+/g, ' ').trim();
  const g = text.match(grammar);
  if (g) say('template grammar', where(el), `"${g[0]}": ${text}`);
  const found = text.match(numbers) || [];
  if (found.length > arguments[0]) say('paragraph with more than five numbers', where(el), `${found.length} numbers: ${text}`);
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


# The displayed formulas whose box clips its content (a scroll box: overflow not visible), with where they are.
CLIPPING_MATH = r"""
const out = [];
for (const c of document.querySelectorAll('article mjx-container[display="true"]')) {
  const st = getComputedStyle(c);
  if (st.overflowX === 'visible' && st.overflowY === 'visible') continue;
  const section = c.closest('section');
  const heading = section && section.querySelector('h1, h2, h3');
  out.push({index: out.length, where: heading ? heading.textContent.replace('#', '').trim() : '(top)',
            wide: c.scrollWidth > c.clientWidth + 1, tex: (c.getAttribute('aria-label') || c.textContent).slice(0, 80)});
  c.setAttribute('data-clip-check', out.length - 1);
}
return out;
"""
SHOW_MATH = r"""
const c = document.querySelector(`[data-clip-check="${arguments[0]}"]`);
c.scrollIntoView({block: 'center'});
const r = c.getBoundingClientRect();
return [r.left, r.top, r.right, r.bottom];
"""
UNCLIP = 'document.querySelector(`[data-clip-check="${arguments[0]}"]`).style.overflow = arguments[1];'
CLIP_MARGIN = 8  # px above and below a formula's box where its cut-off ink would show once unclipped


def clipped_math(session: object) -> list[dict[str, str]]:
    """Displayed formulas whose box cuts off part of a glyph: each is drawn as the page has it and again with its box
    unclipped (``overflow: visible``); ink that appears only unclipped, just above or below the box, was cut off.
    (A glyph can reach past the box MathJax computes for it: the TeX fonts' heights are not their inks'.)"""
    from PIL import Image, ImageChops

    faults = []
    for math in session.execute_script(CLIPPING_MATH):
        if math["wide"]:
            faults.append({"kind": "formula wider than the column", "where": math["where"], "text": math["tex"]})
            continue
        left, top, right, bottom = session.execute_script(SHOW_MATH, math["index"])
        if right - left < 1 or bottom - top < 1:
            continue  # not shown (a closed drop-down)
        ratio = session.execute_script("return window.devicePixelRatio") or 1
        region = [round(v * ratio) for v in (left, top - CLIP_MARGIN, right, bottom + CLIP_MARGIN)]
        shots = []
        for overflow in ("", "visible"):
            session.execute_script(UNCLIP, math["index"], overflow)
            shots.append(Image.open(io.BytesIO(session.get_screenshot_as_png())).convert("L").crop(region))
        session.execute_script(UNCLIP, math["index"], "")
        diff = ImageChops.difference(*shots).point(lambda v: 255 if v > 60 else 0)
        if diff.getbbox():
            faults.append({"kind": "glyph cut off by its box", "where": math["where"], "text": math["tex"]})
    return faults


# The links a reader sees whose text is the notebook link's: [href, shown] each.
NOTEBOOK_LINKS = r"""
return [...document.querySelectorAll('article a')].filter((a) => a.textContent.trim() === arguments[0]).map((a) => {
  const r = a.getBoundingClientRect();
  return [a.getAttribute('href') || '', r.width > 0 && r.height > 0 && getComputedStyle(a).visibility !== 'hidden'];
});
"""


def notebook_faults(session: object, page: Path) -> list[dict[str, str]]:
    """A chapter's notebook: a visible link on the page (its text :data:`NOTEBOOK_LINK`) to a file beside it that
    nbformat reads and validates, with at least one code cell."""
    import nbformat

    links = session.execute_script(NOTEBOOK_LINKS, NOTEBOOK_LINK)
    if not links or not any(shown for _, shown in links):
        return [{"kind": "no notebook link", "where": "(top)", "text": f"no visible link {NOTEBOOK_LINK!r}"}]
    href = next(href for href, shown in links if shown)
    target = page.parent / href.split("#")[0].split("?")[0]
    try:
        notebook = nbformat.read(target, as_version=4)
        nbformat.validate(notebook)
    except Exception as error:  # missing, not JSON, not a notebook: what a reader's Jupyter would refuse
        return [{"kind": "notebook not valid", "where": "(top)", "text": f"{href}: {type(error).__name__}: {error}"}]
    if not any(cell.cell_type == "code" for cell in notebook.cells):
        return [{"kind": "notebook without code", "where": "(top)", "text": href}]
    return []


def page_faults(
    session: object, page: Path, most_numbers: int = MOST_NUMBERS, notebook: bool = False
) -> list[dict[str, str]]:
    """Load ``page`` (an HTML file), wait for MathJax and return its faults: {kind, where, text} each; with
    ``notebook``, a chapter's, also its notebook link's (:func:`notebook_faults`)."""
    session.get(page.resolve().as_uri())
    state = session.execute_async_script(WAIT_FOR_MATHJAX)
    faults = [] if state in ("typeset", "no MathJax") else [{"kind": "MathJax error", "where": "(page)", "text": state}]
    faults += clipped_math(session)  # as the page opens, before a drop-down moves what follows it
    faults += notebook_faults(session, page) if notebook else []
    text_px = FIGURE_FONT_PT * FIGURE_DPI / 72
    # opens every drop-down, as a reader may
    return faults + session.execute_script(FIND_FAULTS, most_numbers, text_px, MIN_FIGURE_TEXT_PX)


def book_faults(
    session: object, pages: list[Path], chapters: frozenset[str] = frozenset()
) -> dict[str, list[dict[str, str]]]:
    """:func:`page_faults` of every page, by file name (pages without faults left out); a page whose stem is in
    ``chapters`` must also link its notebook."""
    found = {page.name: page_faults(session, page, notebook=page.stem in chapters) for page in pages}
    return {name: faults for name, faults in found.items() if faults}


def report(found: dict[str, list[dict[str, str]]]) -> str:
    """One line per fault: page, kind, section and the start of the text."""
    return "\n".join(
        f"{name}: {f['kind']} [{f['where']}]: {f['text']}" for name, faults in found.items() for f in faults
    )
