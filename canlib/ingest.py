"""``canlib ingest``: store measurements made on another machine (a GPU) as results with provenance.

The speed and training-throughput figures of the book come from GPU runs of the repository's own scripts
(``scripts/gpu_check.sh``, ``scripts/gpu_profile.sh``, ``scripts/gpu_bench.py``, ``canlib bench``). Run them on a
GPU machine, bring their output folder back, and this command turns what they wrote into the stored results the
chapters load (:mod:`canlib.studies.gpu_results`), every figure computed from the raw files, never typed::

    python -m canlib ingest MEASUREMENTS_DIR book/results/gpu/<device>-<date>

The output of one GPU call (``gpu_check.tar.gz`` of ``scripts/gpu_check.sh`` and ``profile.tar.gz`` of
``scripts/gpu_profile.sh``, or the two folders unpacked, with ``nvidia_smi.txt`` and logs) is added in one
command, which keeps its raw files in the repository so that the tests can check every stored figure against
them, drafts their README and converts them (:func:`store_device_run`)::

    python -m canlib ingest --from-device FOLDER --profile-command "LIMIT=150 bash scripts/gpu_profile.sh"

It names the run ``<gpu>-<date>-<commit>`` (``-dirty`` for a changed work tree), e.g. ``h100-2026-11-26-e19dd56``:
the raw files go unchanged to ``measurements/<run>/`` and the stored results to ``book/results/gpu/<run>/``.
Then edit the drafted README with what the files cannot say (why a step failed), and, when the run stored a
training rate, add its full-recipe hours and rate (``canlib.studies.chapters.training.full_cost()``, one row per
stored rate) to the "What `full` costs" paragraph of ``measurements/README.md``: ``tests/test_full_cost.py`` checks
that it quotes them.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from canlib.bleu import corpus_scores, sentence_bleu
from canlib.data.preparation import prepared
from canlib.io import CHECKOUT_DIR, results_dir
from canlib.results.files import load_result, save_result
from canlib.results.layout import GPU_FILES as FILES
from canlib.results.layout import read_hypotheses

SOURCE = "measured on the device; converted from its raw files by canlib ingest"
# a small-can trained with `canlib train` on Multi30k En-De small: its log and its test2016 hypotheses
TRANSLATION = {"log": "train_multi30k_small-can.txt", "hyps": "multi30k_small-can_test2016.hyp.de"}
TRANSLATION_CORPUS = ("multi30k-en-de", "small", "test")
# scripts/gpu_profile.sh's summary (one beam-search step of Balanced and CAN, training updates) -> profile.json
PROFILE_RAW = "profile/summary.json"
PROFILE_FIGURES = (
    "per",
    "wall_ms",
    "cpu_ms",
    "gpu_kernel_ms",
    "gpu_busy_share",
    "kernel_launches",
    "host_syncs",
    "local_scalar_dense",
    "preset",
    "beam",
    "batch",
    "forced_length",
    "dtype",
    "tokens",
    "target_tokens",
    "precision",
    "target_tokens_per_sec",
)
# a measurement folder keeps the bench and training files at its top (shared/measurements/h200-*) or in the
# gpu_check/ folder that scripts/gpu_check.sh writes (shared/measurements/h100-*, measurements/*)
RAW_SUBFOLDERS = ("", "gpu_check")
# raw files of the GPU calls whose results are stored, kept in the repository (CI has no other copy of them)
MEASUREMENTS_DIR = CHECKOUT_DIR / "measurements"


def readme_commands(readme: Path) -> dict[str, str]:
    """The command of each raw file, from the measurement folder's README table
    (rows ``| `file.json` | `command` ... |``)."""
    commands: dict[str, str] = {}
    for line in readme.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        for name in re.findall(r"`([^`\s]+\.\w+)`", cells[0]):
            commands[name] = cells[1].replace("`", "")
    return commands


def raw_path(source: Path, name: str) -> Path | None:
    """Where raw file ``name`` lies in a measurement folder: at its top or in its ``gpu_check/`` folder."""
    for sub in RAW_SUBFOLDERS:
        path = source / sub / name
        if path.is_file():
            return path
    return None


def read_environment(source: Path) -> dict[str, str]:
    """``gpu_check/environment.txt`` (``key: value`` lines: date, commit, dirty, python, torch, device...), if any."""
    path = raw_path(source, "environment.txt")
    if path is None:
        return {}
    pairs = (line.partition(":") for line in path.read_text(encoding="utf-8").splitlines())
    return {k.strip(): v.strip() for k, sep, v in pairs if sep and k.strip() and " " not in k.strip()}


def _repeats(seconds: list[float], tokens: int) -> dict[str, Any]:
    """Tokens/s of each timed repeat and their min / median / max (the bench reports the median)."""
    per_repeat = [tokens / s for s in seconds]
    return {
        "tok_per_s": tokens / statistics.median(seconds),
        "tok_per_s_repeats": per_repeat,
        "min": min(per_repeat),
        "median": statistics.median(per_repeat),
        "max": max(per_repeat),
        "seconds": list(seconds),
        "tokens": tokens,
    }


def flat(raw: dict[str, Any]) -> dict[str, Any]:
    """A raw bench file as one dict: systems by name, metadata under ``_``-prefixed keys. The bench and
    ``scripts/gpu_bench.py`` now write ``{"systems": ..., "meta": ...}``; the stored H200 files predate that."""
    if isinstance(raw.get("systems"), dict) and isinstance(raw.get("meta"), dict):
        return {**raw["systems"], **{f"_{k}": v for k, v in raw["meta"].items()}}
    return raw


def _convert_gpu_bench(raw: dict[str, Any]) -> dict[str, Any]:
    settings = raw["_settings"]
    tokens = settings["sentences"] * settings["forced_length"]  # forced length: every sentence yields the same count
    systems: dict[str, Any] = {}
    for name, row in raw.items():
        if name.startswith("_"):
            continue
        systems[name] = {}
        for mode in ("eager", "captured"):
            if f"{mode}_seconds" not in row:
                continue
            figures = _repeats(row[f"{mode}_seconds"], tokens)
            stored = row[f"{mode}_tok_per_s"]
            if abs(figures["tok_per_s"] - stored) > 1e-6 * stored:
                raise ValueError(
                    f"gpu_bench.json: {name} {mode}: {tokens} tokens / median seconds = "
                    f"{figures['tok_per_s']:.3f} tok/s, but the file says {stored:.3f}"
                )
            systems[name][mode] = figures
    return {
        "systems": systems,
        "captured_matches_eager": raw.get("_captured_matches_eager", {}),
        "dtype": raw.get("_dtype"),
        "settings": settings,
        "errors": raw.get("_errors", {}),
    }


def _convert_bench(raw: dict[str, Any]) -> dict[str, Any]:
    systems = {k: v for k, v in raw.items() if not k.startswith("_")}
    settings = raw["_settings"]
    for row in systems.values():
        if "seconds" in row:
            row.update({k: v for k, v in _repeats(row["seconds"], row["tokens"]).items() if k != "tok_per_s"})
    return {
        "systems": systems,
        "dtype": raw.get("_dtype"),
        "settings": settings,
        "load_average": raw.get("_load_average"),
    }


def _convert_training(raw: dict[str, Any]) -> dict[str, Any]:
    out = {k: raw[k] for k in ("runs", "precision", "max_tokens", "data") if k in raw}
    peak = raw.get("peak_flops", raw.get("peak_flops_assumed"))  # the smoke script's name, then its older one
    if peak is not None:
        out["peak_flops"] = peak
    return out


def _convert_profile(raw: dict[str, Any], name: str) -> dict[str, Any]:
    """The figures of each profiled case (per update or per decoding step) and the cases that failed;
    each case's GPU busy share is checked against its kernel and wall milliseconds."""
    if raw.get("dry_run"):
        raise ValueError(
            f"{name}: a --dry-run profile (tiny models on a CPU) is a check of the script, not a measurement"
        )
    cases, errors = {}, {}
    for case, row in raw["cases"].items():
        if "error" in row:
            errors[case] = row["error"]
            continue
        share, kernel, wall = row.get("gpu_busy_share"), row.get("gpu_kernel_ms"), row.get("wall_ms")
        # all three are rounded to 3 decimals by the script: allow for that rounding, no more
        if share is not None and wall and abs(kernel / wall - share) > 0.0006 + 0.0006 / wall:
            raise ValueError(
                f"{name}: {case}: gpu_kernel_ms / wall_ms = {kernel} / {wall} = {kernel / wall:.4f}, "
                f"but the file says gpu_busy_share {share}"
            )
        cases[case] = {k: row[k] for k in PROFILE_FIGURES if k in row}
        cases[case]["top_kernels"] = row.get("top_kernels", [])[:5]
    sdpa = raw.get("sdpa_backends")
    if isinstance(sdpa, dict) and "error" in sdpa:
        errors["sdpa_backends"] = sdpa["error"]
    return {"cases": cases, "errors": errors, "sdpa_backends": sdpa, "seconds": raw.get("seconds")}


