"""Fast checks of the book's text (no execution): citations resolve, every chapter ends with exercises and
collapsed solutions, every decimal or percent in the prose is the paper's (with its label) or a labelled
constant, and the scale sizes the prose quotes are the ones the code trains."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from repro.studies.paper import paper_numbers

REPO = Path(__file__).resolve().parents[2]


def chapters(appendix: bool = True) -> list[Path]:
    """The notebook chapters of _toc.yml (with ``appendix=False``, not those of its Appendix part); the plain pages
    (references, API reference) are not."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    parts = [p for p in toc.get("parts", []) if appendix or p.get("caption") != "Appendix"]
    files = [REPO / f"{f}.md" for f in [toc["root"]] + [c["file"] for part in parts for c in part["chapters"]]]
    return [f for f in files if "jupytext:" in f.read_text(encoding="utf-8").split("\n---", 1)[0]]


def test_every_cited_key_is_in_references_bib():
    keys = set(re.findall(r"@\w+\{([^,\s]+),", (REPO / "book" / "references.bib").read_text()))
    for path in chapters():
        for group in re.findall(r"\{cite[:a-z]*\}`([^`]+)`", path.read_text()):
            for key in group.split(","):
                assert key.strip() in keys, f"{path.name}: {{cite}} key {key.strip()!r} is not in book/references.bib"


def test_every_chapter_ends_with_exercises_and_collapsed_solutions():
    for path in chapters(appendix=False):  # an appendix page operates; it need not teach
        text = path.read_text()
        assert "\n## Exercises\n" in text, f"{path.name}: no '## Exercises' section"
        tail = text.split("\n## Exercises\n")[-1]
        assert "\n## " not in tail, f"{path.name}: the Exercises section is not the last one"
        assert "\n### In code" in tail or "\n### " not in tail, f"{path.name}: a section after the Exercises"
        assert re.search(r"```\{admonition\} Solutions\n:class: dropdown\n", tail), (
            f"{path.name}: no collapsed solutions"
        )
        assert len(re.findall(r"^\d\. ", tail.split("```{admonition}")[0], flags=re.M)) >= 2, (
            f"{path.name}: < 2 exercises"
        )


def test_the_speedups_the_introduction_quotes_are_the_papers_maxima_not_means():
    paper = paper_numbers()
    ratios = [
        (rows["CAN"][2] / rows["Balanced"][2], rows["CAN"][2] / rows["Baseline"][2])
        for table in ("table2_wmt14", "table3_wmt17")
        for task, rows in paper[table].items()
        if not task.startswith("_")
    ]
    assert len(ratios) == 14
    assert round(max(r[0] for r in ratios), 2) == 1.42 and round(max(r[1] for r in ratios), 2) == 2.82
    assert sum(r[0] for r in ratios) / 14 < 1.42 and sum(r[1] for r in ratios) / 14 < 2.82
    intro = (REPO / "book" / "intro.md").read_text()
    assert "**maxima**" in intro


def test_the_fig2_diagonal_quoted_in_the_derivation_matches_the_paper():
    """compress says the paper's own Fig. 2 diagonal is below 0.9 at its first two layers: true of the paper's
    numbers, and not of any later layer (else it would say more layers)."""
    diagonal = [row[i] for i, row in enumerate(paper_numbers()["fig2_similarity"]["self_vs_cross"])]
    text = " ".join((REPO / "book" / "compress.md").read_text().split())
    below = sum(value < 0.9 for value in diagonal)
    assert below == 2 and all(value < 0.9 for value in diagonal[:2])
    assert "the paper's diagonal is below 0.9 at its first two layers" in text
    assert "above 0.9 between the two" not in text


# Numbers a chapter's prose may state without a cell printing them, each with where it comes from. Anything
# else with a decimal point or a percent sign must be the paper's (paper_numbers.json) or be printed by a cell.
LABELLED_CONSTANTS = {
    ("training.md", "0.9"): "Adam's beta1 in fairseq's Transformer recipe (the prose says so)",
    ("training.md", "0.98"): "Adam's beta2 in fairseq's Transformer recipe (the prose says so)",
    ("compress.md", "0.9"): "the paper's own words, quoted: 'a high similarity >0.9 for the diagonal entries'",
    ("context.md", "2.5"): "5d / 2d, the cache ratio derived in the same sentence",
}


