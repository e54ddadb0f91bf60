"""``python -m repro rescore DIR``: every stored score recomputed from what is stored beside it.

:func:`rescore` recomputes each stored run's sacreBLEU from its hypothesis files and the corpus's references;
:func:`recheck` verifies that each beyond study's summary quotes exactly the scores of the runs it names.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from canlib.bleu import corpus_scores
from canlib.catalogue import scale_spec
from canlib.data.preparation import prepared
from repro.experiments.summarise import scores
from repro.results.files import load_result
from repro.results.layout import read_hypotheses


def rescore(folder: Path, tolerance: float = 1e-9) -> list[dict[str, Any]]:
    """Recompute sacreBLEU of every stored run under ``folder`` (a results folder or one scale of it) from its
    hypothesis files and the corpus's references; one row per run and split. A stored score that differs, or a
    missing hypothesis file, is a ValueError naming the file."""
    files = sorted(p for p in folder.rglob("*.json") if "runs" in p.relative_to(folder).parts)
    if not files:
        raise FileNotFoundError(f"{folder}: no stored run results (runs/<corpus>/<system>-seed<k>.json)")
    rows = []
    for path in files:
        result, prov = load_result(path)
        data = prepared(result["corpus"], scale_spec(prov["scale"]).corpus_scale)
        for split, name in result["hyp_files"].items():
            hyp_path = path.with_name(name)
            if not hyp_path.is_file():
                raise ValueError(f"{path}: its hypotheses {hyp_path} are missing")
            hyps = read_hypotheses(hyp_path)
            refs = list(data.split(split).tgt_text)
            if len(hyps) != len(refs):
                raise ValueError(f"{hyp_path}: {len(hyps)} lines, the {split} references have {len(refs)}")
            now = corpus_scores(hyps, refs, lang=result["tgt_lang"])["bleu"]
            stored = result["scores"][split]["bleu"]
            if abs(now - stored) > tolerance:
                raise ValueError(f"{path}: stored {split} sacreBLEU {stored} but its hypotheses score {now}")
            rows.append({"file": str(path), "split": split, "bleu": now})
    return rows


def recheck(folder: Path) -> int:
    """Every stored study summary under ``folder`` must quote exactly the scores of the model results it names
    (whose sacreBLEU :func:`rescore` recomputes from their hypotheses); returns the scores checked, a ValueError
    names the first difference."""
    checked = 0
    for path in sorted(folder.rglob("beyond/*.json")):
        summary, _ = load_result(path)
        for row in summary.get("runs", []):
            run_path = path.parent.parent / f"{row['file']}.json"
            if not run_path.is_file():
                raise ValueError(f"{path}: names {row['file']}, which is not stored in {path.parent.parent}")
            result, _ = load_result(run_path)
            if row["scores"] != scores(result):
                raise ValueError(f"{path}: the scores of {row['file']} differ from {run_path}")
            checked += sum(len(v) for v in row["scores"].values())
    return checked


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Recompute the sacreBLEU of every stored run under DIR from its hypotheses and the corpus's references, and "
        "check that every beyond study's summary quotes its runs' scores exactly; fail on a difference."
    )
    parser.add_argument("folder", metavar="DIR", help="a results folder (e.g. book/results) or one scale of it")


def run(args: argparse.Namespace) -> int:
    """``python -m repro rescore DIR``: how many scores were reproduced and rechecked."""
    rows = rescore(Path(args.folder))
    print(
        f"{len(rows)} stored sacreBLEU scores of {len({r['file'] for r in rows})} runs reproduced from their hypotheses"
    )
    if quoted := recheck(Path(args.folder)):
        print(f"{quoted} scores quoted by the beyond studies' summaries equal their stored runs'")
    return 0
