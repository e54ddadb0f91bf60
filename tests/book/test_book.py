"""The book: every chapter in _toc.yml runs under nbval, the whole book builds with -W, and every built page reads
clean in headless Chromium (tests/book/book_browser.py).

Slow (minutes): marked ``book``; run alone with ``pytest -m book``, skip with ``-m "not book"``.
Chapters are converted with jupytext into a temporary .ipynb (never committed).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SHARED_DATA, missing

pytestmark = pytest.mark.book
PLOTTING_CHAPTERS = ("similarity", "training", "depths", "speed", "errors")


def toc_notebooks() -> list[Path]:
    """The .md files of _toc.yml (root first) that are jupytext notebooks; plain pages have no cells to run."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    chapters = toc.get("chapters", []) + [c for part in toc.get("parts", []) for c in part["chapters"]]
    files = [REPO / f"{f}.md" for f in [toc["root"]] + [c["file"] for c in chapters]]
    return [f for f in files if "jupytext:" in f.read_text(encoding="utf-8").split("\n---", 1)[0]]


def book_env() -> dict[str, str]:
    """The subprocess environment: canlib, repro and the pages' _code importable by the kernels, real data located."""
    env = dict(os.environ, CANLIB_DATA_DIR=str(SHARED_DATA))
    env.pop("MPLBACKEND", None)  # the chapters plot inline
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "book"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def require_data() -> None:
    if not (SHARED_DATA / "multi30k-en-de").is_dir():  # the tiny and small scales' corpus
        missing(f"real data {SHARED_DATA}/multi30k-en-de not present (set CANLIB_DATA_DIR)")


