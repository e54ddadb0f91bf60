"""GPU runs whose raw files the repository keeps (``measurements/<run>/``, which CI's ``../shared`` lacks):
every stored figure equals its raw file, every stored run has raw files to check it against, and one
command adds a device call's output, whose stored results it checks and copies unchanged. Expected values are
recomputed here from the raw files."""

from __future__ import annotations

import filecmp
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import MEASUREMENTS, missing

from _code import gpu_results as gpu
from repro.cli import main
from repro.ingest import device as ingest_device
from repro.results.files import load_result
from repro.studies.store import Store

REPO = Path(__file__).resolve().parents[2]
IN_REPO = REPO / "measurements"
STORED = REPO / "book" / "results" / "gpu"
RUN = "h100-2026-11-26-e19dd56"  # an H100 run whose raw files the repository keeps, three of its steps failed
IN_REPO_RUNS = sorted(p.name for p in IN_REPO.iterdir() if p.is_dir())
STORED_RUNS = sorted(p.name for p in STORED.iterdir() if p.is_dir())


@pytest.fixture
def results_here(monkeypatch):
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(REPO / "book" / "results"))


def median(xs: list[float]) -> float:
    s, n = sorted(xs), len(xs)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def raw_json(path: Path) -> dict:
    return json.loads(path.read_text())


def readme_commands(readme: Path) -> dict[str, str]:
    """The command of each file a run's README table names (rows ``| `file` | `command` | outcome |``)."""
    commands = {}
    for line in readme.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2:
            commands.update({name: cells[1].replace("`", "") for name in re.findall(r"`([^`\s]+\.\w+)`", cells[0])})
    return commands


def raw_folder(run: str) -> Path:
    """The raw files of a stored run: in the repository, else in the shared measurements folder."""
    if (IN_REPO / run).is_dir():
        return IN_REPO / run
    if not (MEASUREMENTS / run).is_dir():
        missing(f"raw files of {run}: neither {IN_REPO / run} nor {MEASUREMENTS / run}")
    return MEASUREMENTS / run


def test_the_repository_keeps_a_gpu_runs_raw_files_and_readme_with_its_failed_steps():
    raw = IN_REPO / RUN
    bench = raw_json(raw / "gpu_check" / "gpu_bench.json")["meta"]
    assert bench["git_commit"].startswith("e19dd56") and bench["device"] == "NVIDIA H100 80GB HBM3"
    assert raw_json(raw / "profile" / "summary.json")["device"]["commit"] == bench["git_commit"]
    readme = (raw / "README.md").read_text()
    assert "e19dd56" in readme and "work tree clean" in readme
    assert "`LIMIT=150 bash scripts/gpu_profile.sh`" in readme and "`bash scripts/gpu_check.sh`" in readme
    for step in ("breakdown", "cpu", "ops"):
        assert f"step `{step}`: FAILED (exit 1)" in readme and "No module named 'sacremoses'" in readme
    for case in ("train_baseline", "train_can", "sdpa_backends"):
        assert f"case `{case}`: FAILED: StopIteration" in readme


TRAINING_RUNS = {"h100-2026-11-27": REPO / "book" / "results" / "small" / "beyond"}  # raw call -> its stored results
NO_RESULT = ("h200-2026-11-28-5af6bb5",)  # calls kept for their logs alone: no run finished


@pytest.mark.parametrize("run", NO_RESULT)
def test_a_call_that_stored_nothing_says_so_and_keeps_the_logs_its_figures_come_from(run):
    readme = (IN_REPO / run / "README.md").read_text()
    assert "no BLEU was stored" in readme and not (STORED / run).exists()
    for line in readme.splitlines():
        for name in re.findall(r"`(raw/[\w.-]+)`", line):
            assert (IN_REPO / run / name).is_file(), name


@pytest.mark.parametrize("run", [r for r in IN_REPO_RUNS if r not in TRAINING_RUNS and r not in NO_RESULT])
def test_each_run_kept_in_the_repository_is_stored_under_its_own_name(run):
    assert (STORED / run).is_dir(), f"measurements/{run} has no book/results/gpu/{run}"
    assert (IN_REPO / run / "README.md").is_file()