def convert_measurements(
    source: str | Path, out: str | Path, *, commit: str | None = None, date: str | None = None, note: str = SOURCE
) -> list[Path]:
    """Write each raw measurement file of ``source`` that a chapter needs as a stored result in ``out``.

    Commit, date and device come from the raw files (``_git_commit``, ``_date``, ``_device``); the
    training-throughput files record none, so they take the commit and date of the bench files
    measured in the same call (or ``commit``/``date`` when given). A ``profile/summary.json``
    (``scripts/gpu_profile.sh``) is stored as ``profile.json`` with its own commit, date and device.
    """
    source, out = Path(source), Path(out)
    commands = readme_commands(source / "README.md") if (source / "README.md").exists() else {}
    paths = {name: path for name in FILES if (path := raw_path(source, name)) is not None}
    raws = {name: flat(json.loads(path.read_text(encoding="utf-8"))) for name, path in paths.items()}
    profile = source / PROFILE_RAW
    if not raws and not profile.is_file():
        raise FileNotFoundError(f"{source}: none of {', '.join(FILES)} or {PROFILE_RAW} found")
    environment = read_environment(source)

    def command(name: str) -> str:
        rel = paths[name].relative_to(source).as_posix() if name in paths else name
        return commands.get(rel) or commands.get(name) or ""

    written = []
    if raws:
        call_commit = commit or next((r["_git_commit"] for r in raws.values() if r.get("_git_commit")), None)
        call_date = date or next((r["_date"][:10] for r in raws.values() if r.get("_date")), None)
        if not call_commit or not call_date:
            raise ValueError(f"{source}: no _git_commit/_date in the raw files; pass commit= and date=")
    for name, raw in raws.items():
        kind = FILES[name]
        result = (
            _convert_gpu_bench(raw)
            if kind == "speed"
            else _convert_training(raw)
            if kind.startswith("training")
            else _convert_bench(raw)
        )
        device = raw.get("_device") or raw.get("device")
        if not device:
            raise ValueError(f"{paths[name]}: no device recorded")
        prov = {
            "commit": raw.get("_git_commit") or call_commit,
            "date": (raw.get("_date") or call_date)[:10],
            "device": device,
            # speed and synthetic training: the paper's d=512 shapes; training_small: the small-* presets (d=256)
            "scale": "small" if kind == "training_small" else "full",
            "config": {
                "command": command(name) or raw.get("_command", ""),
                "settings": raw.get("_settings"),
                "raw_file": paths[name].relative_to(source).as_posix(),
            },
            "torch": raw.get("_torch") or raw.get("torch"),
            "source": note,
        }
        if raw.get("_date"):
            prov["measured_at"] = raw["_date"]
        if environment:
            prov["environment"] = environment
        written.append(save_result(out / f"{kind}.json", result, prov))
    if profile.is_file():
        raw = json.loads(profile.read_text(encoding="utf-8"))
        where = raw.get("device") or {}
        if not (where.get("commit") and where.get("date") and where.get("device")):
            raise ValueError(f"{profile}: its 'device' record lacks commit, date or device")
        prov = {
            "commit": where["commit"],
            "date": where["date"][:10],
            "device": where["device"],
            "scale": "full",  # the decoding cases: d=512 presets, V=32k (train_small-can: the small-can preset)
            "config": {"command": commands.get(PROFILE_RAW) or "bash scripts/gpu_profile.sh", "raw_file": PROFILE_RAW},
            "torch": where.get("torch"),
            "python": where.get("python"),
            "measured_at": where["date"],
            "source": note,
        }
        if (tree := profile_work_tree(source)) is not None:
            prov["environment"] = {"dirty": tree}
        written.append(save_result(out / "profile.json", _convert_profile(raw, str(profile)), prov))
    if (source / AB_FOLDER).is_dir():
        written.append(convert_ab(source, out, note))
    return written


