"""The book's figures get alt text that says what they show (book/_ext/figure_alt.py): a cell's own alt text is kept,
a figure without one gets its caption's first sentence, and an image with neither is a warning (an error in the
book's -W build), never its file's name."""

from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes
from docutils.utils import new_document

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "book" / "_ext"))
import figure_alt  # noqa: E402


def figure(caption: str | None, alt: str | None = None) -> tuple[nodes.figure, nodes.image]:
    """A cell's figure as myst-nb builds it: the image inside the output's container, the caption after it."""
    image = nodes.image(uri="../_images/" + "3f" * 32 + ".png", **({"alt": alt} if alt else {}))
    fig = nodes.figure("", nodes.container("", image))
    if caption is not None:
        fig += nodes.caption(caption, caption)
    return fig, image


def document(*children: nodes.Node) -> nodes.document:
    doc = new_document("page")
    for child in children:
        doc += child
    return doc


def test_a_caption_gives_its_first_sentence_not_the_one_of_an_abbreviation():
    assert figure_alt.first_sentence("Figure 8 at this scale. Top: ours.") == "Figure 8 at this scale."
    assert figure_alt.first_sentence("As in Fig. 6 of the paper. More.") == "As in Fig. 6 of the paper."
    assert figure_alt.first_sentence("One sentence, no stop") == "One sentence, no stop"


def test_an_image_keeps_its_cells_alt_text_or_gets_its_captions(monkeypatch):
    said, captioned = figure("BLEU per system. Top: ours.")
    kept, given = figure("Ignored. Caption.", alt="Four bars, one per head.")
    figure_alt.give_alt_text(None, document(said, kept), "page")
    assert captioned["alt"] == "BLEU per system."
    assert given["alt"] == "Four bars, one per head."


def test_an_image_without_caption_or_alt_text_is_a_warning(monkeypatch):
    warned = []
    monkeypatch.setattr(figure_alt.logger, "warning", lambda *args, **kwargs: warned.append(args))
    bare = nodes.image(uri="../_images/abc.png")
    figure_alt.give_alt_text(None, document(nodes.paragraph("", "", bare)), "page")
    assert warned and "without alt text" in warned[0][0]
    assert "alt" not in bare
