"""What the GPU machine runs imports with PyTorch, NumPy and the standard library alone.

The device's python3 has torch and numpy but not sacremoses or ctranslate2 (a gpu_check run at e19dd56
lost three of its six steps to ``from sacremoses import MosesTokenizer`` at the top of canlib/bleu.py).
A subprocess refuses the optional packages with a meta-path finder, then parses ``python -m repro bench
speed|breakdown|ops --help``, imports the GPU scripts and tests/core/test_search.py and runs a search (triton, too,
is optional: a user's CPU machine may lack it). Optional packages are
imported inside the functions that need them (``canlib.io.require``); progress bars come from
``canlib.io.tqdm``, a stand-in where tqdm is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OPTIONAL = ("sacremoses", "sacrebleu", "sentencepiece", "ctranslate2", "tqdm", "pandas", "matplotlib", "triton")

PROBE = textwrap.dedent("""
    import importlib.util, json, sys, traceback
    from pathlib import Path

    BLOCKED = set(sys.argv[1].split(","))

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r} (refused by the test)", name=name)
            return None

    for name in list(sys.modules):  # anything a site hook loaded before us
        if name.split(".")[0] in BLOCKED:
            del sys.modules[name]
    sys.meta_path.insert(0, Refuse())
    find_spec = importlib.util.find_spec  # and "is it installed?" answers no, as for a package that is not
    importlib.util.find_spec = lambda name, package=None: (
        None if name.split(".")[0] in BLOCKED else find_spec(name, package)
    )
    repo = Path(sys.argv[2])
    sys.path[:0] = [str(repo), str(repo / "scripts"), str(repo / "tests")]  # tests/: the conftest pytest puts there
    results = {}
    try:
        import sacremoses  # noqa: F401  the refusal itself must work, or the rest proves nothing
        results["refusal"] = "sacremoses imported: the finder does not refuse"
    except ModuleNotFoundError:
        results["refusal"] = "ok"

    def attempt(label, fn):
        try:
            fn()
            results[label] = "ok"
        except SystemExit as exc:
            results[label] = "ok" if exc.code in (0, None) else f"exit {exc.code}"
        except BaseException:
            results[label] = traceback.format_exc()[-1500:]

    def cli(*argv):
        from repro.cli import main
        sys.exit(main(list(argv)))

    def load(path):
        spec = importlib.util.spec_from_file_location(Path(path).stem + "_under_test", repo / path)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))

    for command in ("speed", "breakdown", "ops"):
        attempt(f"python -m repro bench {command} --help", lambda c=command: cli("bench", c, "--help"))
    scripts = ("scripts/gpu_bench.py", "scripts/gpu_profile.py", "scripts/gpu_smoke_train.py")
    for path in (*scripts, "tests/core/test_search.py"):
        attempt(f"import {path}", lambda p=path: load(p))

    def search_without_triton():
        import torch
        from canlib import Seq2Seq, preset
        from canlib.decoding import fused
        from canlib.decoding.search import SearchSettings, beam_search, make_batch

        assert not fused.available()
        model = Seq2Seq(preset("tiny-can", vocab_size=50)).eval()
        src = make_batch([[5, 6, 7]], model.cfg.pad_id, model.cfg.eos_id)
        assert len(beam_search(model, src, SearchSettings(beam=2, forced_length=3)).tokens[0]) == 3
        try:
            beam_search(model, src, SearchSettings(beam=2, forced_length=3, fused=True))
        except ValueError as exc:
            assert "needs the triton package" in str(exc), exc
        else:
            raise AssertionError("fused=True ran without triton")

    attempt("a search without triton, and the fused one refused", search_without_triton)
    print("RESULTS " + json.dumps(results))
""")


def test_device_commands_and_gpu_scripts_import_without_the_optional_packages():
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(OPTIONAL), str(REPO)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    assert lines, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(lines[-1].removeprefix("RESULTS "))
    assert results.pop("refusal") == "ok"
    assert len(results) == 8, results
    failed = {label: why for label, why in results.items() if why != "ok"}
    assert not failed, "\n\n".join(f"{label}:\n{why}" for label, why in failed.items())