def parse_train_log(text: str, name: str) -> dict[str, Any]:
    """The measurement's training log: the trainer's final JSON line (first), ``train_s``/``translate_s``
    lines, and ``canlib bleu``'s JSON scores (last)."""
    lines = [line for line in text.splitlines() if line.strip()]
    jsons = [json.loads(line) for line in lines if line.lstrip().startswith("{")]
    if len(jsons) < 2 or "stop_reason" not in jsons[0] or "bleu" not in jsons[-1]:
        raise ValueError(f"{name}: expected the trainer's final JSON line first and canlib bleu's JSON line last")
    seconds = {}
    for number, line in enumerate(lines, 1):
        key, _, value = line.partition(" ")
        if key in ("train_s", "translate_s"):
            try:
                seconds[key] = float(value.split()[0])
            except (IndexError, ValueError):
                raise ValueError(f"{name}, line {number}: {line!r}: expected '{key} <seconds>'") from None
    return {"final": jsons[0], "scores": jsons[-1], **seconds}


def convert_translation(
    source: str | Path,
    out: str | Path,
    sources: list[str],
    references: list[str],
    *,
    device: str,
    commit: str,
    date: str,
    command: str = "",
    note: str = SOURCE,
    examples: int = 5,
    tolerance: float = 0.01,
) -> Path:
    """Store a GPU-trained model's test translation as a result: its training time and final validation
    loss, sacreBLEU and tokenized BLEU **recomputed here** from its hypotheses against ``references``
    (an error if they differ from the scores the measurement recorded by more than ``tolerance``), and
    ``examples`` sentences spread over the test set. The hypotheses themselves are not copied."""
    source = Path(source)
    log = parse_train_log((source / TRANSLATION["log"]).read_text(encoding="utf-8"), TRANSLATION["log"])
    hyps = read_hypotheses(source / TRANSLATION["hyps"])
    if len(hyps) != len(references) or len(sources) != len(references):
        raise ValueError(
            f"{source / TRANSLATION['hyps']}: {len(hyps)} hypotheses for {len(sources)} sources and "
            f"{len(references)} references"
        )
    scores = corpus_scores(hyps, references)
    for key in ("bleu", "tok_bleu"):
        if abs(scores[key] - log["scores"][key]) > tolerance:
            raise ValueError(
                f"{source / TRANSLATION['hyps']}: {key} recomputed here is {scores[key]:.4f}, the "
                f"measurement recorded {log['scores'][key]:.4f}; are these the references it was scored on?"
            )
    picks = [round(i * (len(hyps) - 1) / max(examples - 1, 1)) for i in range(examples)]
    corpus, scale, split = TRANSLATION_CORPUS
    result = {
        "preset": "small-can",
        "corpus": f"{corpus}/{scale}",
        "split": split,
        "sentences": len(hyps),
        "train_s": log.get("train_s"),
        "translate_s": log.get("translate_s"),
        "updates": log["final"].get("step"),
        "epochs": log["final"].get("epoch"),
        "valid_loss": log["final"].get("last_valid", {}).get("valid_loss"),
        "scores": {k: scores[k] for k in ("bleu", "tok_bleu", "signature", "sys_len", "ref_len")},
        "recorded_scores": {k: log["scores"][k] for k in ("bleu", "tok_bleu")},
        "hyp_words_mean": statistics.mean(len(h.split()) for h in hyps),
        "ref_words_mean": statistics.mean(len(r.split()) for r in references),
        "examples": [
            {
                "index": i,
                "source": sources[i],
                "reference": references[i],
                "hypothesis": hyps[i],
                "sentence_bleu": sentence_bleu(hyps[i], references[i]),
            }
            for i in picks
        ],
    }
    prov = {
        "commit": commit,
        "date": date,
        "device": device,
        "scale": scale,
        "config": {"command": command, "raw_files": list(TRANSLATION.values())},
        "source": note,
    }
    return save_result(Path(out) / "translation_small.json", result, prov)