def call_of(run: str) -> tuple[str, str] | None:
    """(commit, device) of a device call kept in ``measurements/<run>/``: its env.txt, else its README's first lines
    (None where neither names both)."""
    folder = IN_REPO / run
    if (folder / "env.txt").is_file():
        env = (folder / "env.txt").read_text()
        return re.search(r"^commit: (\w+)", env, re.M).group(1), re.search(r"^(NVIDIA [^,]+),", env, re.M).group(1)
    readme = (folder / "README.md").read_text()
    commit, device = re.search(r"Commit ([0-9a-f]{40})", readme), re.search(r"on one (NVIDIA [^(]+?) \(", readme)
    return (commit.group(1), device.group(1)) if commit and device else None


@pytest.mark.parametrize("run", sorted(TRAINING_RUNS))
def test_each_training_call_kept_in_the_repository_made_the_results_stored_from_it(run):
    """A device call that trained models: at least its models are stored, and every stored result file of its folder
    names the commit and device of a call the repository keeps (a later call may add seeds beside it)."""
    calls = {call_of(r) for r in IN_REPO_RUNS} - {None}
    commit, device = call_of(run)
    stored = sorted(TRAINING_RUNS[run].rglob("*.json"))
    own = 0
    for path in stored:
        prov = raw_json(path)["provenance"]
        if "models" in prov:  # a summary made later from the calls' stored models (no training): it names them
            models = prov["models"]
            assert commit in models["commit"] and device in models["device"], path
            assert set(models["commit"]) <= {c for c, _ in calls} and set(models["device"]) <= {d for _, d in calls}
        else:
            assert (prov["commit"], prov["device"]) in calls, path
            own += (prov["commit"], prov["device"]) == (commit, device)
    assert own >= 20, own


# stored kind -> the raw file it is made from (in the measurement folder or its gpu_check/ folder)
RAW_OF = {
    "speed": "gpu_bench.json",
    "breakdown": "breakdown.json",
    "batch": "bench_batch.json",
    "training_4k": "smoke_full.json",
    "training_32k": "smoke_32k.json",
    "training_small": "smoke_small.json",
    "profile": "profile/summary.json",
    "ab": "ab",
    "translation_small": "multi30k_small-can_test2016.hyp.de",
}


def raw_file(folder: Path, name: str) -> Path:
    found = [p for p in (folder / name, folder / "gpu_check" / name) if p.exists()]
    assert found, f"{folder}: no raw {name}"
    return found[0]


def meta_of(raw: dict) -> dict:
    """A raw bench file's metadata in either of gpu_bench.py's formats (``meta`` or ``_``-prefixed keys)."""
    return raw["meta"] if "meta" in raw else {k[1:]: v for k, v in raw.items() if k.startswith("_")}


def systems_of(raw: dict) -> dict:
    return raw["systems"] if "systems" in raw else {k: v for k, v in raw.items() if not k.startswith("_")}


def repeats(seconds: list[float], tokens: int) -> tuple[float, float, float, float]:
    """(tokens / median seconds, min, median, max of tokens / seconds): the bench's figures written out here."""
    per = sorted(tokens / s for s in seconds)
    return tokens / median(seconds), per[0], median(per), per[-1]


