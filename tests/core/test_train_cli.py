"""``canlib train`` as a researcher runs it: the run folder is the source of truth (``--resume`` alone continues
the stored run, a changed option is refused in one line, the stop may move), SIGINT and SIGTERM stop after an
update with the state saved and the run resumes bit for bit, each validation prints a line, one bar covers the
whole run, a warm-up longer than the run is refused, average.pt leaves out the warm-up, option values are checked
as parsed, and files get the usual permissions."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import write_toy_corpus

from canlib.cli import main
from canlib.training.schedule import inverse_sqrt_lr

STEPS = 30  # the reference run's updates
OPTIONS = {
    "--preset": "tiny-can",
    "--max-tokens": "512",
    "--warmup": "10",
    "--valid-every": "10",
    "--log-every": "1",
    "--keep-last": "3",
    "--average-last": "2",
}


def options(**changes: object) -> list[str]:
    """The runs' options, some changed (``warmup=100`` -> ``--warmup 100``), without a bar."""
    merged = {**OPTIONS, **{"--" + k.replace("_", "-"): str(v) for k, v in changes.items()}}
    return [*(x for pair in merged.items() for x in pair), "--no-progress"]


TRAIN = options()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A toy corpus of plain files, prepared (300 training pairs, a 60-piece vocabulary)."""
    root = tmp_path_factory.mktemp("toy")
    files = write_toy_corpus(root / "files", {"train": 300, "valid": 20, "test": 20})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CANLIB_CACHE_DIR", str(root / "cache"))
        args = ["--files", str(files), "--src", "en", "--tgt", "de", "--vocab-size", "60", "--scale", "small"]
        assert main(["data", "prepare", "toy", *args, "--out", str(root / "prepared")]) == 0
    return root / "prepared"


def train(prepared: Path, run: Path, *extra: str) -> int:
    return main(["train", "--data", str(prepared), "--out", str(run), *TRAIN, *extra])


def weights(run: Path, step: int) -> dict[str, torch.Tensor]:
    return torch.load(run / "checkpoints" / f"step_{step:07d}.pt", weights_only=True)["model"]


def log_rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def reference(prepared, tmp_path_factory) -> dict[str, torch.Tensor]:
    """The parameters after an uninterrupted run of STEPS updates (one thread, as the interrupted runs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    run = tmp_path_factory.mktemp("reference") / "run"
    assert train(prepared, run, "--max-steps", str(STEPS)) == 0
    torch.set_num_threads(threads)
    return weights(run, STEPS)


def logged_steps(run: Path) -> int:
    """The newest update log.jsonl holds (a line being written is skipped)."""
    try:
        rows = (run / "log.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return 0
    steps = [0]
    for line in rows:
        try:
            steps.append(json.loads(line)["step"])
        except (json.JSONDecodeError, KeyError):
            pass
    return max(steps)


def start_and_signal(prepared: Path, run: Path, signum: int, *extra: str) -> subprocess.CompletedProcess:
    """``canlib train`` in a process of its own, sent ``signum`` once it logged its third update."""
    command = [sys.executable, "-m", "canlib", "train", "--data", str(prepared), "--out", str(run), *TRAIN]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [*command, "--max-steps", str(STEPS), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 240
    while logged_steps(run) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=240)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_signal_saves_after_the_update_and_resume_alone_gives_the_uninterrupted_parameters(
    prepared, reference, tmp_path, capsys, signum
):
    run = tmp_path / "run"
    stopped = start_and_signal(prepared, run, signum)
    assert stopped.returncode == 128 + signum, stopped.stderr  # 130 for SIGINT, 143 for SIGTERM
    assert "Traceback" not in stopped.stderr
    lines = stopped.stderr.splitlines()
    assert lines[-1] == f"continue with: canlib train --out {run} --resume"
    said = lines[-2].removeprefix(f"canlib train: stopped by {signal.Signals(signum).name} after update ")
    step, path = said.split(": saved ")
    assert 3 <= int(step) < STEPS and torch.load(path, weights_only=True)["step"] == int(step)
    assert main(["train", "--out", str(run), "--resume"]) == 0  # nothing else: the folder holds the rest
    assert f"resumed from {path} (step {step}," in capsys.readouterr().err
    resumed = weights(run, STEPS)
    assert resumed.keys() == reference.keys()
    for name in reference:
        assert torch.equal(resumed[name], reference[name]), name


def test_a_run_killed_between_validations_resumes_from_its_save_every_state(prepared, reference, tmp_path, capsys):
    run = tmp_path / "run"
    killed = start_and_signal(prepared, run, signal.SIGKILL, "--save-every", "2")
    assert killed.returncode == -signal.SIGKILL
    saved = torch.load(run / "checkpoints" / "last.pt", weights_only=True)["step"]
    assert saved >= 2 and saved % 2 == 0
    newest = max([saved, *(int(p.stem[5:]) for p in run.glob("checkpoints/step_*.pt"))])
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert f"(step {newest}," in capsys.readouterr().err
    resumed = weights(run, STEPS)
    for name in reference:
        assert torch.equal(resumed[name], reference[name]), name


def test_a_changed_option_on_resume_is_refused_in_one_line_and_changes_nothing(prepared, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(prepared, run, "--max-steps", "12") == 0
    before = {p.name: p.read_bytes() for p in [run / "config.json", run / "log.jsonl", *run.glob("checkpoints/*")]}
    capsys.readouterr()
    changed = options(warmup=100, max_steps=14)
    argv = ["train", "--data", str(prepared), "--out", str(run), *changed, "--resume"]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"canlib train: error: --warmup 100 differs from the run's 10 ({run / 'config.json'}): a resumed run keeps "
        "its options; leave --warmup out to continue it, or start over with --overwrite"
    ]
    after = {p.name: p.read_bytes() for p in [run / "config.json", run / "log.jsonl", *run.glob("checkpoints/*")]}
    assert after == before
    for option, value in (("--lr", "0.001"), ("--preset", "tiny-balanced"), ("--seed", "2"), ("--max-tokens", "256")):
        assert main(["train", "--out", str(run), "--resume", option, value]) == 2
        assert capsys.readouterr().err.startswith(f"canlib train: error: {option} {value} differs from the run's")


def test_resume_without_the_options_keeps_the_stored_schedule(prepared, tmp_path, capsys):
    """The options left out on resume are the run's, not the defaults: the learning rate goes on along the stored
    warm-up of 10 (the default 8000 would cut it 100-fold)."""
    run = tmp_path / "run"
    assert train(prepared, run, "--max-steps", "12") == 0
    argv = ["train", "--preset", "tiny-can", "--data", str(prepared), "--out", str(run)]
    assert main([*argv, "--resume", "--max-steps", "14", "--max-tokens", "512", "--no-progress"]) == 0
    lr = {r["step"]: r["lr"] for r in log_rows(run) if r["kind"] == "train"}
    for step in (12, 13, 14):  # the lr logged after update n is the one update n + 1 uses
        assert lr[step] == pytest.approx(inverse_sqrt_lr(step + 1, 7e-4, 10), rel=1e-12), step
    assert "max_steps changed from 12 to 14" in capsys.readouterr().err
    assert json.loads((run / "config.json").read_text())["train"]["max_steps"] == 14


def test_resuming_a_finished_run_or_an_empty_folder_says_what_it_did(prepared, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(prepared, run, "--max-steps", "10") == 0
    log = (run / "log.jsonl").read_text()
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"{run}: the run is finished (max_steps at step 10): nothing to train; raise --max-steps or --max-epochs "
        "to train it longer"
    ]
    assert (run / "log.jsonl").read_text() == log
    empty = tmp_path / "empty"
    assert main(["train", "--out", str(empty), "--resume"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"canlib train: error: --preset (or --init-from) and --data are needed to start a run ({empty} holds no run "
        "to resume)"
    ]
    assert train(prepared, empty, "--max-steps", "2", "--warmup", "1", "--resume") == 0
    assert f"{empty}: no run to resume there (no config.json): starting a new one" in capsys.readouterr().err


def test_each_validation_prints_one_line_and_the_log_stays_json(prepared, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(prepared, run, "--max-steps", "20") == 0
    out = capsys.readouterr().out.splitlines()
    valid = [r for r in log_rows(run) if r["kind"] == "valid"]
    assert [r["step"] for r in valid] == [10, 20]
    lines = [line for line in out if line.startswith("valid |")]
    assert len(lines) == 2
    for line, row in zip(lines, valid):
        assert line.startswith(
            f"valid | step {row['step']} | loss {row['valid_loss']:.3f} | nll {row['valid_nll']:.3f} | "
            f"ppl {math.exp(row['valid_nll']):.2f}"
        )
    assert json.loads(out[-1])["step"] == 20  # the last line: the result, as JSON


def test_one_bar_counts_the_whole_run_to_its_stop(prepared, tmp_path, monkeypatch):
    import canlib.training.watch as watch

    bars = []

    class Bar(watch.tqdm):
        def __init__(self, *args, **kwargs):
            bars.append(kwargs)
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(watch, "tqdm", Bar)
    run = tmp_path / "run"
    assert train(prepared, run, "--max-steps", "12", "--progress") == 0
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "15"]) == 0
    assert [(b["total"], b["initial"]) for b in bars] == [(12, 0), (15, 12)]


def test_the_default_warmup_longer_than_the_run_is_refused_and_a_given_one_warned(prepared, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "--preset", "tiny-can", "--data", str(prepared), "--out", str(run), "--max-steps", "40"]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(
        "canlib train: error: warmup=8000 is longer than the whole run (40 updates): the learning rate would end at "
        f"{inverse_sqrt_lr(40, 7e-4, 8000):.2g}"
    )
    assert "--warmup 4" in err[0] and not run.exists()
    assert main([*argv, "--max-steps", "3", "--warmup", "5", "--max-tokens", "512", "--no-progress"]) == 0
    assert "canlib train: warning: warmup=5 is longer than the whole run (3 updates)" in capsys.readouterr().err


def test_average_pt_leaves_out_the_checkpoints_inside_the_warmup_and_says_which(prepared, tmp_path, capsys):
    run = tmp_path / "run"
    options = ["--max-steps", "20", "--valid-every", "5", "--keep-last", "5", "--average-last", "5"]
    assert train(prepared, run, *options) == 0
    assert "average.pt: the mean of the checkpoints of steps 10, 15, 20 (1 inside the 10-update warm-up left out)" in (
        capsys.readouterr().out
    )
    result = json.loads((run / "result.json").read_text())
    assert result["averaged"] == ["step_0000010.pt", "step_0000015.pt", "step_0000020.pt"]
    average = torch.load(run / "average.pt", weights_only=True)["model"]
    parts = [weights(run, step) for step in (10, 15, 20)]
    for name, value in average.items():
        if value.is_floating_point():
            assert torch.allclose(value, sum(p[name].double() for p in parts).float() / 3, atol=1e-7), name


@pytest.mark.parametrize(
    "option, value, problem",
    [
        ("--lr", "nan", "nan: must be a finite number"),
        ("--lr=-1e-3", None, "-1e-3: must be positive"),
        ("--warmup", "0", "0: must be >= 1"),
        ("--max-tokens", "0", "0: must be >= 1"),
        ("--label-smoothing", "1", "1: must be in [0, 1)"),
        ("--max-steps=-5", None, "-5: must be >= 0"),
        ("--dropout", "inf", "inf: must be a finite number"),
        ("--clip-norm", "x", "'x' is not a number"),
    ],
)
def test_option_values_are_checked_as_parsed_in_one_line(option, value, problem, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        given = [option] if value is None else [option, value]  # a negative value: --option=-1
        main(["train", "--preset", "tiny-can", "--data", str(tmp_path), "--out", str(tmp_path / "run"), *given])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"canlib train: error: argument {option.split('=')[0]}: {problem} (see canlib train --help)"
    ]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA build with a GPU takes --device cuda")
def test_a_device_this_pytorch_lacks_is_refused_as_parsed(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--preset", "tiny-can", "--data", str(tmp_path), "--out", str(tmp_path / "r"), "--device=cuda"])
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "argument --device: cuda: this PyTorch" in err[0] and not (tmp_path / "r").exists()


def test_run_files_get_the_usual_permissions(prepared, tmp_path):
    run = tmp_path / "run"
    assert train(prepared, run, "--max-steps", "10") == 0
    mask = os.umask(0)
    os.umask(mask)
    files = [p for p in run.rglob("*") if p.is_file()] + [p for p in prepared.iterdir() if p.is_file()]
    assert len(files) > 10
    modes = {str(p.relative_to(p.parents[1])): oct(p.stat().st_mode & 0o777) for p in files}
    assert set(modes.values()) == {oct(0o666 & ~mask)}, modes


def test_every_trainconfig_field_is_an_option_that_defaults_to_the_field():
    """The command line is derived from TrainConfig: one option per field, its help naming the field's default,
    and a command that gives none trains with TrainConfig's defaults."""
    import argparse
    from dataclasses import fields

    from canlib.training.cli import add_arguments, train_config
    from canlib.training.config import TrainConfig

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    actions = {a.dest: a for a in parser._actions}
    written = {tuple: lambda v: " ".join(map(str, v)), float: lambda v: f"{v:g}"}  # 7e-4 -> 0.0007
    for f in fields(TrainConfig):
        assert f.name in actions, f.name
        default = written.get(type(f.default), str)(f.default)
        assert f.name == "precision" or actions[f.name].help.endswith(f"(default {default})"), f.name
    assert train_config(parser.parse_args(["--out", "o"])) == TrainConfig()
