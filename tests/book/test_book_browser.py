"""The browser check of the book's pages (:mod:`book_browser`) catches each fault it looks for: small pages laid out
as the book's (its text column, MathJax from the book's own offline copy, its CSS), one fault each, and a clean
page that holds every construct done right. The built book itself is checked in ``tests/book/test_book.py``."""

from __future__ import annotations

import base64
import importlib.metadata
import io
from pathlib import Path

import book_browser
import pytest
from conftest import REPO, missing

# Eq. 8 of the compression chapter before it was fixed, as Sphinx wraps a displayed formula holding a line break:
# a \tag inside the split environment that MathJax refuses (and shows in red)
UNFIXED_EQ8 = (
    r"\begin{split}\mathrm{Self}(X) + \mathrm{Cross}(X, H) = \sum_{i=1}^{h} A^i"
    r"\begin{bmatrix} X W_{v1}^i W_{o1}^i \\ H W_{v2}^i W_{o2}^i \end{bmatrix} + b_{o1} + b_{o2} \tag{8}"
    r"\end{split}"
)
WIDE_TABLE = "<table><tr>" + "".join(f"<th>max_abs_vs_prev_{i}</th>" for i in range(12)) + "</tr></table>"
# Eq. 8 as the compression chapter once had it: an amsmath block, which Sphinx numbers (1), holding a TeX \tag{8}
DOUBLE_EQ8 = (
    '<div class="math notranslate nohighlight" id="equation-x"><span class="eqno">(1)<a class="headerlink" '
    'href="#equation-x">#</a></span>\\[\\begin{equation}\\mathrm{Self}(X) + \\mathrm{Cross}(X, H) = A\\,[X W_{v1}, '
    "H W_{v2}] \\tag{8}\\end{equation}\\]</div>"
)
# Eq. 9 with its transpose, in a formula box too short for the superscript (the box clips, as the theme's does)
EQ9 = r"\bar A = X W_q \big[X W_{k1},\ H W_{k2}\big]^\top / \sqrt d"
CLIPPED_EQ9 = (
    "<style>div.math.short mjx-container[display] { overflow: hidden; padding: 0; height: 0.9em; }</style>"
    f'<div class="math notranslate nohighlight short">\\[{EQ9}\\]</div>'
)
WRAPPED_CELL = (  # a narrow table: its cells break where the browser may, at a space, a hyphen or a percent sign
    '<div class="cell_output"><table style="width: 90px"><tr><th>task</th><th>CAN − Balanced</th></tr>'
    "<tr><td>en-de</td><td>+0.54 (+1.5%)</td></tr></table></div>"
)


