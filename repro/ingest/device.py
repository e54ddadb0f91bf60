"""A GPU run's output kept in the repository: its raw files copied unchanged to ``measurements/<run>/`` with a
drafted README, then converted into ``book/results/gpu/<run>/`` (``python -m repro ingest --from-device``)."""

from __future__ import annotations

import json
import re
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from canlib.io import CHECKOUT_DIR, results_dir
from repro.ingest.convert import (
    PROFILE_RAW,
    convert_measurements,
    flat,
    profile_work_tree,
    raw_path,
    read_environment,
)

MEASUREMENTS_DIR = CHECKOUT_DIR / "measurements"

# -- a GPU run's output, kept in the repository ---------------------------------------------------

RAW_MAX_BYTES = 1 << 20  # a raw file above 1 MiB (a runaway log) is left out of the repository and listed in the README
STATUS_LINE = re.compile(
    r"^(?P<step>\w+): (?P<outcome>ok|FAILED \(exit \d+\)|TIMED OUT after \d+s) in (?P<s>\d+)s: (?P<command>.+)$"
)


def _last_line(path: Path) -> str:
    lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def device_run_facts(source: Path) -> dict[str, Any]:
    """Commit, date, device and work-tree state of a GPU run's output, from the raw files themselves:
    ``gpu_check/environment.txt``, else ``gpu_check/gpu_bench.json`` and ``profile/summary.json``."""
    env = read_environment(source)
    facts = {
        "commit": env.get("commit"),
        "date": env.get("date"),
        "device": env.get("device"),
        "dirty": env.get("dirty"),
        "torch": env.get("torch"),
        "python": env.get("python"),
        "cpu_threads": env.get("cpu_threads"),
    }
    for path, get in (
        (raw_path(source, "gpu_bench.json"), lambda r: (r.get("_git_commit"), r.get("_date"), r.get("_device"))),
        (source / PROFILE_RAW, lambda r: tuple((r.get("device") or {}).get(k) for k in ("commit", "date", "device"))),
    ):
        if path is not None and path.is_file():
            raw = json.loads(path.read_text(encoding="utf-8"))
            found = get(flat(raw) if path.name == "gpu_bench.json" else raw)
            for key, value in zip(("commit", "date", "device"), found):
                facts[key] = facts[key] or value
    if facts["dirty"] is None:
        facts["dirty"] = profile_work_tree(source)
    missing = [k for k in ("commit", "date", "device") if not facts[k]]
    if missing:
        raise ValueError(
            f"{source}: no {', '.join(missing)} in gpu_check/environment.txt, gpu_bench.json or {PROFILE_RAW}"
        )
    return facts


def device_run_name(facts: dict[str, Any]) -> str:
    """``<gpu>-<date>-<commit>`` (``h100``, ``YYYY-MM-DD``, 7 digits of the hash); ``-dirty`` when the work tree had
    changes."""
    match = re.search(r"\b([A-Z]+\d{2,4}[A-Za-z]*)\b", facts["device"].removeprefix("NVIDIA "))
    gpu = (match.group(1) if match else re.sub(r"[^a-z0-9]+", "-", facts["device"].lower()).strip("-")).lower()
    dirty = str(facts.get("dirty") or "0").split()[0] not in ("0", "")
    return f"{gpu}-{facts['date'][:10]}-{facts['commit'][:7]}" + ("-dirty" if dirty else "")


def draft_readme(
    folder: Path,
    run: str,
    *,
    profile_command: str = "bash scripts/gpu_profile.sh",
    check_command: str = "bash scripts/gpu_check.sh",
    left_out: list[str] = (),
) -> str:
    """The README of a GPU run's raw files: where and what was measured, from the raw files, and one table
    row per output (``| `file` | `command` | outcome |``, the format :func:`readme_commands` reads): each
    ``gpu_check`` step's command and outcome from ``status.txt`` (a failed step's last log line says why) and
    each ``gpu_profile`` case's outcome from ``profile/summary.json``."""
    lines = _readme_head(folder, run, profile_command, check_command)
    checks, notes, listed = _check_rows(folder)
    cases, shown = _profile_rows(folder, profile_command)
    lines += checks + cases + _unlisted_rows(folder, listed | shown, check_command, profile_command)
    if notes:
        lines += ["", "`gpu_check/status.txt` also says: " + "; ".join(f"`{n}`" for n in notes) + "."]
    if left_out:
        lines += ["", "Left out of the repository (over 1 MiB): " + ", ".join(f"`{x}`" for x in left_out) + "."]
    return "\n".join(lines) + "\n"


