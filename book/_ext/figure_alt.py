"""Alt text for the book's figures: a reader who cannot see an image gets what it shows, not its file's name.

A notebook cell's figure gets the alt text its cell gives (``mystnb: image: alt:``); one that gives none gets its
caption's first sentence, which says what the figure shows. An image with neither is a warning, which the book's
build (``-W``) turns into an error. Sphinx would otherwise write the image's path, named by the hash of its bytes.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)


def first_sentence(text: str) -> str:
    """The caption's first sentence: up to the first full stop followed by a space (not the one of "Fig. 6")."""
    text = " ".join(text.split())
    match = re.search(r"(?<!\bFig)(?<!\bEq)(?<!\bTab)\.\s", text)
    return text[: match.start() + 1] if match else text


def give_alt_text(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Every image without alt text gets its figure's caption's first sentence, or a warning naming the page."""
    for image in doctree.findall(nodes.image):
        if image.get("alt"):
            continue
        figure = image.parent  # a cell's figure holds its output's container, which holds the image
        while figure is not None and not isinstance(figure, nodes.figure):
            figure = figure.parent
        captions = list(figure.findall(nodes.caption)) if figure is not None else []
        if captions:
            image["alt"] = first_sentence(captions[0].astext())
        else:
            logger.warning("an image without alt text or a caption: %s", image.get("uri"), location=image)


def setup(app: Sphinx) -> dict[str, bool]:
    app.connect("doctree-resolved", give_alt_text)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
