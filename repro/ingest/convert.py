"""The converters of ``python -m repro ingest``: each raw file a GPU script writes (speed, breakdown, batch sweep,
training rate, profile, A/B, a translation) turned into a stored result with provenance, every figure computed from the
raw numbers."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

from canlib.bleu import corpus_scores, sentence_bleu
from repro.results.files import save_result
from repro.results.layout import GPU_FILES as FILES
from repro.results.layout import read_hypotheses

SOURCE = "measured on the device; converted from its raw files by python -m repro ingest"
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
    per_pass = settings["sentences"] * settings["forced_length"]  # forced length: every sentence yields the same count
    passes = settings.get("passes", {})  # {mode: times a repeat translated the sources}; absent before --min-seconds
    systems: dict[str, Any] = {}
    for name, row in raw.items():
        if name.startswith("_"):
            continue
        systems[name] = {}
        for mode in ("eager", "captured"):
            if f"{mode}_seconds" not in row:
                continue
            tokens = per_pass * passes.get(mode, 1)
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
        written.append(_store_profile(source, out, commands.get(PROFILE_RAW), note))
    if (source / AB_FOLDER).is_dir():
        written.append(convert_ab(source, out, note))
    return written


def _store_profile(source: Path, out: Path, command: str | None, note: str) -> Path:
    """``profile/summary.json`` (``scripts/gpu_profile.sh``) stored as ``profile.json``, with the commit, date and
    device its own ``device`` record names."""
    profile = source / PROFILE_RAW
    raw = json.loads(profile.read_text(encoding="utf-8"))
    where = raw.get("device") or {}
    if not (where.get("commit") and where.get("date") and where.get("device")):
        raise ValueError(f"{profile}: its 'device' record lacks commit, date or device")
    prov = {
        "commit": where["commit"],
        "date": where["date"][:10],
        "device": where["device"],
        "scale": "full",  # the decoding cases: d=512 presets, V=32k (train_small-can: the small-can preset)
        "config": {"command": command or "bash scripts/gpu_profile.sh", "raw_file": PROFILE_RAW},
        "torch": where.get("torch"),
        "python": where.get("python"),
        "measured_at": where["date"],
        "source": note,
    }
    if (tree := profile_work_tree(source)) is not None:
        prov["environment"] = {"dirty": tree}
    return save_result(out / "profile.json", _convert_profile(raw, str(profile)), prov)


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


def profile_work_tree(source: Path) -> str | None:
    """``N changed files`` from ``profile/environment.txt`` (``git status --porcelain`` lines after the commit)."""
    path = source / "profile" / "environment.txt"
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    at = next((i for i, line in enumerate(lines) if re.fullmatch(r"[0-9a-f]{40}", line.strip())), None)
    return None if at is None else f"{sum(1 for line in lines[at + 1 :] if line.strip())} changed files"