def prose(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each paragraph of a chapter's prose before its exercises: no front
    matter, code cells, math, inline code, inline math or link targets."""
    lines = text.split("\n## Exercises\n")[0].splitlines()
    paragraphs: list[tuple[int, str]] = []
    fence, math, start, words = None, False, 0, []
    front = bool(lines) and lines[0].strip() == "---"

    def close():
        if words:
            paragraphs.append((start, " ".join(words)))
            words.clear()

    for number, line in enumerate(lines, 1):
        s = line.strip()
        if front:
            front = not (number > 1 and s == "---")
            continue
        if fence:
            fence = None if s == fence else fence
            continue
        opener = re.match(r"^(`{3,}|:{3,})(\{[\w-]+\})?", s)
        if opener or s.startswith("$$") or not s:
            close()
            if opener and opener.group(2) in ("{code-cell}", "{math}"):
                fence = opener.group(1)
            if s.startswith("$$"):
                math = math if (len(s) > 2 and s.endswith("$$")) else not math
            continue
        if not math:
            if not words:
                start = number
            words.append(re.sub(r"\]\([^)]*\)", "]", re.sub(r"\$[^$]*\$", "", re.sub(r"`[^`]*`", "", s))))
    close()
    return paragraphs


def paper_candidates() -> tuple[list[float], list[float]]:
    """Every number of paper_numbers.json, and what prose derives from them the way the paper compares:
    each system against Balanced and against Baseline in the same table or figure and column, as a
    difference (BLEU gaps), a ratio (speed-ups) and a percent change. Returns (values, percents)."""
    values, percents = [], []

    def numeric(v) -> bool:
        return isinstance(v, list) and bool(v) and all(isinstance(x, (int, float)) for x in v)

    def walk(node):
        if isinstance(node, dict):
            for ref in ("Balanced", "Baseline"):
                if numeric(node.get(ref)):
                    for name, row in node.items():
                        if name != ref and numeric(row) and len(row) == len(node[ref]):
                            for a, b in zip(row, node[ref]):
                                values.extend([abs(a - b), a / b])
                                percents.append(100 * (a / b - 1))
            for key, v in node.items():
                if not key.startswith("_"):
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            values.append(node)

    walk(paper_numbers())
    return values, percents + values


def matches(token: str, candidates: list[float], scale: float = 1.0) -> bool:
    """Whether some candidate (divided by ``scale``) rounds to ``token`` at the decimals it is printed with."""
    decimals = len(token.split(".")[1]) if "." in token else 0
    target = float(token)
    return any(abs(c / scale - target) <= 0.5 * 10**-decimals + 1e-9 for c in candidates)


def test_every_decimal_and_percent_in_chapter_prose_is_the_papers_with_its_label_or_a_labelled_constant():
    values, percents = paper_candidates()
    unexplained = []
    for path in chapters():
        for number, paragraph in prose(path.read_text()):
            for m in re.finditer(r"(?<![\w.])(\d+(?:\.\d+)?%|\d+\.\d+)(M?)", paragraph):
                token, millions = m.group(1), m.group(2)
                if (path.name, token) in LABELLED_CONSTANTS:
                    continue
                if token.endswith("%"):
                    ok = matches(token[:-1], percents)
                else:
                    ok = matches(token, values, 1e6 if millions else 1.0)
                if not ok:
                    unexplained.append(f"{path.name}:{number}: {token}{millions} is not one of the paper's numbers")
                elif "paper" not in paragraph.lower():
                    unexplained.append(
                        f"{path.name}:{number}: {token}{millions} is the paper's, but its paragraph does not say so"
                    )
    assert not unexplained, (
        "numbers in prose that no cell prints (print them from a cell, quote them from "
        "paper_numbers.json as the paper's, or label them in LABELLED_CONSTANTS):\n" + "\n".join(unexplained)
    )


def test_the_scales_the_prose_describes_are_the_ones_the_code_trains():
    from canlib.catalogue import scale_spec
    from canlib.data.corpora import get_corpus
    from canlib.model.config import preset

    width = {preset(f"{s}-can").d_model: s for s in ("tiny", "small")}
    found = 0
    for path in chapters():
        text = re.sub(r"\s+", " ", path.read_text())
        for m in re.finditer(r"d ?= ?(\d+)\)?[^.]{0,40}? trained for ([\d,]+) updates", text):
            scale = width.get(int(m.group(1)))
            assert scale, f"{path.name}: {m.group(0)!r}: d={m.group(1)} is the width of no trained scale ({width})"
            steps = scale_spec(scale).train["max_steps"]
            assert int(m.group(2).replace(",", "")) == steps, (
                f"{path.name}: {m.group(0)!r}: {scale} trains {steps} updates"
            )
            found += 1
        for m in re.finditer(r"([\d,]+) real Multi30k En-De sentence pairs", text):
            pairs = get_corpus("multi30k-en-de").scale("tiny").train_pairs
            assert int(m.group(1).replace(",", "")) == pairs, (
                f"{path.name}: {m.group(0)!r}: tiny trains on {pairs} pairs"
            )
            found += 1
    assert found >= 2, "the chapters no longer state the scales' budgets in these words: update the patterns"


def test_the_readme_and_the_gpu_plan_quote_the_stored_cpu_training_time():
    """The CPU time of a small run in README and measurements/README.md is the stored measurement
    (book/results/cpu/train_small.json), not a guess."""
    from canlib.catalogue import scale_spec
    from repro.results.files import load_result

    result, prov = load_result(REPO / "book" / "results" / "cpu" / "train_small.json")
    seconds = [run["seconds_per_update"] for run in result["runs"].values()]
    assert prov["scale"] == "small" and result["max_tokens"] == scale_spec("small").train["max_tokens"]
    plan = " ".join((REPO / "measurements" / "README.md").read_text(encoding="utf-8").split())
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert f"took {min(seconds):.1f}-{max(seconds):.1f} s" in plan
    hours = scale_spec("small").train["max_steps"] * sum(seconds) / len(seconds) / 3600
    assert f"about {round(hours)} hours" in plan and f"about {round(hours)} hours a run" in readme


CLAIM_PAGES = ("results.md", "beyond.md", "training.md", "ablation.md")  # the pages that show their claims as plots
MOST_GLUED = 5  # more glued values than this in one paragraph is a table or a figure written out as prose


def glued_per_paragraph(text: str) -> list[tuple[int, int]]:
    """(first line, count) of each prose paragraph's glued values (``{glue:text}`` roles; a verdict mark is a word
    and glued with ``{glue}``); fenced cells, math and the exercises are not prose (:func:`prose`)."""
    raw = text.split("\n## Exercises\n")[0]
    lines = raw.splitlines()
    out = []
    for start, _ in prose(raw):
        end = start
        while end < len(lines) and lines[end - 1].strip():  # the paragraph's source lines, roles intact
            end += 1
        out.append((start, sum(line.count("{glue:text}") for line in lines[start - 1 : end])))
    return out


def test_glued_values_are_counted_per_paragraph():
    text = (
        "# T\n\nA {glue:text}`a` b {glue:text}`b:.2f`\nc {glue}`verdict_x` {glue:text}`c`.\n\n$$x$$\n\n"
        "d {glue:text}`d`\n"
    )
    assert glued_per_paragraph(text) == [(1, 0), (3, 3), (8, 1)]


def test_no_paragraph_of_the_claim_pages_holds_more_than_five_glued_values():
    """results, beyond, training and ablation show their claims as figures with tables below them: a paragraph
    says what a figure shows in a sentence or two, it does not list the numbers."""
    crowded = [
        f"{name}:{line}: {count} glued values"
        for name in CLAIM_PAGES
        for line, count in glued_per_paragraph((REPO / "book" / name).read_text(encoding="utf-8"))
        if count > MOST_GLUED
    ]
    assert not crowded, "paragraphs that read as tables (put the numbers in a figure or table):\n" + "\n".join(crowded)


# -- what the pages say against what the code and the stored results give -----------------------------------------


def stored_json(path: Path) -> dict:
    import json

    return json.loads(path.read_text(encoding="utf-8"))


def test_the_papers_on_seeds_and_the_bootstrap_are_in_the_bibliography_and_cited_where_the_standard_is():
    """The BLEU standard names Clark et al. (2011) for its seeds and reads Koehn's (2004) paired bootstrap: both are
    entries of references.bib, and the scorecard's section on the standards cites both."""
    bib = (REPO / "book" / "references.bib").read_text(encoding="utf-8")
    entries = dict(re.findall(r"@\w+\{([^,\s]+),(.*?)\n\}", bib, re.S))
    found = {
        (author, year): key
        for key, body in entries.items()
        for author, year in (("Clark", "2011"), ("Koehn", "2004"))
        if re.search(rf"author\s*=\s*\{{[^}}]*{author}", body) and re.search(rf"year\s*=\s*\{{{year}\}}", body)
    }
    assert set(found) == {("Clark", "2011"), ("Koehn", "2004")}, f"references.bib holds {sorted(found)}"
    standards = (REPO / "book" / "scorecard.md").read_text(encoding="utf-8").split("## The standards", 1)[1]
    cited = {
        k.strip() for g in re.findall(r"\{cite[:a-z]*\}`([^`]+)`", standards.split("\n## ")[0]) for k in g.split(",")
    }
    assert set(found.values()) <= cited, f"the standards cite {sorted(cited)}"


