"""The speed appendix's record of which code each stored GPU run timed: a stored operator count is credited to a
run only where the run's commit and the counted commit hold the same model and decoding code (checked with git)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import REPO

from canlib.studies import gpu_results as gpu
from canlib.studies.chapters.speed_history import TIMED_CODE
from canlib.studies.gpu_results import stored_ops


def same_code(a: str, b: str) -> bool | None:
    """Whether commits a and b hold the same canlib/model and canlib/decoding (None: git cannot tell here)."""
    if not shutil.which("git") or not (REPO / ".git").exists():
        return None
    for commit in (a, b):
        if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO, capture_output=True).returncode:
            return None
    diff = subprocess.run(["git", "diff", "--quiet", a, b, "--", "canlib/model", "canlib/decoding"], cwd=REPO)
    return diff.returncode == 0


@pytest.mark.parametrize("run", sorted(TIMED_CODE))
def test_a_runs_kernel_count_is_of_the_code_it_timed(run):
    run_commit = str(gpu.gpu_speed("eager", run)[1]["commit"]).removesuffix("+dirty")
    counted_commit = str(stored_ops(TIMED_CODE[run])[1]["commit"]).removesuffix("+dirty")
    same = same_code(run_commit, counted_commit)
    if same is None:
        pytest.skip("no git history of both commits in this checkout")
    assert same, f"{run} timed {run_commit[:7]}, whose model or decoding code differs from {counted_commit[:7]}'s"


def test_the_check_tells_different_code_apart():
    assert same_code("e19dd56", "108477e") in (False, None)  # e19dd56 changed attention.py, config.py and layers.py
