"""``canlib translate`` as a command: it streams a pipe line by line (a translation out before the next line in),
checks its paths and option values before any work, says a bad checkpoint or device in one line, and draws its
bar on stderr."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import TINY_LINES as LINES  # what the checkpoint fixture's vocabulary knows

from canlib.cli import main


def read_line(stream, seconds: float) -> str | None:
    """One line from ``stream`` if it comes within ``seconds``, else None."""
    ready, _, _ = select.select([stream], [], [], seconds)
    return stream.readline() if ready else None


def test_a_pipe_is_translated_line_by_line_as_it_comes(checkpoint, tmp_path):
    from canlib.decoding.translate import load_translator, translate_lines

    model, vocab = load_translator(checkpoint)
    expected = translate_lines(model, vocab, LINES)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "canlib", "translate", "--checkpoint", str(checkpoint), "--device", "cpu"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        for line, translation in zip(LINES, expected):
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            assert read_line(proc.stdout, 60) == translation + "\n"  # out before the next line is in
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0 and proc.stdout.read() == ""
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()


def test_a_file_is_translated_whole_with_its_bar_on_stderr(checkpoint, tmp_path, capsys):
    source = tmp_path / "input.en"
    source.write_text("".join(line + "\n" for line in LINES))
    assert main(["translate", "--checkpoint", str(checkpoint), "--input", str(source), "--progress"]) == 0
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == 3 and "translate" in out.err and "3/3" in out.err


def test_the_output_is_checked_before_the_model_is_loaded(checkpoint, tmp_path, monkeypatch, capsys):
    import canlib.decoding.translate as translate

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded before the output was checked")

    monkeypatch.setattr(translate, "load_translator", never)
    source = tmp_path / "input.en"
    source.write_text("a dog\n")
    common = ["translate", "--checkpoint", str(checkpoint), "--input", str(source), "--output"]
    for output, said in (
        (tmp_path, f"--output {tmp_path}: is a folder; give a file name"),
        (tmp_path / "no" / "out.de", f"--output {tmp_path / 'no' / 'out.de'}: its folder {tmp_path / 'no'} does not"),
    ):
        assert main([*common, str(output)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"canlib translate: error: {said}")


@pytest.mark.parametrize(
    "option, value, said",
    [
        ("--len-penalty", "nan", "argument --len-penalty: nan: must be a finite number"),
        ("--max-len-a=-1", None, "argument --max-len-a: -1: must be >= 0"),
        ("--beam", "0", "argument --beam: 0: must be >= 1"),
        ("--batch-size", "0", "argument --batch-size: 0: must be >= 1"),
    ],
)
def test_nonsense_values_are_refused_as_parsed(option, value, said, checkpoint, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["translate", "--checkpoint", str(checkpoint), option, *([] if value is None else [value])])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines() == [f"canlib translate: error: {said} (see canlib translate --help)"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA build with a GPU takes --device cuda")
def test_a_device_this_pytorch_lacks_is_one_line(checkpoint, capsys):
    with pytest.raises(SystemExit):
        main(["translate", "--checkpoint", str(checkpoint), "--device", "cuda"])
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "argument --device: cuda: this PyTorch" in err[0] and "sees no CUDA GPU" in err[0]


def test_a_checkpoint_of_another_kind_is_one_line(checkpoint, tmp_path, capsys):
    text = tmp_path / "notes.pt"  # beside the vocabulary: only the checkpoint is wrong
    text.write_text("not a model\n")
    pickled = tmp_path / "object.pt"
    torch.save({"path": Path("x")}, pickled)  # a pickle that weights-only loading refuses
    for path in (text, pickled):
        assert main(["translate", "--checkpoint", str(path), "--device", "cpu"]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"canlib translate: error: {path}: not a canlib checkpoint"), err
