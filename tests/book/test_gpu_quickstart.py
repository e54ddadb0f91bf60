"""The GPU quick start (README and the book's "Running it on a GPU" page) says what scripts/gpu_small.sh
really runs (the book's page lists its commands), and README names no `canlib` command that `canlib --help` does
not know, nor a `python -m repro` command that `python -m repro --help` does not."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = (REPO / "README.md", REPO / "book" / "gpu.md")
COMMAND = re.compile(
    r"(?:^|`|&&|\||;|\$\(|&)\s*(?:[A-Z_]+=\S+\s+)*(?:python3? -m (canlib|repro)|(canlib))\s+([a-z][a-z0-9_-]*)"
)


def known_commands() -> set[str]:
    """The subcommands `python -m canlib --help` and `python -m repro --help` list, each as "package command"."""
    known = set()
    for package in ("canlib", "repro"):
        out = subprocess.run(
            [sys.executable, "-m", package, "--help"], capture_output=True, text=True, cwd=REPO, timeout=120, check=True
        ).stdout
        listed = out.split("positional arguments:", 1)[1].split("options:", 1)[0]
        known |= {f"{package} {c}" for c in re.findall(r"^ {4}([a-z][a-z0-9_-]*)(?:\s|$)", listed, flags=re.M)}
    return known


def code_of(markdown: str) -> list[str]:
    """Lines of code in a markdown text: each line of a fenced block (comments cut; a line continued with a
    backslash joined to the next, as the shell joins them) and each inline code span."""
    lines = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", markdown, flags=re.M | re.S):
        lines += [line.split(" #")[0] for line in block.replace("\\\n", "").splitlines()]
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", markdown, flags=re.M | re.S)
    lines += re.findall(r"`([^`\n]+)`", prose)
    return lines


def commands_named(markdown: str) -> set[str]:
    """Each command a markdown text's code names, as "package command" (`canlib train`, `python -m repro claims`)."""
    return {
        f"{module or script} {command}"
        for line in code_of(markdown)
        for module, script, command in COMMAND.findall(line)
    }


def test_readme_names_no_canlib_command_that_canlib_help_does_not_know():
    known = known_commands()
    assert {"repro experiment", "canlib train", "canlib data", "repro bench"} <= known
    assert "canlib experiment" not in known  # the library's command line lists the library's commands alone
    named = commands_named((REPO / "README.md").read_text(encoding="utf-8"))
    shown = {"repro experiment", "canlib train", "canlib data", "canlib info", "canlib bleu"}
    assert shown <= named  # the scan finds the commands README shows
    assert named <= known, f"README names command(s) that no --help lists: {sorted(named - known)}"


def test_the_command_scan_catches_a_command_canlib_does_not_have():
    text = (
        "Run `canlib reproduce --all`, or:\n```bash\nCUDA_VISIBLE_DEVICES=0 python -m canlib evaluate x  # note\n```\n"
    )
    assert commands_named(text) == {"canlib reproduce", "canlib evaluate"}
    assert commands_named("`python -m repro train x` and `canlib claims`") == {"repro train", "canlib claims"}
    assert commands_named("`repro.studies.cli` and canlib editable in prose") == set()
    assert not commands_named("`python -m repro train x`") <= known_commands()


def gpu_small_commands(tmp_path: Path) -> list[str]:
    """The `python -m repro ...` commands scripts/gpu_small.sh runs, recorded by a stand-in interpreter
    (PYTHON) that writes its arguments and succeeds; paths under the repository made relative."""
    log, shim = tmp_path / "argv.log", tmp_path / "python"
    shim.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$*" >> "{log}"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {
        **os.environ,
        "PYTHON": str(shim),
        "OUT": str(tmp_path / "out"),
        "LIMIT": "100000",
        "CANLIB_DATA_DIR": str(tmp_path / "data"),
        "CANLIB_CACHE_DIR": str(tmp_path / "cache"),
    }
    env.pop("JOBS", None)
    subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_small.sh")],
        env=env,
        cwd=REPO,
        capture_output=True,
        timeout=300,
        check=True,
    )
    calls = log.read_text(encoding="utf-8").splitlines()
    return [("python " + c).replace(f"{REPO}/", "") for c in calls if c.startswith("-m repro ")]


ENGINE = tuple(f"python -m repro {verb} " for verb in ("experiment", "estimate", "summarise", "rescore"))


def quick_start_commands(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [
        " ".join(line.split())
        for line in code_of(text)
        if line.startswith(ENGINE) and "CUDA_VISIBLE_DEVICES" not in line
    ]


def test_the_gpu_page_shows_exactly_the_commands_gpu_small_sh_runs(tmp_path):
    script = gpu_small_commands(tmp_path)
    assert script and all(c.startswith(ENGINE) for c in script)
    assert "python -m repro rescore book/results/small" in script
    page = REPO / "book" / "gpu.md"
    assert quick_start_commands(page) == script, "book/gpu.md: its list differs from what scripts/gpu_small.sh runs"
    readme = quick_start_commands(REPO / "README.md")  # the command-line section's examples, not the script's list
    assert not set(script) <= set(readme), "README lists gpu_small.sh's commands: the book's page does"


def test_both_quick_starts_set_up_run_the_script_and_build_the_book():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for setup in ("conda env create -f environment.yml", "bash scripts/gpu_small.sh", "jupyter-book build"):
            assert setup in text, f"{page.name}: the quick start lacks `{setup}`"


def test_each_throughput_flag_the_gpu_page_shows_sets_its_trainconfig_field():
    """The options table of the GPU page: `canlib train` parses each flag as shown into the field beside it, with
    the value the page gives (a switch: True), not the default."""
    import argparse
    import html

    from _code.gpu import options_frame
    from canlib.training.cli import add_arguments, given_options

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    for field, given in zip(options_frame()["TrainConfig field"], options_frame()["flag"]):
        name, shown = (html.unescape(re.sub(r"</?code>", "", cell)) for cell in (field, given))
        value = shown.partition("=")[2]
        assert given_options(parser.parse_args(["--out", "run", shown])) == {name: type_of(name)(value or True)}, shown


def type_of(name: str) -> type:
    """The type of TrainConfig field ``name``'s default."""
    from dataclasses import fields

    from canlib.training.config import TrainConfig

    return next(type(f.default) for f in fields(TrainConfig) if f.name == name)