@pytest.mark.parametrize("run", STORED_RUNS)
def test_every_stored_gpu_figure_is_recomputed_from_its_raw_file(run):
    """Each stored file of a GPU run has its raw file, names the raw file's commit and device, and its figures
    are the raw figures or computed from them here (medians and spreads of the timed repeats)."""
    raw_dir = raw_folder(run)
    for path in sorted((STORED / run).glob("*.json")):
        kind = path.stem
        stored, prov = load_result(path)
        source = raw_file(raw_dir, RAW_OF[kind])
        if kind in ("speed", "breakdown", "batch"):
            raw = raw_json(source)
            meta, systems = meta_of(raw), systems_of(raw)
            assert (prov["commit"], prov["device"]) == (meta["git_commit"], meta["device"]), (run, kind)
            assert set(stored["systems"]) == set(systems)
            if kind == "speed":
                assert prov["date"] == meta["date"][:10]
                assert stored["captured_matches_eager"] == meta["captured_matches_eager"]
            for name, row in systems.items():
                mine = stored["systems"][name]
                if kind == "speed":  # tokens over the median repeat; the raw file's own tok/s agrees
                    for mode in ("eager", "captured"):  # a repeat translates the sources ``passes`` times over
                        passes = (meta["settings"].get("passes") or {}).get(mode, 1)
                        tokens = meta["settings"]["sentences"] * meta["settings"]["forced_length"] * passes
                        expected = repeats(row[f"{mode}_seconds"], tokens)
                        got = tuple(mine[mode][k] for k in ("tok_per_s", "min", "median", "max"))
                        assert got == pytest.approx(expected, rel=1e-12), (run, name, mode)
                        assert expected[0] == pytest.approx(row[f"{mode}_tok_per_s"], rel=1e-9), (run, name, mode)
                elif kind == "breakdown":
                    assert mine["breakdown"] == row["breakdown"] and mine["tok_per_s"] == row["tok_per_s"]
                    _, low, mid, high = repeats(row["seconds"], row["tokens"])
                    assert (mine["min"], mine["median"], mine["max"]) == pytest.approx((low, mid, high), rel=1e-12)
                else:
                    assert mine["by_batch"] == row["by_batch"]
        elif kind.startswith("training"):
            raw = raw_json(source)
            assert stored["runs"] == raw["runs"] and prov["device"] == raw["device"]
            assert stored.get("peak_flops") == raw.get("peak_flops", raw.get("peak_flops_assumed"))
        elif kind == "profile":
            where = raw_json(source)["device"]
            assert (prov["commit"], prov["device"]) == (where["commit"], where["device"])
        elif kind == "ab":
            for side, prefix in (("before", "base"), ("after", "new")):
                files = sorted(source.glob(f"{prefix}_*.json"))
                assert [r["file"] for r in sorted(stored[side]["runs"], key=lambda r: r["file"])] == [
                    f"ab/{f.name}" for f in files
                ]
                for entry in stored[side]["runs"]:
                    raw = raw_json(raw_dir / entry["file"])
                    meta = meta_of(raw)
                    assert stored[side]["commit"] == meta["git_commit"]
                    tokens = meta["settings"]["sentences"] * meta["settings"]["forced_length"]
                    for name, row in systems_of(raw).items():
                        for mode in ("eager", "captured"):
                            assert entry["tok_per_s"][name][mode] == pytest.approx(
                                tokens / median(row[f"{mode}_seconds"]), rel=1e-12
                            )
        else:  # translation_small: the raw hypotheses and the scores the measurement's log recorded last
            hyps = source.read_text(encoding="utf-8").split("\n")[:-1]
            log = (raw_dir / "train_multi30k_small-can.txt").read_text(encoding="utf-8").strip().splitlines()
            recorded = json.loads(log[-1])
            assert stored["sentences"] == len(hyps) and stored["examples"][0]["hypothesis"] == hyps[0]
            assert stored["recorded_scores"] == {k: recorded[k] for k in ("bleu", "tok_bleu")}


@pytest.mark.parametrize("run", IN_REPO_RUNS)
def test_stored_training_throughput_is_the_raw_smoke_file(run):
    found = [IN_REPO / run / name for name in ("smoke_32k.json", "gpu_check/smoke_32k.json")]
    smoke = next((path for path in found if path.is_file()), None)
    if smoke is None:
        assert not (STORED / run / "training_32k.json").exists()
        return
    raw = raw_json(smoke)
    stored, prov = load_result(STORED / run / "training_32k.json")
    assert stored["runs"] == raw["runs"] and stored["max_tokens"] == raw["max_tokens"] == 32768
    assert prov["device"] == raw["device"]


@pytest.mark.parametrize("run", IN_REPO_RUNS)
def test_the_stored_profile_is_each_cases_own_raw_file(run):
    """Each case's figures equal its own raw file (profile/<case>.json, written apart from summary.json), and
    its busy share is its kernel time over its wall time."""
    folder = IN_REPO / run / "profile"
    if not (folder / "summary.json").is_file():
        assert not (STORED / run / "profile.json").exists()
        return
    stored, prov = load_result(STORED / run / "profile.json")
    summary = raw_json(folder / "summary.json")
    assert prov["commit"] == summary["device"]["commit"] and prov["device"] == summary["device"]["device"]
    for case in summary["cases"]:
        raw = raw_json(folder / f"{case}.json")
        if "error" in raw:
            assert stored["errors"][case] == raw["error"] and case not in stored["cases"]
            continue
        row = stored["cases"][case]
        for key in ("wall_ms", "cpu_ms", "gpu_kernel_ms", "gpu_busy_share", "kernel_launches", "host_syncs", "per"):
            assert row[key] == raw[key], (case, key)
        assert row["gpu_busy_share"] == pytest.approx(raw["gpu_kernel_ms"] / raw["wall_ms"], abs=0.001)
    sdpa = raw_json(folder / "sdpa_backends.json")
    assert stored["sdpa_backends"] == sdpa and (stored["errors"].get("sdpa_backends") == sdpa.get("error"))
    assert set(stored["cases"]) | set(stored["errors"]) == set(summary["cases"]) | (
        {"sdpa_backends"} & set(stored["errors"])
    )