def _readme_head(folder: Path, run: str, profile_command: str, check_command: str) -> list[str]:
    """The README's title, where and how it was measured (from the raw files), and the table's header."""
    f = device_run_facts(folder)
    smi = folder / "gpu_check" / "environment.txt"
    gpu_line = (
        next((line for line in smi.read_text(encoding="utf-8").splitlines() if line.count(",") == 2), "")
        if smi.is_file()
        else ""
    )  # nvidia-smi's "name, memory, driver"
    gpu_line = ", driver ".join(part.strip() for part in gpu_line.split(",")[1:])
    tree = "clean" if str(f.get("dirty") or "0").split()[0] == "0" else f"{f['dirty']} (not clean)"
    return [
        f"# GPU measurements of canlib at commit {f['commit'][:7]} (one {f['device']})",
        "",
        f"Measured {f['date']} on one {f['device']}"
        + (f" ({gpu_line})" if gpu_line else "")
        + (f", PyTorch {f['torch']}" if f.get("torch") else "")
        + (f", Python {f['python']}" if f.get("python") else "")
        + (f", {f['cpu_threads']} CPU threads" if f.get("cpu_threads") else "")
        + ".",
        f"Commit {f['commit']}, work tree {tree}. Commands, from the project root on the device: "
        f"`{profile_command}` (the `profile/` files) and `{check_command}` (the `gpu_check/` files).",
        f"The files are unchanged copies of what the device wrote; `python -m repro ingest` "
        f"converted them into `book/results/gpu/{run}/`.",
        "",
        "| file | command (from the project root) | outcome |",
        "|---|---|---|",
    ]


def _check_rows(folder: Path) -> tuple[list[str], list[str], set[str]]:
    """One row per ``gpu_check`` step of ``status.txt`` (a failed step's last log line says why); the lines of
    ``status.txt`` that are not steps; the files the rows name."""
    status = folder / "gpu_check" / "status.txt"
    rows, notes, listed = [], [], set()
    for line in status.read_text(encoding="utf-8").splitlines() if status.is_file() else []:
        m = STATUS_LINE.match(line.strip())
        if not m:
            notes += [line.strip()] if line.strip() else []
            continue
        out = re.search(r"--(?:json|out) (\S+)", m["command"])
        files = (
            [f"gpu_check/{Path(out.group(1)).name}"]
            if out and (folder / "gpu_check" / Path(out.group(1)).name).is_file()
            else []
        )
        log = folder / "gpu_check" / f"{m['step']}.log"
        files += [f"gpu_check/{log.name}"] if log.is_file() else []
        outcome = f"step `{m['step']}`: {m['outcome']} in {m['s']} s"
        if m["outcome"] != "ok" and log.is_file():
            outcome += f": {_last_line(log).replace('|', '/')}"
        rows.append(f"| {', '.join(f'`{x}`' for x in files) or '-'} | `{m['command']}` | {outcome} |")
        listed |= set(files)
    return rows, notes, listed


def _profile_rows(folder: Path, profile_command: str) -> tuple[list[str], set[str]]:
    """One row for ``profile/summary.json`` and one per ``gpu_profile`` case in it; the files the rows name."""
    summary = folder / PROFILE_RAW
    if not summary.is_file():
        return [], set()
    cases = json.loads(summary.read_text(encoding="utf-8"))
    rows, listed = [f"| `{PROFILE_RAW}` | `{profile_command}` | every case below, and `sdpa_backends` |"], {PROFILE_RAW}
    for case, row in {**cases.get("cases", {}), "sdpa_backends": cases.get("sdpa_backends") or {}}.items():
        files = [f"profile/{case}{ext}" for ext in (".json", ".txt") if (folder / "profile" / f"{case}{ext}").is_file()]
        error = row.get("error") if isinstance(row, dict) else None
        outcome = f"case `{case}`: " + (f"FAILED: {error.strip()}".replace("|", "/") if error else "ok")
        rows.append(f"| {', '.join(f'`{x}`' for x in files) or '-'} | `{profile_command}` | {outcome} |")
        listed |= set(files)
    return rows, listed


def _unlisted_rows(folder: Path, listed: set[str], check_command: str, profile_command: str) -> list[str]:
    """Rows for the files no step or case names: what each script writes itself, and the device's own logs."""
    rows = []
    for sub, command in (("gpu_check", check_command), ("profile", profile_command)):
        rest = [
            f"{sub}/{p.name}"
            for p in sorted((folder / sub).glob("*"))
            if p.is_file() and f"{sub}/{p.name}" not in listed
        ]
        if rest:
            rows.append(
                f"| {', '.join(f'`{x}`' for x in rest)} | `{command}` | written by the script itself "
                "(environment, status, summary, log) |"
            )
    top = [p.name for p in sorted(folder.glob("*")) if p.is_file() and p.suffix in (".txt", ".log")]
    if top:
        rows.append(
            f"| {', '.join(f'`{x}`' for x in top)} | - | written on the device around the two commands "
            "(`nvidia-smi`, the console output of the two calls) |"
        )
    return rows