def png(width: int, height: int = 120) -> str:
    """A blank PNG of ``width`` image pixels as a data URI: a plot's size is all the legibility check reads."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


# a plot 24 inches wide at matplotlib's 100 dpi, shrunk into the 700 px column: its 13.9 px text shown at 4 px
OVER_WIDE_FIGURE = f'<figure><img src="{png(2400)}" alt="Six panels side by side."></figure>'
# 7.5 inches, the width of most of the book's plots: shown at 700 of its 750 px, its text at 13 px
COLUMN_FIGURE = f'<figure><img src="{png(750)}" alt="Two panels, the paper\'s and ours."></figure>'

FAULTS = {  # kind reported -> a page body holding that fault alone
    "MathJax error": rf'<div class="math notranslate nohighlight">\[{UNFIXED_EQ8}\]</div>',
    "TeX not typeset": r"<p>One softmax splits the mass: the share $\alpha$ goes to the prefix.</p>",
    "NaN in text": "<p>The model scored nan BLEU on valid.</p>",
    "NaN in an output": '<div class="cell_output"><div class="output"><pre>valid loss NaN</pre></div></div>',
    "Python value in prose": "<p>Captured decoding returned the eager tokens in every run: True.</p>",
    "Python value in a table": '<div class="cell_output"><table><tr><th>exact</th></tr><tr><td>False</td></tr></table></div>',
    "traceback in an output": (
        '<div class="cell_output"><div class="output"><pre>Traceback (most recent call last):\n'
        '  File "x.py", line 1\nValueError: bad</pre></div></div>'
    ),
    "table wider than the column": f'<div class="cell_output">{WIDE_TABLE}</div>',
    "unrounded number in a table": '<div class="cell_output"><table><tr><th>BLEU</th></tr><tr><td>28.400000</td></tr></table></div>',
    "code block wider than the column": '<div class="highlight-ipython3"><div class="highlight"><pre style="white-space: pre">'
    + "x = 1  # "
    + "a long comment " * 20
    + "</pre></div></div>",
    "code line wrapped": '<div class="cell_input"><div class="highlight-ipython3"><div class="highlight"><pre>x = 1  # '
    + "a long comment " * 12
    + "</pre></div></div></div>",
    "equation numbered twice": DOUBLE_EQ8,
    "glyph cut off by its box": CLIPPED_EQ9,
    "formula wider than the column": r'<div class="math notranslate nohighlight">\['
    + " + ".join(["W_{q1} X"] * 40)
    + r"\]</div>",
    "number broken across lines in a table": WRAPPED_CELL,
    # the training recipe's table as pandas printed it: a cell cut at display.max_colwidth
    "truncated table cell": '<div class="cell_output"><table><tr><th>paper</th></tr><tr><td>mixed precision, fp16 '
    "(the paper); canlib: bf1...</td></tr></table></div>",
    # a verdict as _code.marks.mark wrote it before each word had its class
    "verdict word uncoloured": '<p>CAN stays within half a point: <span class="claim-verdict" data-claim="x">holds'
    "</span>.</p>",
    # Sphinx's alt text for a cell's figure: the path of the image, named by the hash of its bytes
    "image alt text is a file name": '<figure><img src="x.png" alt="../_images/'
    + "3f" * 32
    + '.png"><figcaption><p>BLEU per system.</p></figcaption></figure>',
    # a legend as matplotlib draws it in SVG: a key (line2d) and a label that holds no glyph
    "empty legend entry": '<svg width="200" height="60"><g id="legend_1"><g id="line2d_1"><path d="M 0 0 L 10 0"/></g>'
    '<g id="text_1"></g></g></svg>',
    "figure text too small": OVER_WIDE_FIGURE,
    "template grammar": "<p>Read on every set, “CAN scores below Balanced” is holds on some sets.</p>",
    "paragraph with more than five numbers": (
        '<p>CAN is 1.42 times as fast, 2.82 over 14 tasks, with 3,000 pairs at <span class="math notranslate '
        'nohighlight">\\(d = 512\\)</span> and 8 heads.</p>'
    ),
}
CLEAN = (
    r"<p>None of the runs fails; the interval [-2.86, -1.69] excludes zero.</p>"
    r'<div class="math notranslate nohighlight">\[\begin{equation}\mathrm{Self}(X) + \mathrm{Cross}(X, H) = '
    r"\sum_{i=1}^{h} A^i \begin{bmatrix} X \\ H \end{bmatrix} \tag{8}\end{equation}\]</div>"
    r'<p>The share <span class="math notranslate nohighlight">\(\alpha\)</span> of the prefix.</p>'
    '<div class="cell_output"><table><tr><th>stage</th><th>exact?</th></tr><tr><td>one softmax</td><td>no</td>'
    '</tr><tr><td>0.00027</td><td>12.5</td></tr></table><div class="output"><pre>x = 1  # '
    + "a long comment "
    * 20
    + "</pre></div></div>"
    # canlib's own source (its lines run to 120 characters) wraps in the column; the page's code does not
    '<div class="verbatim highlight-python"><div class="highlight"><pre>y = 2  # '
    + "wrapped "
    * 30
    + "</pre></div></div>"
    '<div class="cell_input"><div class="highlight-ipython3"><div class="highlight"><pre>z = 3  # '
    + "short "
    * 8
    + "</pre></div></div></div>"
    "<dl class='py function'><dd><p>Returns None where nothing is stored.</p></dd></dl>"
    # Eq. 9 in the book's own formula box (book/_static/outputs.css leaves room for the transpose)
    f'<div class="math notranslate nohighlight">\\[{EQ9} \\tag{{9}}\\]</div>'
    # the same cells as a reading_table lays them out: numbers and one-word cells kept on one line
    '<div class="cell_output"><table style="width: 90px"><tr><th>task</th><th>CAN − Balanced</th></tr><tr>'
    '<td style="white-space: nowrap">en-de</td><td style="white-space: nowrap">+0.54 (+1.5%)</td></tr></table></div>'
    # a command in a table cell, one long list of seeds: it breaks at the column's edge (book/_static/outputs.css)
    '<div class="cell_output"><table><tr><th>what would settle it</th></tr><tr><td>43 seeds: <code>python -m '
    "repro experiment --seeds " + ",".join(str(i) for i in range(1, 120)) + "</code></td></tr></table></div>"
    # a verdict word in its class's colour (book/_static/outputs.css)
    '<p>The gate: <span class="claim-verdict verdict-holds" data-claim="gate-decisive">holds</span>.</p>'
    # a figure whose alt text says what it shows, and an SVG legend whose entry has its label's glyphs
    '<figure><img src="x.png" alt="BLEU of each system, a dot per seed"></figure>'
    # a plot at the column's width, shrunk a little: its text stays legible
    + COLUMN_FIGURE
    + '<svg width="200" height="60"><g id="legend_1"><g id="line2d_1"><path d="M 0 0 L 10 0"/></g><g id="text_1">'
    '<use href="#DejaVuSans-43"/></g></g></svg>'
    # five numbers, the indices of W_{v1} and a code name with digits not counted; the verdict after a colon
    '<p>Eq. 13 gives <span class="math notranslate nohighlight">\\(W_{v1}\\)</span> a width of 4 times 256, in'
    " <code>x2</code> of 3 runs. The verdict: holds on some sets.</p>"
)


def mathjax_script() -> Path | None:
    """The offline MathJax the book bundles (the sphinx-mathjax-offline package), or None."""
    try:
        files = importlib.metadata.files("sphinx-mathjax-offline") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    found = [Path(f.locate()) for f in files if f.name == "tex-chtml.js"]
    return found[0] if found else None


# the book theme's (pydata-sphinx-theme's) rules for displayed formulas: a box that scrolls sideways, and so clips;
# and sphinx-book-theme's for images: none wider than the column
THEME_MATH = (
    "img { max-width: 100%; } "
    "div.math, span.math { align-items: center; display: flex; max-width: 100%; overflow: hidden; } "
    "div.math { flex-direction: row-reverse; gap: .5em; } "
    "div.math mjx-container { flex-grow: 1; overflow: auto; padding-bottom: .2rem; } "
    "div.math mjx-container mjx-assistive-mml { height: 0; }"
)


def page(folder: Path, name: str, body: str, script: Path) -> Path:
    """A page with the book's layout: its text column (article.bd-article, 700 px), its outputs CSS and MathJax
    configured as Sphinx configures it."""
    css = (REPO / "book" / "_static" / "outputs.css").read_text(encoding="utf-8")
    path = folder / f"{name}.html"
    path.write_text(
        f"""<!DOCTYPE html><html><head><meta charset="utf-8">