def test_the_readme_table_gives_each_stored_file_its_command():
    commands = readme_commands(IN_REPO / RUN / "README.md")
    status = (IN_REPO / RUN / "gpu_check" / "status.txt").read_text().splitlines()
    bench_line = [line for line in status if line.startswith("bench: ok")][0]
    for kind, raw_file, command in (
        ("speed", "gpu_check/gpu_bench.json", bench_line.split(": ", 2)[2]),
        ("profile", "profile/summary.json", "LIMIT=150 bash scripts/gpu_profile.sh"),
    ):
        _, prov = load_result(STORED / RUN / f"{kind}.json")
        assert commands[raw_file] == command == prov["config"]["command"]
        assert prov["config"]["raw_file"] == raw_file


STORED_AT = {
    "speed": "gpu_check/speed.json",
    "training_32k": "gpu_check/training_32k.json",
    "profile": "profile/profile.json",
}
OLD_FORMAT = {"gpu_check/gpu_bench.json", "gpu_check/smoke_32k.json", "profile/summary.json"}  # what a run wrote before


def _device_output(tmp_path: Path, archives: bool = False) -> Path:
    """What a device call returns, made of this run's files: its logs, status and profiler tables, and the results the
    scripts now store themselves (this run's stored files, where the scripts write them) in place of the raw files they
    replace; as gpu_check.tar.gz and profile.tar.gz the way the device sends them (``archives``) or unpacked, with
    nvidia_smi.txt and the calls' logs beside them."""
    import tarfile

    device = tmp_path / "x"
    for path in sorted((IN_REPO / RUN).rglob("*")):
        name = path.relative_to(IN_REPO / RUN).as_posix()
        if path.is_file() and name.split("/")[0] in ("gpu_check", "profile") and name not in OLD_FORMAT:
            (device / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, device / name)
    for kind, place in STORED_AT.items():
        shutil.copy(STORED / RUN / f"{kind}.json", device / place)
    if archives:
        for sub in ("gpu_check", "profile"):
            with tarfile.open(device / f"{sub}.tar.gz", "w:gz") as tar:
                tar.add(device / sub, arcname=sub)
            shutil.rmtree(device / sub)
    for name in ("nvidia_smi.txt", "check_run.log", "profile_run.log"):
        shutil.copy(IN_REPO / RUN / name, device / name)
    return device


def test_one_command_keeps_a_device_output_unchanged_and_copies_its_stored_results(tmp_path, monkeypatch):
    device = _device_output(tmp_path, archives=True)
    (device / "huge.log").write_bytes(b"x" * (ingest_device.RAW_MAX_BYTES + 1))
    monkeypatch.setattr(ingest_device, "MEASUREMENTS_DIR", tmp_path / "measurements")  # the default folder
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(tmp_path / "results"))
    assert (
        main(["ingest", "--from-device", str(device), "--profile-command", "LIMIT=150 bash scripts/gpu_profile.sh"])
        == 0
    )
    original = _device_output(tmp_path / "unpacked")  # what went into the archives, file for file
    env = dict(
        line.split(": ", 1)
        for line in (original / "gpu_check" / "environment.txt").read_text().splitlines()
        if ": " in line
    )
    run = f"h100-{env['date'][:10]}-{env['commit'][:7]}"
    kept = tmp_path / "measurements" / run
    copied = sorted(p.relative_to(original) for p in original.rglob("*") if p.is_file())
    assert sorted(p.relative_to(kept) for p in kept.rglob("*") if p.is_file() and p.name != "README.md") == copied
    assert all(filecmp.cmp(original / p, kept / p, shallow=False) for p in copied)
    readme = (kept / "README.md").read_text()
    assert "`huge.log`" in readme and not (kept / "huge.log").exists()
    commands = readme_commands(kept / "README.md")
    for line in (original / "gpu_check" / "status.txt").read_text().splitlines():
        m = re.match(r"^(\w+): (.+) in (\d+)s: (.+)$", line)
        if not m:
            continue  # notes and the total
        step, outcome, seconds, command = m.groups()
        assert f"| `{command}` | step `{step}`: {outcome} in {seconds} s" in readme, line
        assert commands[f"gpu_check/{step}.log"] == command
        if outcome.startswith("FAILED"):
            last = (original / "gpu_check" / f"{step}.log").read_text().strip().splitlines()[-1].strip()
            assert f"{outcome} in {seconds} s: {last} |" in readme
    for case in ("train_baseline", "train_can", "sdpa_backends"):
        assert f"case `{case}`: FAILED: StopIteration" in readme
    stored = tmp_path / "results" / "gpu" / run
    assert sorted(p.name for p in stored.glob("*.json")) == sorted(f"{kind}.json" for kind in STORED_AT)
    for kind in STORED_AT:  # byte for byte what the device stored
        assert filecmp.cmp(stored / f"{kind}.json", STORED / RUN / f"{kind}.json", shallow=False), kind
    with pytest.raises(FileExistsError, match=run):
        ingest_device.store_device_run(device)