def store_device_run(
    source: str | Path,
    *,
    run: str | None = None,
    measurements: str | Path | None = None,
    results: str | Path | None = None,
    profile_command: str = "bash scripts/gpu_profile.sh",
    check_command: str = "bash scripts/gpu_check.sh",
    note: str | None = None,
) -> tuple[Path, list[Path]]:
    """Keep a GPU run's raw output in the repository and store its results, in one step.

    ``source`` holds what the device returned: ``gpu_check/`` (``scripts/gpu_check.sh``) and ``profile/``
    (``scripts/gpu_profile.sh``), or their archives ``gpu_check.tar.gz`` and ``profile.tar.gz``, and
    optionally ``nvidia_smi.txt`` and logs (top-level ``*.txt``, ``*.log``). Every file is copied
    unchanged to ``<measurements>/<run>/`` (default :data:`MEASUREMENTS_DIR`; ``run``: :func:`device_run_name`
    unless given) with a README from
    :func:`draft_readme` (edit it to add what the files cannot say), then converted into
    ``<results>/gpu/<run>/``. Nothing is written if the run exists already or its files do not convert."""
    source = Path(source)
    with tempfile.TemporaryDirectory() as unpacked:
        return _store_device_run(
            _unpacked(source, Path(unpacked)),
            source,
            run=run,
            measurements=measurements,
            results=results,
            profile_command=profile_command,
            check_command=check_command,
            note=note,
        )


def _unpacked(source: Path, scratch: Path) -> Path:
    """``source`` itself when it holds ``gpu_check/`` or ``profile/``; else its ``gpu_check.tar.gz`` and
    ``profile.tar.gz`` (as the device returns them) unpacked into ``scratch``."""
    if (source / "gpu_check").is_dir() or (source / "profile").is_dir():
        return source
    archives = [source / f"{name}.tar.gz" for name in ("gpu_check", "profile") if (source / f"{name}.tar.gz").is_file()]
    if not archives:
        raise FileNotFoundError(f"{source}: no gpu_check/ or profile/ folder and no gpu_check.tar.gz or profile.tar.gz")
    for archive in archives:
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():  # plain files and folders inside scratch only
                if (
                    not (member.isfile() or member.isdir())
                    or member.name.startswith("/")
                    or ".." in Path(member.name).parts
                ):
                    raise ValueError(f"{archive}: {member.name!r} is not a plain file inside the archive")
            tar.extractall(scratch)
    return scratch


def _store_device_run(
    folder: Path,
    source: Path,
    *,
    run: str | None,
    measurements: str | Path | None,
    results: str | Path | None,
    profile_command: str,
    check_command: str,
    note: str | None,
) -> tuple[Path, list[Path]]:
    """:func:`store_device_run` on an unpacked ``folder``; the top-level ``*.txt``/``*.log`` files of ``source``
    (``nvidia_smi.txt``, the console output of the two calls) are kept too."""
    run = run or device_run_name(device_run_facts(folder))
    raw_dir = Path(measurements or MEASUREMENTS_DIR) / run
    out_dir = Path(results or results_dir()) / "gpu" / run
    for existing in (raw_dir, out_dir):
        if existing.exists():
            raise FileExistsError(f"{existing} exists already: pass another run name (--run) or remove it first")
    with tempfile.TemporaryDirectory(dir=raw_dir.parent if raw_dir.parent.is_dir() else None) as tmp:
        staged, left_out = Path(tmp) / "raw", []
        for sub in ("gpu_check", "profile"):
            for path in sorted((folder / sub).glob("*")) if (folder / sub).is_dir() else []:
                if not path.is_file():
                    continue
                if path.stat().st_size > RAW_MAX_BYTES:
                    left_out.append(f"{sub}/{path.name}")
                    continue
                (staged / sub).mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, staged / sub / path.name)
        top = sorted({p for pattern in ("*.txt", "*.log") for p in source.glob(pattern) if p.is_file()})
        for path in top:
            if path.stat().st_size > RAW_MAX_BYTES:
                left_out.append(path.name)
                continue
            staged.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, staged / path.name)
        readme = draft_readme(
            staged, run, profile_command=profile_command, check_command=check_command, left_out=left_out
        )
        (staged / "README.md").write_text(readme, encoding="utf-8")
        converted = Path(tmp) / "results"
        convert_measurements(staged, converted, note=note or f"measured on the device; raw files in measurements/{run}")
        raw_dir.parent.mkdir(parents=True, exist_ok=True)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staged), raw_dir)
        shutil.move(str(converted), out_dir)
    return raw_dir, sorted(out_dir.glob("*.json"))
