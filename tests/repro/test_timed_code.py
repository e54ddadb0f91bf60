"""Which code each stored GPU run timed, read from the stored measurements themselves: an operator count names the
commits whose model and decoding code it counts (``same_code_as``), each such claim is checked here with git, a run
is credited with a count only through it (that the library holds no commit hash of its own:
policy/test_commit_hashes.py)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import REPO

from repro.studies.store import Store, counted_code

STORE = Store("small", REPO / "book" / "results")


def same_code(a: str, b: str) -> bool | None:
    """Whether commits a and b hold the same canlib/model and canlib/decoding (None: git cannot tell here)."""
    if not shutil.which("git") or not (REPO / ".git").exists():
        return None
    for commit in (a, b):
        if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO, capture_output=True).returncode:
            return None
    diff = subprocess.run(["git", "diff", "--quiet", a, b, "--", "canlib/model", "canlib/decoding"], cwd=REPO)
    return diff.returncode == 0


OPS = sorted(p.name for p in (REPO / "book" / "results" / "cpu").glob("ops*.json"))
CLAIMS = [(name, commit) for name in OPS for commit in STORE.ops(name)[1].get("same_code_as", [])]


@pytest.mark.parametrize(("name", "commit"), CLAIMS)
def test_a_count_covers_only_commits_with_the_same_decoding_code(name, commit):
    counted = str(STORE.ops(name)[1]["commit"]).removesuffix("+dirty")
    same = same_code(commit, counted)
    if same is None:
        pytest.skip("no git history of both commits in this checkout")
    assert same, f"{name} says it counts the code of {commit[:7]}, whose model or decoding differs from {counted[:7]}'s"


def test_every_run_is_credited_with_the_count_that_names_its_commit():
    credited = {run: STORE.timed_ops(run) for run in STORE.gpu_runs_with("speed")}
    for run, name in credited.items():
        commit = str(STORE.gpu_speed("eager", run)[1]["commit"]).removesuffix("+dirty")
        assert (name is not None) == any(commit in counted_code(STORE.ops(n)[1]) for n in OPS), run
        if name:
            assert commit in counted_code(STORE.ops(name)[1])
    # the H200 run of 81cbcbb timed the code the count of 611a3c9 counts; SAN's and AAN's decode steps changed since,
    # so today's count (ops.json) covers no stored run until a GPU times today's code
    assert credited["h200-2026-11-27-81cbcbb"] == "ops_611a3c9.json"
    assert "ops.json" not in credited.values()


def test_the_check_tells_different_code_apart():
    assert same_code("e19dd56", "108477e") in (False, None)  # e19dd56 changed attention.py, config.py and layers.py