<style>article.bd-article {{ width: 700px; padding: 0 10px; font: 16px sans-serif; }}
pre {{ overflow: auto; font: 13px monospace; }} {THEME_MATH} {css}</style>
<script>window.MathJax = {{"options": {{"processHtmlClass": "tex2jax_process|mathjax_process|math|output_area"}}}}</script>
<script defer="defer" src="{script.as_uri()}"></script>
</head><body><main><article class="bd-article"><section><h1>{name}</h1>{body}</section></article></main></body></html>""",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def session():
    paths = book_browser.install_chromium()
    if paths is None:
        missing("Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)")
    with book_browser.browser(paths) as driver:
        yield driver


@pytest.fixture(scope="module")
def mathjax() -> Path:
    script = mathjax_script()
    if script is None:
        missing("the book's offline MathJax (sphinx-mathjax-offline, the book extra) is not installed")
    return script


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_each_fault_on_a_page_is_reported_with_its_kind(kind, session, mathjax, tmp_path):
    faults = book_browser.page_faults(session, page(tmp_path, "fault", FAULTS[kind], mathjax))
    assert faults and {f["kind"] for f in faults} == {kind}, faults


def test_the_number_of_numbers_is_counted_in_words_formulas_and_code_not_in_indices(session, mathjax, tmp_path):
    body = FAULTS["paragraph with more than five numbers"]
    faults = book_browser.page_faults(session, page(tmp_path, "numbers", body, mathjax))
    assert [f["text"].split(":")[0] for f in faults] == ["6 numbers"], faults  # 1.42 2.82 14 3,000 512 8
    assert book_browser.page_faults(session, page(tmp_path, "five", body, mathjax), most_numbers=6) == []


def test_the_unfixed_eq8_shows_mathjaxs_own_error(session, mathjax, tmp_path):
    faults = book_browser.page_faults(session, page(tmp_path, "eq8", FAULTS["MathJax error"], mathjax))
    assert "\\tag not allowed in split environment" in faults[0]["text"]


def test_a_page_with_every_construct_done_right_has_no_fault(session, mathjax, tmp_path):
    assert book_browser.page_faults(session, page(tmp_path, "clean", CLEAN, mathjax)) == []


def test_a_page_whose_mathjax_never_starts_is_reported(session, tmp_path):
    faults = book_browser.page_faults(
        session, page(tmp_path, "no-mathjax", FAULTS["MathJax error"], tmp_path / "missing" / "tex-chtml.js")
    )
    assert [f["text"] for f in faults] == ["MathJax never started"], faults


def test_tex_in_markdown_a_cell_displays_is_reported(session, mathjax, tmp_path):
    body = '<div class="cell_output docutils container"><p>asserted to $10^{-8}$ below</p></div>'
    faults = book_browser.page_faults(session, page(tmp_path, "markdown-output", body, mathjax))
    assert [f["kind"] for f in faults] == ["TeX not typeset"], faults


def test_the_figure_legibility_check_assumes_the_plots_dpi_and_font_size():
    """The check reads a plot's text as matplotlib's font.size at figure.dpi (book_browser.FIGURE_FONT_PT and
    FIGURE_DPI): the defaults the book's inline plots are drawn with (no page or _code module changes them)."""
    import re

    import matplotlib

    assert matplotlib.rcParams["figure.dpi"] == book_browser.FIGURE_DPI
    assert matplotlib.rcParams["savefig.dpi"] in ("figure", book_browser.FIGURE_DPI)
    assert matplotlib.rcParams["font.size"] == book_browser.FIGURE_FONT_PT
    changed = re.compile(r"rcParams|rc\(|dpi=|InlineBackend|set_matplotlib_formats|figure_format")
    for source in [*(REPO / "book").glob("*.md"), *(REPO / "book" / "_code").glob("*.py")]:
        assert not changed.search(source.read_text(encoding="utf-8")), f"{source.name} changes the plots' dpi or fonts"