AB_FOLDER = "ab"  # in a measurement folder: gpu_bench.py run alternately at two commits in one GPU run


def convert_ab(source: str | Path, out: str | Path, note: str = SOURCE) -> Path:
    """An A/B of one GPU run -> ``out/ab.json``: ``scripts/gpu_bench.py`` run alternately at two commits on
    the same warm GPU (``source/ab/base_N.json`` before, ``source/ab/new_N.json`` after). Per side: its commit
    and, per run in the order they ran, each system's tok/s (the bench's median of its repeats) eager and from
    CUDA graphs, and whether captured decoding returned the eager tokens. A before/after ratio is only worth
    as much as the runs of one side agree with each other, which is why every run is kept."""
    source, out = Path(source), Path(out)
    files = sorted((source / AB_FOLDER).glob("*.json"))
    sides: dict[str, dict[str, Any]] = {}
    for path in files:
        side = "before" if path.name.startswith("base_") else "after" if path.name.startswith("new_") else None
        if side is None:
            raise ValueError(f"{path}: an A/B file is named base_N.json (before) or new_N.json (after)")
        raw = flat(json.loads(path.read_text(encoding="utf-8")))
        converted = _convert_gpu_bench(raw)
        entry = sides.setdefault(side, {"commit": raw["_git_commit"], "runs": []})
        if raw["_git_commit"] != entry["commit"]:
            raise ValueError(
                f"{path}: commit {raw['_git_commit']}, but the other {side} files are at {entry['commit']}"
            )
        entry["runs"].append(
            {
                "file": f"{AB_FOLDER}/{path.name}",
                "measured_at": raw["_date"],
                "device": raw["_device"],
                "tok_per_s": {
                    name: {mode: row[mode]["tok_per_s"] for mode in row} for name, row in converted["systems"].items()
                },
                "captured_matches_eager": converted["captured_matches_eager"],
            }
        )
    if set(sides) != {"before", "after"}:
        raise FileNotFoundError(
            f"{source / AB_FOLDER}: needs base_N.json and new_N.json files, found {[p.name for p in files]}"
        )
    runs = [run for side in sides.values() for run in side["runs"]]
    if len({run["device"] for run in runs}) != 1:
        raise ValueError(f"{source / AB_FOLDER}: the runs name different devices; an A/B needs one machine")
    for side in sides.values():
        side["runs"].sort(key=lambda run: run["measured_at"])
    after = sides["after"]["runs"][-1]
    raw = flat(json.loads((source / after["file"]).read_text(encoding="utf-8")))
    prov = {
        "commit": sides["after"]["commit"],
        "date": after["measured_at"][:10],
        "device": after["device"],
        "scale": "full",
        "torch": raw.get("_torch"),
        "source": note,
        "config": {
            "command": raw.get("_command", ""),
            "settings": raw.get("_settings"),
            "order": [run["file"] for run in sorted(runs, key=lambda run: run["measured_at"])],
        },
    }
    return save_result(out / "ab.json", sides, prov)