@pytest.mark.parametrize("chapter", toc_notebooks(), ids=lambda p: p.stem)
def test_chapter_runs_under_nbval(chapter: Path, tmp_path: Path) -> None:
    require_data()
    notebook = tmp_path / f"{chapter.stem}.ipynb"
    subprocess.run(
        [sys.executable, "-m", "jupytext", "--to", "notebook", "--output", str(notebook), str(chapter)],
        check=True,
        capture_output=True,
        text=True,
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", str(notebook)],
        cwd=tmp_path,
        env=book_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def script_sources(page: str) -> list[str]:
    """The ``src`` of every ``<script>`` of an HTML page."""
    return re.findall(r"<script[^>]*\ssrc=\"([^\"]+)\"", page)


def remote_mathjax(page: str) -> list[str]:
    """The scripts of a built page that load MathJax from another host (a CDN): none when MathJax is bundled."""
    return [src for src in script_sources(page) if "mathjax" in src.lower() and re.match(r"(https?:)?//", src)]


def jupyter_book() -> str:
    exe = Path(sys.executable).with_name("jupyter-book")
    found = str(exe) if exe.exists() else shutil.which("jupyter-book")
    if not found:
        pytest.skip("jupyter-book is not installed")
    return found


@pytest.fixture(scope="module")
def built_book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The book built once with ``jupyter-book build --all -W`` from a copy of the repository; its HTML pages'
    folder (``.../_build/html/book``). Every test of the built book reads this one build."""
    require_data()
    tmp_path = tmp_path_factory.mktemp("book")
    repo = tmp_path / "repo"  # a copy, so the build's _build/ and caches never land in the working tree
    shutil.copytree(
        REPO,
        repo,
        ignore=shutil.ignore_patterns(
            ".git",
            "_build",
            ".venv",
            "venv",
            "runs",
            ".cache",
            ".pytest_cache",
            ".whl",
            ".gl",
            "*.ipynb",
            "__pycache__",
        ),
    )
    result = subprocess.run(
        [jupyter_book(), "build", "--all", "-W", str(repo), "--path-output", str(tmp_path / "out")],
        env=book_env(),
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    return tmp_path / "out" / "_build" / "html" / "book"


def test_book_builds_with_rendered_math_and_plots(built_book: Path) -> None:
    pages = built_book
    html = (pages / "compress.html").read_text(encoding="utf-8")
    assert "mathjax" in html.lower()
    mathjax = [src for src in script_sources(html) if "mathjax" in src.lower()]  # the book's own copy, offline
    assert mathjax and all((pages / src.split("?")[0]).is_file() for src in mathjax), f"no bundled MathJax: {mathjax}"
    css = re.findall(r'<link[^>]+href="([^"?]*outputs\.css)', html)  # long output lines wrap (book/_static)
    assert css and (pages / css[0]).is_file(), "book/_static/outputs.css is not linked from the compress chapter"
    assert re.search(r'class="math[^"]*"', html), "no rendered math in the compress chapter"
    assert "W_{v1}" in html
    shown = set(re.findall(r'<span class="n[fc]">(\w+)</span>', html))  # functions and classes the chapter shows
    assert {"forward", "step", "ScratchCAN", "joint_mask", "scratch_from"} <= shown, shown
    layer_page = (pages / "compress_layer.html").read_text(encoding="utf-8")  # canlib's choices and its converter
    assert "fill_can_layer" in set(re.findall(r'<span class="n[fc]">(\w+)</span>', layer_page))
    assert re.search(r'<img[^>]+src="[^"]+\.png"', layer_page), "no plot image in the chapter on canlib's layer"
    assert "Traceback" not in layer_page
    assert re.search(r'<img[^>]+src="[^"]+\.png"', html), "no plot image in the compress chapter"
    assert "Traceback" not in html
    for chapter in PLOTTING_CHAPTERS:  # every figure of the reproduction chapters reaches the HTML
        page = (pages / f"{chapter}.html").read_text(encoding="utf-8")
        assert re.search(r'<img[^>]+src="[^"]+\.png"', page), f"no plot image in the {chapter} chapter"
        assert "Traceback" not in page, f"a traceback in the {chapter} chapter"
    repository = yaml.safe_load((REPO / "_config.yml").read_text())["repository"]
    for page in pages.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"\d+/\d+ \[[0-9:<?]+", text), f"a progress bar in {page.name}"  # they belong in terminals
        assert not remote_mathjax(text), f"{page.name} loads MathJax from the network: {remote_mathjax(text)}"
        source = f"{repository['url']}/edit/{repository['branch']}/book/{page.stem}.md"  # the page's own source
        assert source in text and f"{repository['url']}/issues/new" in text, f"{page.name}: no source or issue link"
    assert "Polosukhin" in (pages / "references.html").read_text(encoding="utf-8")


def test_every_page_reads_clean_in_a_browser(built_book: Path) -> None:
    """Every page of the build as headless Chromium shows it once MathJax is done: no MathJax error, no TeX left
    as text, no NaN or Python value in the prose, no traceback in an output, no table or code block wider than the
    text column, no equation numbered twice, no glyph cut off by its box, no template grammar, no number broken across
    lines in a table, no plot shrunk to illegible text, no paragraph with more than five numbers, and every chapter
    (a MyST notebook of _toc.yml) links its notebook, a valid .ipynb with code cells (:mod:`book_browser`)."""
    import book_browser

    paths = book_browser.install_chromium()
    if paths is None:
        missing("Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)")
    pages = sorted(built_book.glob("*.html"))
    assert {p.stem for p in pages} >= {f.stem for f in toc_notebooks()}, "a chapter of _toc.yml has no page"
    with book_browser.browser(paths) as session:
        found = book_browser.book_faults(session, pages, frozenset(f.stem for f in toc_notebooks()))
    assert not found, "pages a reader would find broken:\n" + book_browser.report(found)


COMPRESS_WORDS_BEFORE = 13_999  # page_words of the compression chapter as built at commit df330ed


def test_the_layer_figure_is_drawn_once_and_the_compression_chapter_fits_two_thirds_of_its_old_length(
    built_book: Path,
) -> None:
    """The picture of the two layers is drawn by one page (the introduction) and linked from the others; the
    compression chapter reads in at most two thirds of the words it once took."""
    drawn = [
        page.name for page in built_book.glob("*.html") if "decoder_layers_figure" in page.read_text(encoding="utf-8")
    ]
    assert drawn == ["intro.html"], drawn
    assert 'href="intro.html#fig-intro-layers"' in (built_book / "compress.html").read_text(encoding="utf-8")
    assert page_words(built_book / "compress.html") <= COMPRESS_WORDS_BEFORE * 2 // 3


def page_words(page: Path) -> int:
    """The words of a built page's article: its prose, code, outputs and formulas' TeX, drop-downs included."""
    from html.parser import HTMLParser

    class Words(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.depth, self.words, self.skip = 0, 0, 0

        def handle_starttag(self, tag: str, attrs: list) -> None:
            if tag == "article" or self.depth:
                self.depth += 1
            if self.depth and tag in ("script", "style"):
                self.skip += 1

        def handle_endtag(self, tag: str) -> None:
            if self.depth and tag in ("script", "style"):
                self.skip -= 1
            if self.depth:
                self.depth -= 1

        def handle_data(self, data: str) -> None:
            if self.depth and not self.skip:
                self.words += len(data.split())

    parser = Words()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.words


def test_every_built_page_and_readme_show_one_word_per_claim_the_registrys(built_book: Path) -> None:
    """Every verdict a reader sees, read from the built HTML (each marked with its claim id by
    _code.marks.mark) and from the verdicts README's findings name: one word per claim (and budget) across
    the pages, and that word is the registry's (``python -m repro claims --json``)."""
    import json

    from verdict_marks import disagreements, readme_verdicts, shown_verdicts

    found = []
    for page in sorted(built_book.glob("*.html")):
        found += [(page.name, *m) for m in shown_verdicts(page.read_text(encoding="utf-8"))]
    found += [("README.md", *m) for m in readme_verdicts((REPO / "README.md").read_text(encoding="utf-8"))]
    assert not disagreements(found), "\n".join(disagreements(found))
    out = subprocess.run(
        [sys.executable, "-m", "repro", "claims", "--json"],
        env=book_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    registry = {}
    for row in json.loads(out.stdout):
        registry[row["id"], ""] = row["verdict"]
        for other in (row, *row["beside"]):
            if other["budget"] is not None:
                registry[row["id"], str(other["budget"])] = other["verdict"]
    wrong = [
        f"{page}: {claim} ({budget}) {word!r}, the registry {registry.get((claim, budget))!r}"
        for page, claim, budget, word in found
        if registry.get((claim, budget)) != word
    ]
    assert not wrong, "\n".join(wrong)
    pages = {page for page, *_ in found}
    assert {"results.html", "speed.html", "depths.html", "beyond.html"} <= pages, pages
    every = {row["id"] for row in json.loads(out.stdout)}
    of_paper = {row["id"] for row in json.loads(out.stdout) if row["source"] == "paper"}
    assert {c for p, c, _, _ in found if p == "glance.html"} >= of_paper  # it lists every claim of the paper
    assert {c for p, c, _, _ in found if p == "scorecard.html"} == every  # README links it for every claim
    assert {c for p, c, _, _ in found if p == "README.md"} >= {"can-faster", "can-within-0.5"}  # its findings