def test_a_chapter_links_its_notebook_a_valid_ipynb_with_code(session, mathjax, tmp_path):
    """A chapter page (book_faults' ``chapters``) needs a visible link to a valid notebook with a code cell beside it;
    a missing file, a file that is no notebook, a notebook of prose only and a missing link are each a fault."""
    import nbformat

    link = f'<p><a href="chapter.ipynb">{book_browser.NOTEBOOK_LINK}</a></p>'
    chapter = page(tmp_path, "chapter", link + "<p>Prose.</p>", mathjax)
    assert {f["kind"] for f in book_browser.page_faults(session, chapter, notebook=True)} == {"notebook not valid"}
    (tmp_path / "chapter.ipynb").write_text("# A chapter\n", encoding="utf-8")  # the .md source, not a notebook
    assert {f["kind"] for f in book_browser.page_faults(session, chapter, notebook=True)} == {"notebook not valid"}
    prose = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A chapter")])
    nbformat.write(prose, tmp_path / "chapter.ipynb")
    assert {f["kind"] for f in book_browser.page_faults(session, chapter, notebook=True)} == {"notebook without code"}
    prose.cells.append(nbformat.v4.new_code_cell("x = 1 + 1"))
    nbformat.write(prose, tmp_path / "chapter.ipynb")
    assert book_browser.page_faults(session, chapter, notebook=True) == []
    hidden = page(tmp_path, "hidden", link.replace("<p>", '<p style="display: none">'), mathjax)
    assert {f["kind"] for f in book_browser.page_faults(session, hidden, notebook=True)} == {"no notebook link"}
    assert book_browser.page_faults(session, hidden) == []  # a page that is no chapter needs no notebook
    found = book_browser.book_faults(session, [chapter, hidden], frozenset({"chapter", "hidden"}))
    assert list(found) == ["hidden.html"], found