# -- a GPU run's output, kept in the repository ---------------------------------------------------

RAW_MAX_BYTES = 1 << 20  # a raw file above 1 MiB (a runaway log) is left out of the repository and listed in the README
STATUS_LINE = re.compile(
    r"^(?P<step>\w+): (?P<outcome>ok|FAILED \(exit \d+\)|TIMED OUT after \d+s) in (?P<s>\d+)s: (?P<command>.+)$"
)


def _last_line(path: Path) -> str:
    lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def profile_work_tree(source: Path) -> str | None:
    """``N changed files`` from ``profile/environment.txt`` (``git status --porcelain`` lines after the commit)."""
    path = source / "profile" / "environment.txt"
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    at = next((i for i, line in enumerate(lines) if re.fullmatch(r"[0-9a-f]{40}", line.strip())), None)
    return None if at is None else f"{sum(1 for line in lines[at + 1 :] if line.strip())} changed files"


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
    """``<gpu>-<date>-<commit>``, e.g. ``h100-2026-11-26-e19dd56``; ``-dirty`` when the work tree had changes."""
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
    f = device_run_facts(folder)
    smi = folder / "gpu_check" / "environment.txt"
    gpu_line = (
        next((line for line in smi.read_text(encoding="utf-8").splitlines() if line.count(",") == 2), "")
        if smi.is_file()
        else ""
    )  # nvidia-smi's "name, memory, driver"
    gpu_line = ", driver ".join(part.strip() for part in gpu_line.split(",")[1:])
    tree = "clean" if str(f.get("dirty") or "0").split()[0] == "0" else f"{f['dirty']} (not clean)"
    lines = [
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
        f"The files are unchanged copies of what the device wrote; `python -m canlib ingest` "
        f"converted them into `book/results/gpu/{run}/`.",
        "",
        "| file | command (from the project root) | outcome |",
        "|---|---|---|",
    ]
    status = folder / "gpu_check" / "status.txt"
    notes, listed = [], set()
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
        lines.append(f"| {', '.join(f'`{x}`' for x in files) or '-'} | `{m['command']}` | {outcome} |")
        listed |= set(files)
    summary = folder / PROFILE_RAW
    if summary.is_file():
        cases = json.loads(summary.read_text(encoding="utf-8"))
        lines.append(f"| `{PROFILE_RAW}` | `{profile_command}` | every case below, and `sdpa_backends` |")
        for case, row in {**cases.get("cases", {}), "sdpa_backends": cases.get("sdpa_backends") or {}}.items():
            files = [
                f"profile/{case}{ext}" for ext in (".json", ".txt") if (folder / "profile" / f"{case}{ext}").is_file()
            ]
            error = row.get("error") if isinstance(row, dict) else None
            outcome = f"case `{case}`: " + (f"FAILED: {error.strip()}".replace("|", "/") if error else "ok")
            lines.append(f"| {', '.join(f'`{x}`' for x in files) or '-'} | `{profile_command}` | {outcome} |")
            listed |= set(files)
        listed.add(PROFILE_RAW)
    for sub, command in (("gpu_check", check_command), ("profile", profile_command)):
        rest = [
            f"{sub}/{p.name}"
            for p in sorted((folder / sub).glob("*"))
            if p.is_file() and f"{sub}/{p.name}" not in listed
        ]
        if rest:
            lines.append(
                f"| {', '.join(f'`{x}`' for x in rest)} | `{command}` | written by the script itself "
                "(environment, status, summary, log) |"
            )
    top = [p.name for p in sorted(folder.glob("*")) if p.is_file() and p.suffix in (".txt", ".log")]
    if top:
        lines.append(
            f"| {', '.join(f'`{x}`' for x in top)} | - | written on the device around the two commands "
            "(`nvidia-smi`, the console output of the two calls) |"
        )
    if notes:
        lines += ["", "`gpu_check/status.txt` also says: " + "; ".join(f"`{n}`" for n in notes) + "."]
    if left_out:
        lines += ["", "Left out of the repository (over 1 MiB): " + ", ".join(f"`{x}`" for x in left_out) + "."]
    return "\n".join(lines) + "\n"


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        nargs="?",
        help="folder of raw JSON written by scripts/gpu_bench.py, canlib bench, "
        "gpu_smoke_train.py (and profile/summary.json of gpu_profile.sh)",
    )
    parser.add_argument("out", nargs="?", help="e.g. book/results/gpu/h200-2026-11-26")
    parser.add_argument(
        "--from-device",
        metavar="FOLDER",
        help="a GPU run's output (gpu_check/ and profile/, or "
        "gpu_check.tar.gz and profile.tar.gz; nvidia_smi.txt, logs): copy it unchanged to "
        "measurements/<run>/ with a README and convert it into book/results/gpu/<run>/ (no SOURCE/OUT)",
    )
    parser.add_argument("--run", help="with --from-device: the run's name (default <gpu>-<date>-<commit>)")
    parser.add_argument(
        "--profile-command",
        default="bash scripts/gpu_profile.sh",
        help="with --from-device: how gpu_profile.sh was called, for the README",
    )
    parser.add_argument(
        "--check-command",
        default="bash scripts/gpu_check.sh",
        help="with --from-device: how gpu_check.sh was called, for the README",
    )
    parser.add_argument("--commit", help="the commit measured, when the raw files do not record it")
    parser.add_argument("--date", help="YYYY-MM-DD, when the raw files do not record it")
    parser.add_argument(
        "--source-note", default=SOURCE, help="how and where it was measured, stored as provenance.source"
    )


