"""What the result pages write by hand: no verdict word typed or spoken in the old vocabulary (every verdict is the
registry's mark, glued), no restatement of the rule (the first page states it once), no corpus size, budget or cache
described otherwise than the code has it."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import REPO

PAGES = ("results", "speed", "beyond", "training", "ablation", "depths", "errors", "tasks", "context")
OLD_WORDS = (
    r"\breproduced\b",
    r"within noise",
    r"beyond noise",
    r"on some sets",
    r"not tested here",
    r"not run yet",
    r"mixed across",
)
RULE = (
    r"two standard errors",
    r"2 s\.e\.",
    r"both intervals (?:meet|miss)",
    r"needs? both intervals",
    r"timed the most tokens",
)
TYPED_VERDICT = r"\*\*(?:holds|does not hold|mixed|inconclusive|not run)\*\*"


def page(name: str) -> str:
    return (REPO / "book" / f"{name}.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", PAGES)
def test_a_page_speaks_the_registrys_words_and_leaves_the_rule_to_the_first_page(name):
    text = page(name)
    found = [p for p in (*OLD_WORDS, *RULE, TYPED_VERDICT) if re.search(p, text, re.I)]
    assert not found, f"{name}.md: {found}"


def test_the_chapter_modules_speak_the_registrys_words():
    found = []
    paths = sorted((REPO / "book" / "_code").glob("*.py"))
    assert len(paths) > 10  # the chapters' modules, beside the pages
    for path in paths:
        if path.stem in ("glance", "scorecard"):
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{path.name}: {p}" for p in (*OLD_WORDS, *RULE) if re.search(p, text, re.I)]
    assert not found, found


def test_the_budget_factors_named_in_the_notes_are_the_codes():
    from repro.results.studies import study_record

    factors = {study_record("budget").factor}  # 1x is the main plan
    for path in (REPO / "measurements" / "README.md", REPO / "book" / "gpu.md", REPO / "book" / "beyond.md"):
        named = {int(x) for x in re.findall(r"budget (?:study )?at (\d+)x", path.read_text(encoding="utf-8"))}
        assert named <= factors, f"{path.name} names budgets {sorted(named)}, the code {factors}"


def test_the_words_about_aans_cache_are_the_codes():
    """AAN keeps one prefix sum per target position, as its cache_layout says; the words say so too."""
    from canlib.model.config import preset
    from canlib.model.layers import AANDecoderLayer

    for where, text in (
        ("context.md", page("context")),
        ("AANDecoderLayer", AANDecoderLayer.__doc__),
    ):
        assert not re.search(r"(?:keeps|keeping) (?:only )?(?:one |a )?running sum", text), where
        assert re.search(r"per (?:target )?position", text), where
    layer = AANDecoderLayer(preset("tiny-aan", dropout=0.0)).eval()
    layer._rest = lambda x, memory, source, stepping: x  # the cross-attention and FFN after it: not the cache's
    steps, rows = 4, 2
    cache = layer.new_cache(rows, steps, torch.zeros(1))
    xs = torch.randn(steps, rows, 1, layer.gate.in_features // 2)
    with torch.no_grad():
        for t in range(steps):
            layer.step(xs[t], None, None, cache, t, {})
            before = cache["sum"].clone()
            layer.step(xs[t], None, None, cache, t, {})  # a step run twice, as graph capture runs it
            assert torch.equal(cache["sum"], before)
        prefix = torch.cumsum(torch.stack([layer.avg_norm(xs[t])[:, 0] for t in range(steps)]), dim=0)
    assert torch.allclose(cache["sum"], prefix, atol=1e-5)  # one prefix sum per target position
