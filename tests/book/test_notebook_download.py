"""Every chapter downloadable as a notebook (book/_ext/notebook_download.py): a MyST page becomes an .ipynb beside its
HTML page, holding the page's code cells in order, and the page opens with a link to it; a plain page gets neither.
The built book's pages and files are checked in a browser (tests/book/book_browser.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
from docutils import nodes
from docutils.utils import new_document

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "book" / "_ext"))
import notebook_download  # noqa: E402

PAGE = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A chapter

Some prose.

```{code-cell} ipython3
x = 1 + 1
```

More prose.

```{code-cell} ipython3
:tags: [remove-cell]
print(x)
```
"""


def app(srcdir: Path, outdir: Path, docs: dict[str, str]) -> SimpleNamespace:
    """What the extension reads of Sphinx: the pages' sources, the output folder, the builder's format."""
    for docname, text in docs.items():
        (srcdir / f"{docname}.md").parent.mkdir(parents=True, exist_ok=True)
        (srcdir / f"{docname}.md").write_text(text, encoding="utf-8")
    env = SimpleNamespace(found_docs=set(docs), doc2path=lambda d: str(srcdir / f"{d}.md"))
    return SimpleNamespace(env=env, outdir=str(outdir), builder=SimpleNamespace(format="html"))


def titled_page(title: str) -> nodes.document:
    doc = new_document("page")
    section = nodes.section()
    section += nodes.title(title, title)
    section += nodes.paragraph("Some prose.", "Some prose.")
    doc += section
    return doc


def test_a_myst_page_becomes_a_valid_notebook_with_its_code_cells_in_order(tmp_path: Path):
    sphinx = app(tmp_path / "src", tmp_path / "html", {"book/chapter": PAGE, "book/references": "# References\n"})
    notebook_download.write_notebooks(sphinx, None)
    written = tmp_path / "html" / "book" / "chapter.ipynb"
    notebook = nbformat.read(written, as_version=4)
    nbformat.validate(notebook)
    code = [c.source for c in notebook.cells if c.cell_type == "code"]
    assert code == ["x = 1 + 1", "print(x)"]  # the two cells of PAGE, written here
    assert notebook.metadata.kernelspec.name == "python3"
    assert not (tmp_path / "html" / "book" / "references.ipynb").exists()  # a plain page is no notebook


def test_a_failed_build_writes_no_notebook(tmp_path: Path):
    sphinx = app(tmp_path / "src", tmp_path / "html", {"book/chapter": PAGE})
    notebook_download.write_notebooks(sphinx, RuntimeError("the build failed"))
    assert not (tmp_path / "html").exists()


def test_a_notebook_page_opens_with_a_link_to_its_notebook_under_its_title(tmp_path: Path):
    sphinx = app(tmp_path / "src", tmp_path / "html", {"book/chapter": PAGE, "book/references": "# References\n"})
    chapter, plain = titled_page("A chapter"), titled_page("References")
    notebook_download.add_link(sphinx, chapter, "book/chapter")
    notebook_download.add_link(sphinx, plain, "book/references")
    section = chapter[0]
    assert isinstance(section[0], nodes.title) and isinstance(section[1], nodes.paragraph)
    link = next(iter(section[1].findall(nodes.reference)))
    assert link["refuri"] == "chapter.ipynb"  # beside chapter.html
    assert link.astext() == "Download this chapter as a notebook (.ipynb)"
    assert not list(plain.findall(nodes.reference))