def test_the_ablation_page_shows_each_claim_once():
    """The list of claims the ablation page plots and tables, evaluated as the page builds it: no claim twice."""
    from _code import ablation as chapter

    text = (REPO / "book" / "ablation.md").read_text(encoding="utf-8")
    (line,) = re.findall(r"^against = .*$", text, re.M)
    found = {claim: claim for claim in (*chapter.BELOW.values(), "can-ffn-keeps-bleu")}
    against = eval(line.removeprefix("against = "), {"chapter": chapter, "found": found})
    assert len(against) == len(set(against)) and set(against) >= set(chapter.BELOW.values()), against


def test_the_introduction_names_the_word_the_scorecard_gives_claims_below_their_standard():
    """Below its standard (tiny's models) a claim's word is inconclusive, whatever its intervals say; the introduction
    quotes that word, not one the registry does not have."""
    from repro.studies.claims import BY_ID
    from repro.studies.judges import judged_as
    from repro.studies.verdict import HOLDS, INCONCLUSIVE, STATES

    word = judged_as(BY_ID["can-within-0.5"], HOLDS, "", "", meets=False).word
    assert word == INCONCLUSIVE
    intro = " ".join((REPO / "book" / "intro.md").read_text(encoding="utf-8").split())
    quoted = re.findall(r'the scorecard marks those claims "([^"]+)"', intro)
    assert quoted == [word] and word in STATES, quoted


