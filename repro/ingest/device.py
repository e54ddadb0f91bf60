"""A GPU run's output kept in the repository: its files copied unchanged to ``measurements/<run>/`` with a drafted
README, and the stored results among them (written on the device by :mod:`repro.bench.stored`) checked and copied
unchanged into ``book/results/gpu/<run>/`` (``python -m repro ingest --from-device``)."""

from __future__ import annotations

import json
import re
import shutil
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from canlib.io import CHECKOUT_DIR, results_dir
from repro.results.files import load_result
from repro.results.layout import GPU_KINDS

MEASUREMENTS_DIR = CHECKOUT_DIR / "measurements"
# how the two scripts were called, by the folder each writes (gpu_check.sh first: its steps lead the README)
COMMANDS = {"gpu_check": "bash scripts/gpu_check.sh", "profile": "bash scripts/gpu_profile.sh"}

# where a stored result lies in a GPU run's output: gpu_check/<kind>.json (scripts/gpu_check.sh, python -m repro
# bench --store, scripts/gpu_smoke_train.py --result) and profile.json in the profile/ folder of gpu_profile.sh or
# gpu_check.sh
PROFILE_PLACES = ("profile/profile.json", "gpu_check/profile/profile.json")
# the fields a stored kind must hold (a training_* kind: "training")
REQUIRED = {
    "speed": ("systems", "settings", "dtype"),
    "breakdown": ("systems", "settings"),
    "batch": ("systems", "settings"),
    "profile": ("cases", "errors"),
    "training": ("runs",),
}
SPEED_FIELDS = ("tok_per_s", "tok_per_s_repeats", "seconds", "tokens")  # of each system's timed mode


def _lines(path: Path) -> list[str]:
    """The lines of a text file the scripts wrote, stripped, without the empty ones; none when it is missing."""
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    return [line.strip() for line in text.splitlines() if line.strip()]


def stored_files(folder: Path) -> dict[str, Path]:
    """The stored results of a GPU run's output, by kind."""
    found = {kind: folder / "gpu_check" / f"{kind}.json" for kind in GPU_KINDS if kind != "profile"}
    found = {kind: path for kind, path in found.items() if path.is_file()}
    profiles = [folder / place for place in PROFILE_PLACES if (folder / place).is_file()]
    if len(profiles) > 1:
        raise ValueError(f"{folder}: two profiles ({', '.join(PROFILE_PLACES)}); keep the one to store")
    return found | ({"profile": profiles[0]} if profiles else {})


