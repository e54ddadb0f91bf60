"""Every chapter downloadable as a Jupyter notebook: its .ipynb beside its HTML page, and a link to it on the page.

The pages are MyST notebooks (Markdown read by jupytext); Jupyter Book's download button offers their .md source
and a PDF, which a reader cannot open as a notebook without jupytext. At build time each page that is a MyST
notebook is converted with jupytext into ``<page>.ipynb`` next to ``<page>.html`` (its cells, no outputs: the
reader runs it in ``book/`` of a checkout, where ``_code`` imports), and the page opens with a link to that file.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
from docutils import nodes
from sphinx.application import Sphinx

LINK_TEXT = "Download this chapter as a notebook (.ipynb)"


def is_myst_notebook(source: Path) -> bool:
    """A page whose front matter names jupytext: a notebook, as opposed to a plain page (references, API)."""
    text = source.read_text(encoding="utf-8")
    return text.startswith("---") and "jupytext:" in text.split("\n---", 1)[0]


def add_link(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """A paragraph under the page's title linking its notebook (the file :func:`write_notebooks` writes)."""
    source = Path(app.env.doc2path(docname))
    if not is_myst_notebook(source):
        return
    link = nodes.reference("", LINK_TEXT, refuri=f"{Path(docname).name}.ipynb", internal=False)
    link["classes"].append("notebook-download")
    paragraph = nodes.paragraph("", "", link, classes=["notebook-download"])
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or not isinstance(section[0], nodes.title):
        doctree.insert(0, paragraph)
    else:
        section.insert(1, paragraph)


def write_notebooks(app: Sphinx, exception: Exception | None) -> None:
    """Each MyST notebook page as ``<outdir>/<docname>.ipynb``, converted by jupytext and checked by nbformat."""
    if exception is not None or app.builder.format != "html":
        return
    for docname in sorted(app.env.found_docs):
        source = Path(app.env.doc2path(docname))
        if not source.is_file() or not is_myst_notebook(source):
            continue
        notebook = jupytext.read(source)
        notebook.metadata.pop("jupytext", None)  # the .ipynb is the notebook itself, not paired with the .md
        nbformat.validate(notebook)
        target = Path(app.outdir) / f"{docname}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, target)


def setup(app: Sphinx) -> dict[str, bool]:
    app.connect("doctree-resolved", add_link)
    app.connect("build-finished", write_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