def run(args: argparse.Namespace) -> int:
    """Convert a measurement folder (SOURCE OUT), or keep and convert a GPU run's output (--from-device)."""
    if args.from_device:
        if args.source or args.out:
            raise ValueError("--from-device takes no SOURCE or OUT")
        raw_dir, written = store_device_run(
            args.from_device,
            run=args.run,
            profile_command=args.profile_command,
            check_command=args.check_command,
            note=None if args.source_note == SOURCE else args.source_note,
        )
        print(f"raw files: {raw_dir} (README.md drafted from them: add what they cannot say)")
        for path in written:
            print(path)
        if any(path.name.startswith("training_") for path in written):
            print(
                "a training rate was stored: measurements/README.md's full-cost paragraph must quote its hours and "
                "tok/s (tests/test_full_cost.py; canlib.studies.chapters.training.full_cost() computes them)"
            )
        return 0
    if not (args.source and args.out):
        raise ValueError("give SOURCE and OUT, or --from-device FOLDER")
    written = convert_measurements(args.source, args.out, commit=args.commit, date=args.date, note=args.source_note)
    source = Path(args.source)
    if all((source / name).exists() for name in TRANSLATION.values()):
        corpus, scale, split = TRANSLATION_CORPUS
        test = prepared(corpus, scale).split(split)
        _, prov = load_result(written[0])  # the call's device, commit and date
        commands = readme_commands(source / "README.md") if (source / "README.md").exists() else {}
        written.append(
            convert_translation(
                source,
                args.out,
                list(test.src_text),
                list(test.tgt_text),
                device=prov["device"],
                commit=prov["commit"],
                date=prov["date"],
                command=commands.get(TRANSLATION["log"], ""),
                note=args.source_note,
            )
        )
    for path in written:
        print(path)
    return 0