def check_stored(path: Path, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A stored result of ``kind`` as the registry reads it, or a one-line error naming the file and the field: its
    provenance complete, measured at a scale that is not ``tiny`` (a ``--dry-run``), the kind's fields present."""
    result, prov = load_result(path)  # a ProvenanceError is a ValueError naming the file
    if prov["scale"] == "tiny":
        raise ValueError(f"{path}: provenance scale 'tiny': a --dry-run checks the script, it measures nothing")
    if not isinstance(result, dict):
        raise ValueError(f"{path}: 'result' is a {type(result).__name__}, not a mapping")
    for field in REQUIRED["training" if kind.startswith("training") else kind]:
        if field not in result:
            raise ValueError(f"{path}: result lacks the field '{field}'")
    if kind == "speed":
        for name, modes in result["systems"].items():
            for mode, row in modes.items():
                if missing := [field for field in SPEED_FIELDS if field not in row]:
                    raise ValueError(f"{path}: result lacks the field 'systems.{name}.{mode}.{missing[0]}'")
    return result, prov


def device_run_facts(folder: Path) -> dict[str, Any]:
    """Commit, date, device and work-tree state of a GPU run's output, from its stored results' provenance (all of
    them must name one commit and device), with ``gpu_check/environment.txt``'s python and CPU threads."""
    stored = stored_files(folder)
    if not stored:
        raise FileNotFoundError(
            f"{folder}: no stored result (gpu_check/<kind>.json for kind in {', '.join(GPU_KINDS)}, or "
            f"{' or '.join(PROFILE_PLACES)})"
        )
    provs = {path: check_stored(path, kind)[1] for kind, path in stored.items()}
    first, prov = next(iter(provs.items()))
    for path, other in provs.items():
        for key in ("commit", "device"):
            if other[key] != prov[key]:
                raise ValueError(f"{path}: provenance {key} {other[key]!r}, but {first} says {prov[key]!r}")
    dirty = [str((p.get("environment") or {}).get("dirty", "0")) for p in provs.values()]
    # gpu_check/environment.txt, if any: ``key: value`` lines (date, commit, dirty, python, torch, device...)
    pairs = (line.partition(":") for line in _lines(folder / "gpu_check" / "environment.txt"))
    env = {k.strip(): v.strip() for k, sep, v in pairs if sep and k.strip() and " " not in k.strip()}
    return {
        "commit": prov["commit"],
        "date": prov["date"],
        "device": prov["device"],
        "dirty": next((d for d in dirty if d.split()[0] not in ("0", "")), dirty[0]),
        "torch": prov.get("torch"),
        "python": prov.get("python") or env.get("python"),
        "cpu_threads": env.get("cpu_threads"),
    }


# -- a GPU run's output, kept in the repository ---------------------------------------------------

RAW_MAX_BYTES = 1 << 20  # a raw file above 1 MiB (a runaway log) is left out of the repository and listed in the README
STATUS_LINE = re.compile(
    r"^(?P<step>\w+): (?P<outcome>ok|FAILED \(exit \d+\)|TIMED OUT after \d+s) in (?P<s>\d+)s: (?P<command>.+)$"
)


def device_run_name(facts: dict[str, Any]) -> str:
    """``<gpu>-<date>-<commit>`` (``h100``, ``YYYY-MM-DD``, 7 digits of the hash); ``-dirty`` when the work tree had
    changes."""
    match = re.search(r"\b([A-Z]+\d{2,4}[A-Za-z]*)\b", facts["device"].removeprefix("NVIDIA "))
    gpu = (match.group(1) if match else re.sub(r"[^a-z0-9]+", "-", facts["device"].lower()).strip("-")).lower()
    dirty = str(facts.get("dirty") or "0").split()[0] not in ("0", "")
    return f"{gpu}-{facts['date'][:10]}-{facts['commit'][:7]}" + ("-dirty" if dirty else "")


def draft_readme(folder: Path, run: str, commands: Mapping[str, str] = COMMANDS, left_out: Sequence[str] = ()) -> str:
    """The README of a GPU run's files: where and what was measured, from its stored results, and a table row
    (``| `file` | `command` | outcome |``) per ``gpu_check`` step of ``status.txt`` (a failed step's last log line says
    why), per case of the stored ``profile.json``, and for the files neither names (the scripts' own, the logs);
    ``commands``: how each script was called, by the folder it writes."""
    f = device_run_facts(folder)
    smi = [line for line in _lines(folder / "gpu_check" / "environment.txt") if line.count(",") == 2]
    gpu = ", driver ".join(part.strip() for part in (smi or [""])[0].split(",")[1:])  # nvidia-smi's memory, driver
    tree = "clean" if str(f["dirty"] or "0").split()[0] == "0" else f"{f['dirty']} (not clean)"
    details = {"PyTorch {}": f["torch"], "Python {}": f["python"], "{} CPU threads": f["cpu_threads"]}
    lines = [
        f"# GPU measurements of canlib at commit {f['commit'][:7]} (one {f['device']})",
        "",
        f"Measured {f['date']} on one {f['device']}"
        + (f" ({gpu})" if gpu else "")
        + "".join(", " + form.format(value) for form, value in details.items() if value)
        + ".",
        f"Commit {f['commit']}, work tree {tree}. Commands, from the project root on the device: "
        f"`{commands['profile']}` (the `profile/` files) and `{commands['gpu_check']}` (the `gpu_check/` files).",
        f"The files are unchanged copies of what the device wrote; `python -m repro ingest` "
        f"copied the stored results among them into `book/results/gpu/{run}/`.",
        "",
        "| file | command (from the project root) | outcome |",
        "|---|---|---|",
    ]
    listed, notes = set(), []

    def row(files: list[str], command: str, outcome: str) -> None:
        listed.update(files)
        lines.append(f"| {', '.join(f'`{x}`' for x in files) or '-'} | {command} | {outcome} |")

    for line in _lines(folder / "gpu_check" / "status.txt"):
        if not (m := STATUS_LINE.match(line)):
            notes.append(line)
            continue
        out = re.search(r"--(?:json|out|store) (\S+)", m["command"])
        log = folder / "gpu_check" / f"{m['step']}.log"
        paths = [folder / "gpu_check" / Path(out.group(1)).name] if out else []
        outcome = f"step `{m['step']}`: {m['outcome']} in {m['s']} s"
        if m["outcome"] != "ok" and log.is_file():
            outcome += f": {(_lines(log) or [''])[-1].replace('|', '/')}"
        row([f"gpu_check/{p.name}" for p in [*paths, log] if p.is_file()], f"`{m['command']}`", outcome)
    if place := next((place for place in PROFILE_PLACES if (folder / place).is_file()), None):
        stored = json.loads((folder / place).read_text(encoding="utf-8"))["result"]
        sub = Path(place).parent.as_posix()
        command = f"`{commands[Path(sub).parts[0]]}`"  # gpu_check.sh's profile, or gpu_profile.sh's
        row([place], command, "every case below, and `sdpa_backends`")
        for case in [*stored["cases"], *(c for c in stored["errors"] if c not in stored["cases"])]:
            files = [f"{sub}/{case}{ext}" for ext in (".json", ".txt") if (folder / sub / f"{case}{ext}").is_file()]
            error = stored["errors"].get(case)
            row(files, command, f"case `{case}`: " + (f"FAILED: {error.strip()}".replace("|", "/") if error else "ok"))
        if "sdpa_backends" not in stored["errors"] and (folder / sub / "sdpa_backends.json").is_file():
            row([f"{sub}/sdpa_backends.json"], command, "case `sdpa_backends`: ok")
    for sub, command in commands.items():
        files = [p.relative_to(folder).as_posix() for p in sorted((folder / sub).rglob("*")) if p.is_file()]
        if rest := [name for name in files if name not in listed]:
            row(rest, f"`{command}`", "written by the script itself (environment, status, summary, log)")
    if top := [p.name for p in sorted(folder.glob("*")) if p.is_file() and p.suffix in (".txt", ".log")]:
        around = "written on the device around the two commands (`nvidia-smi`, the console output of the two calls)"
        row(top, "-", around)
    if notes:
        lines += ["", "`gpu_check/status.txt` also says: " + "; ".join(f"`{n}`" for n in notes) + "."]
    if left_out:
        lines += ["", "Left out of the repository (over 1 MiB): " + ", ".join(f"`{x}`" for x in left_out) + "."]
    return "\n".join(lines) + "\n"


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
                inside = not member.name.startswith("/") and ".." not in Path(member.name).parts
                if not (inside and (member.isfile() or member.isdir())):
                    raise ValueError(f"{archive}: {member.name!r} is not a plain file inside the archive")
            tar.extractall(scratch)
    return scratch


def store_device_run(
    source: str | Path,
    *,
    run: str | None = None,
    measurements: str | Path | None = None,
    results: str | Path | None = None,
    commands: Mapping[str, str] = COMMANDS,
) -> tuple[Path, list[Path]]:
    """Keep a GPU run's raw output in the repository and store its results, in one step.

    ``source`` holds what the device returned: ``gpu_check/`` (``scripts/gpu_check.sh``) and ``profile/``
    (``scripts/gpu_profile.sh``), or their archives ``gpu_check.tar.gz`` and ``profile.tar.gz``, and
    optionally ``nvidia_smi.txt`` and logs (top-level ``*.txt``, ``*.log``). Every file is copied
    unchanged to ``<measurements>/<run>/`` (default :data:`MEASUREMENTS_DIR`; ``run``: :func:`device_run_name`
    unless given) with a README from :func:`draft_readme` (edit it to add what the files cannot say; ``commands``:
    how the two scripts were called), and its stored results (:func:`stored_files`, each checked by
    :func:`check_stored`) copied unchanged into ``<results>/gpu/<run>/``. Nothing is written if the run exists
    already or a stored result is malformed."""
    source = Path(source)
    with tempfile.TemporaryDirectory() as unpacked:
        folder = _unpacked(source, Path(unpacked))
        run = run or device_run_name(device_run_facts(folder))
        raw_dir = Path(measurements or MEASUREMENTS_DIR) / run
        out_dir = Path(results or results_dir()) / "gpu" / run
        for existing in (raw_dir, out_dir):
            if existing.exists():
                raise FileExistsError(f"{existing} exists already: pass another run name (--run) or remove it first")
        raw = [
            (p.relative_to(folder).as_posix(), p)
            for sub in ("gpu_check", "profile")
            for p in sorted((folder / sub).rglob("*"))
        ]
        raw += [(p.name, p) for p in sorted({p for pattern in ("*.txt", "*.log") for p in source.glob(pattern)})]
        with tempfile.TemporaryDirectory(dir=raw_dir.parent if raw_dir.parent.is_dir() else None) as tmp:
            staged, left_out = Path(tmp) / "raw", []
            for name, path in raw:
                if path.is_file() and path.stat().st_size > RAW_MAX_BYTES:
                    left_out.append(name)
                elif path.is_file():
                    (staged / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, staged / name)
            (staged / "README.md").write_text(draft_readme(staged, run, commands, left_out), encoding="utf-8")
            converted = Path(tmp) / "results"
            converted.mkdir()
            for kind, path in stored_files(folder).items():
                check_stored(path, kind)
                shutil.copy2(path, converted / f"{kind}.json")
            raw_dir.parent.mkdir(parents=True, exist_ok=True)
            out_dir.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(staged), raw_dir)
            shutil.move(str(converted), out_dir)
    return raw_dir, sorted(out_dir.glob("*.json"))
