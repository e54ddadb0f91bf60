"""scripts/gpu_settle.sh and what it asks of the engine: the converged studies, the Table 2 systems first, seeds of one
system grouped into one stacked run where asked, and the whole script at tiny on a CPU (its dry run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from conftest import SHARED_DATA
from conftest import missing as missing_data

from canlib.catalogue import ABLATION_SYSTEMS, PAPER_SYSTEMS, scale_spec
from repro.experiments.beyond import study_runs
from repro.experiments.pool import stack_groups
from repro.experiments.run import Variant, run
from repro.results import studies as table
from repro.results.layout import Where

ROOT = Path(__file__).resolve().parents[2]
SETTLED = ("baseline", "balanced", "san", "aan", "can", "can_attn", "can_ffn")


def test_the_converged_study_trains_ten_seeds_of_the_table_2_and_5_systems_at_the_converged_recipe(tmp_path):
    where = Where.of("small", tmp_path)
    runs = study_runs("converged", where)
    assert set(PAPER_SYSTEMS + ABLATION_SYSTEMS) == set(SETTLED)
    assert [(r.system, r.seed) for r in runs] == [(s, k) for k in range(1, 11) for s in SETTLED]
    converged = scale_spec("small").recipe("converged")
    assert all(r.budget == {**converged, "seed": r.seed} for r in runs)
    assert runs[0].budget["max_steps"] == 2000 and runs[0].budget["dropout_rng"] == "counter-hash"
    residual = study_runs("converged-residual", where)
    assert residual[0].model_config(100).layer_kinds() == ("can_residual", "can_residual")
    assert {"converged-residual", "converged-nosplit"} <= set(table.CONVERGED)
    assert not set(table.CONVERGED) & set(table.STUDIES)  # the beyond chapter's studies are unchanged


def test_queued_seeds_of_one_system_stack_and_nothing_else_does(tmp_path):
    where = Where.of("small", tmp_path)
    converged = study_runs("converged", where, [1, 2, 3])
    groups = stack_groups(converged + [run("can", where, 1), run("can", where, 2)])  # 1x: torch's dropout
    assert [[(r.system, r.seed) for r in g] for g in groups] == [[(s, 1), (s, 2), (s, 3)] for s in SETTLED]
    residual = study_runs("converged-residual", where, [1, 2])
    assert [len(g) for g in stack_groups(converged[:1] + residual)] == [2]  # another decoder: another stack
    lone = run("can", where, 1, variant=Variant("converged", recipe="converged"))
    assert stack_groups([lone]) == []  # a lone seed trains as a separate run


def test_the_settle_dry_run_trains_the_table_2_systems_first_and_packs_every_converged_model(tmp_path):
    if not (SHARED_DATA / "multi30k-en-de").is_dir():
        missing_data(f"real data {SHARED_DATA}/multi30k-en-de not present")
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    env.update(CANLIB_DATA_DIR=str(SHARED_DATA), CANLIB_CACHE_DIR=str(tmp_path / "cache"))  # nothing trained yet
    out = subprocess.run(
        ["bash", str(ROOT / "scripts/gpu_settle.sh"), "--dry-run"], capture_output=True, text=True, env=env
    )
    log = (tmp_path / "settle.log").read_text()
    assert out.returncode == 0, out.stderr[-3000:]
    first = log.split("step (")[0]  # the first step: seeds 1 and 2 of Baseline, Balanced and CAN, nothing else
    trained = {line.split()[2] for line in first.splitlines() if "(converged): test sacreBLEU" in line}
    assert trained == {"baseline", "balanced", "can"} and first.count("(converged): test sacreBLEU") == 6
    assert "stacked" not in log  # separate processes: stacking measured slower on a GPU
    assert log.count(": exit 0 after") == 6 and "rescore: exit 0" in log
    models = len(SETTLED) * 3 + 3 * 2  # seeds 1-3 of each system and of the two controls
    assert f"stored: {models} converged model(s)" in log
    with tarfile.open(tmp_path / "settle.tar.gz") as archive:
        names = archive.getnames()
    assert sum(n.endswith(".json") and "/runs/" in n for n in names) == models
    summary = json.loads((tmp_path / "dry/tiny/beyond/converged.json").read_text())
    assert len(summary["result"]["runs"]) == len(SETTLED) * 3
    folder_config = next((tmp_path / "cache/runs").rglob("config.json"))  # a trained seed's run folder
    assert json.loads(folder_config.read_text())["train"]["dropout_rng"] == "counter-hash"