def _with_stored(device: Path, place: str, change) -> None:
    data = raw_json(device / place)
    change(data)
    (device / place).write_text(json.dumps(data))


def test_a_changed_work_tree_names_the_run_and_its_commit_dirty(tmp_path):
    device = _device_output(tmp_path)
    _with_stored(device, STORED_AT["speed"], lambda d: d["provenance"]["environment"].update(dirty="3 changed files"))
    raw_dir, written = ingest_device.store_device_run(device, measurements=tmp_path / "m", results=tmp_path / "r")
    assert raw_dir.name.endswith("e19dd56-dirty")
    prov = Store("small", tmp_path / "r").gpu_speed("eager", raw_dir.name)[1]
    assert gpu.commit_label(prov) == "e19dd56+dirty"
    assert "3 changed files (not clean)" in (raw_dir / "README.md").read_text()


@pytest.mark.parametrize(
    ("kind", "change", "message"),
    [
        ("speed", lambda d: d["provenance"].pop("commit"), "speed.json: provenance lacks commit"),
        ("speed", lambda d: d["result"].pop("settings"), "speed.json: result lacks the field 'settings'"),
        (
            "speed",
            lambda d: d["result"]["systems"]["can"]["captured"].pop("tok_per_s_repeats"),
            "speed.json: result lacks the field 'systems.can.captured.tok_per_s_repeats'",
        ),
        ("profile", lambda d: d["result"].pop("cases"), "profile.json: result lacks the field 'cases'"),
        ("profile", lambda d: d["provenance"].update(scale="tiny"), "profile.json: provenance scale 'tiny'"),
        ("training_32k", lambda d: d["provenance"].update(device="GPU X"), "training_32k.json: provenance device"),
    ],
)
def test_a_malformed_stored_result_is_named_by_file_and_field_and_nothing_is_written(tmp_path, kind, change, message):
    device = _device_output(tmp_path)
    _with_stored(device, STORED_AT[kind], change)
    with pytest.raises(ValueError, match=re.escape(message)):
        ingest_device.store_device_run(device, measurements=tmp_path / "m", results=tmp_path / "r")
    assert not (tmp_path / "m").exists() and not (tmp_path / "r").exists()


def test_a_malformed_stored_result_is_one_line_from_the_command_line(tmp_path, capsys, monkeypatch):
    device = _device_output(tmp_path)
    (device / STORED_AT["speed"]).write_text("{not json")
    monkeypatch.setattr(ingest_device, "MEASUREMENTS_DIR", tmp_path / "m")
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(tmp_path / "r"))
    assert main(["ingest", "--from-device", str(device)]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "speed.json: not a readable result file" in err and "Traceback" not in err
    assert not (tmp_path / "m").exists() and not (tmp_path / "r").exists()


def test_a_device_output_of_raw_files_alone_is_refused_and_nothing_is_written(tmp_path):
    """A run's raw files in the format the scripts wrote before they stored their results: not ingested (the stored
    copy under book/results/gpu is its record)."""
    device = tmp_path / "x"
    shutil.copytree(IN_REPO / RUN / "gpu_check", device / "gpu_check")
    with pytest.raises(FileNotFoundError, match="no stored result"):
        ingest_device.store_device_run(device, measurements=tmp_path / "m", results=tmp_path / "r")
    assert not (tmp_path / "m").exists() and not (tmp_path / "r").exists()


def test_every_stored_speed_run_is_labelled_by_its_device_commit_and_date(results_here):
    store = Store("small")
    runs = store.gpu_runs_with("speed")
    assert runs == sorted(p.parent.name for p in STORED.glob("*/speed.json"))
    for run in runs:
        prov = raw_json(STORED / run / "speed.json")["provenance"]
        label = gpu.run_label(store.gpu_speed("eager", run)[1])
        assert label == f"{prov['device'].split()[1]} {prov['commit'][:7]} {prov['date']}"