def test_the_introduction_does_not_put_the_stored_runs_on_one_gpu_model_when_their_provenance_names_more():
    """The plan's runs name two devices in their provenance (the second depth seeds on an H200): the introduction
    glues the devices with their counts of runs instead of naming one."""
    from collections import Counter

    from _code.readers import devices_in_words
    from canlib.catalogue import ALL_SYSTEMS
    from repro.studies.store import Store

    folder = REPO / "book" / "results" / "small" / "runs" / "multi30k-en-de"
    runs = [p for s in ALL_SYSTEMS for p in folder.glob(f"{s}-seed*.json") if p.stem.rsplit("-seed", 1)[0] == s]
    devices = Counter(stored_json(p)["provenance"]["device"] for p in runs)
    assert len(devices) > 1  # the stored runs: an H100 and an H200
    plan = Store("small", REPO / "book" / "results")
    words = devices_in_words(plan.provenances(plan.runs(s) for s in ALL_SYSTEMS))
    said = dict((d, int(n)) for n, d in re.findall(r"(\d+) (?:runs? )?on (.+?)(?= and \d|, \d|$)", words))
    assert said == dict(devices), words
    intro = " ".join((REPO / "book" / "intro.md").read_text(encoding="utf-8").split())
    assert not re.search(r"on one NVIDIA H\d00", intro)
    assert "{glue:text}`plan_devices`" in intro


def test_readmes_opening_says_the_kernel_counts_the_stored_operator_count_gives():
    """A CAN step against a Balanced step on the GPU's code path, per layer and per step, as ops.json counts them."""
    ops = stored_json(REPO / "book" / "results" / "cpu" / "ops.json")["result"]["systems"]
    count = {
        s: {p: round(ops[s]["cuda"][p]["kernel_operators"]) for p in ("per_layer", "step")} for s in ("can", "balanced")
    }
    opening = " ".join((REPO / "README.md").read_text(encoding="utf-8").split("\n## ", 1)[0].split())
    assert "a third of the sequential kernels" not in opening
    assert (
        f"{count['can']['per_layer']} of Balanced's {count['balanced']['per_layer']} kernels per decoder layer "
        f"({count['can']['step']} of {count['balanced']['step']} per step" in opening
    ), opening


def test_the_table_of_contents_teaches_reproduces_then_operates_in_an_appendix():
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    assert [p["caption"] for p in toc["parts"]] == ["The idea", "Reproducing the paper", "Appendix"]
    appendix = [c["file"] for c in toc["parts"][-1]["chapters"]]
    assert {"book/gpu", "book/costs", "book/provenance"} <= set(appendix), appendix
    training = (REPO / "book" / "training.md").read_text(encoding="utf-8")
    assert "## What `full` costs" not in training and "(costs.md)" in training  # moved, and linked
