"""GPU speed and training-throughput measurements, and one GPU-trained ``small-can``'s test translation,
stored as results with provenance.

The paper's speed claims are GPU claims (fp16, batch 1, beam 4). No chapter can measure them on the
CPU that builds the book, so the figures come from a GPU run of this project's own scripts, stored
under ``book/results/gpu/<run>/`` with the commit, date, device and the exact command that produced
them. :func:`convert_measurements` derives those files from the raw JSON the scripts wrote (the
figures are computed, never typed); the loaders below are what the chapters and the scorecard call.

Replace a run by measuring again on a GPU (``scripts/gpu_bench.py`` and ``canlib bench``, the
commands are listed in each file's provenance) and converting the new folder::

    python -m canlib.studies.gpu_results MEASUREMENTS_DIR book/results/gpu/<device>-<date>
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path
from typing import Any

from canlib.io import results_dir
from canlib.studies.results import load_result, save_result

DEFAULT_RUN = "h200-2026-11-26"
SOURCE = "measured by the project lead's session, copied from shared/measurements"
# raw file -> stored name; the raw files a chapter needs
FILES = {
    "gpu_bench.json": "speed",
    "breakdown.json": "breakdown",
    "bench_batch.json": "batch",
    "smoke_full.json": "training_4k",
    "smoke_32k.json": "training_32k",
    "smoke_small.json": "training_small",
}
PARTS = ("encode", "layers", "output", "search")
# a small-can trained with `canlib train` on Multi30k En-De small: its log and its test2016 hypotheses
TRANSLATION = {"log": "train_multi30k_small-can.txt", "hyps": "multi30k_small-can_test2016.hyp.de"}
TRANSLATION_CORPUS = ("multi30k-en-de", "small", "test")


def gpu_dir(run: str = DEFAULT_RUN) -> Path:
    """Where the stored results of one GPU run live."""
    return results_dir() / "gpu" / run


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


def _repeats(seconds: list[float], tokens: int) -> dict[str, Any]:
    """Tokens/s of each timed repeat and their min / median / max (the bench reports the median)."""
    per_repeat = [tokens / s for s in seconds]
    return {"tok_per_s": tokens / statistics.median(seconds), "tok_per_s_repeats": per_repeat,
            "min": min(per_repeat), "median": statistics.median(per_repeat), "max": max(per_repeat),
            "seconds": list(seconds), "tokens": tokens}


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
                raise ValueError(f"gpu_bench.json: {name} {mode}: {tokens} tokens / median seconds = "
                                 f"{figures['tok_per_s']:.3f} tok/s, but the file says {stored:.3f}")
            systems[name][mode] = figures
    return {"systems": systems, "captured_matches_eager": raw.get("_captured_matches_eager", {}),
            "dtype": raw.get("_dtype"), "settings": settings, "errors": raw.get("_errors", {})}


def _convert_bench(raw: dict[str, Any]) -> dict[str, Any]:
    systems = {k: v for k, v in raw.items() if not k.startswith("_")}
    settings = raw["_settings"]
    for row in systems.values():
        if "seconds" in row:
            row.update({k: v for k, v in _repeats(row["seconds"], row["tokens"]).items() if k != "tok_per_s"})
    return {"systems": systems, "dtype": raw.get("_dtype"), "settings": settings,
            "load_average": raw.get("_load_average")}


def _convert_training(raw: dict[str, Any]) -> dict[str, Any]:
    out = {k: raw[k] for k in ("runs", "precision", "max_tokens", "data") if k in raw}
    peak = raw.get("peak_flops", raw.get("peak_flops_assumed"))  # the smoke script's name, then its older one
    if peak is not None:
        out["peak_flops"] = peak
    return out


def convert_measurements(source: str | Path, out: str | Path, *, commit: str | None = None, date: str | None = None,
                         note: str = SOURCE) -> list[Path]:
    """Write each raw measurement file of ``source`` that a chapter needs as a stored result in ``out``.

    Commit, date and device come from the raw files (``_git_commit``, ``_date``, ``_device``); the
    training-throughput files record none, so they take the commit and date of the bench files
    measured in the same session (or ``commit``/``date`` when given).
    """
    source, out = Path(source), Path(out)
    commands = readme_commands(source / "README.md") if (source / "README.md").exists() else {}
    raws = {name: flat(json.loads((source / name).read_text(encoding="utf-8"))) for name in FILES if (source / name).exists()}
    if not raws:
        raise FileNotFoundError(f"{source}: none of {', '.join(FILES)} found")
    session_commit = commit or next((r["_git_commit"] for r in raws.values() if r.get("_git_commit")), None)
    session_date = date or next((r["_date"][:10] for r in raws.values() if r.get("_date")), None)
    if not session_commit or not session_date:
        raise ValueError(f"{source}: no _git_commit/_date in the raw files; pass commit= and date=")
    written = []
    for name, raw in raws.items():
        kind = FILES[name]
        result = (_convert_gpu_bench(raw) if kind == "speed" else
                  _convert_training(raw) if kind.startswith("training") else _convert_bench(raw))
        device = raw.get("_device") or raw.get("device")
        if not device:
            raise ValueError(f"{source / name}: no device recorded")
        prov = {
            "commit": raw.get("_git_commit") or session_commit,
            "date": (raw.get("_date") or session_date)[:10],
            "device": device,
            # speed and synthetic training: the paper's d=512 shapes; training_small: the small-* presets (d=256)
            "scale": "small" if kind == "training_small" else "full",
            "config": {"command": commands.get(name, raw.get("_command", "")), "settings": raw.get("_settings"),
                       "raw_file": name},
            "torch": raw.get("_torch") or raw.get("torch"),
            "source": note,
        }
        if raw.get("_date"):
            prov["measured_at"] = raw["_date"]
        written.append(save_result(out / f"{kind}.json", result, prov))
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


def convert_translation(source: str | Path, out: str | Path, sources: list[str], references: list[str], *,
                        device: str, commit: str, date: str, command: str = "", note: str = SOURCE,
                        examples: int = 5, tolerance: float = 0.01) -> Path:
    """Store a GPU-trained model's test translation as a result: its training time and final validation
    loss, sacreBLEU and tokenized BLEU **recomputed here** from its hypotheses against ``references``
    (an error if they differ from the scores the measurement recorded by more than ``tolerance``), and
    ``examples`` sentences spread over the test set. The hypotheses themselves are not copied."""
    from canlib.bleu import corpus_scores, sentence_bleu
    from canlib.studies.quality import read_hypotheses

    source = Path(source)
    log = parse_train_log((source / TRANSLATION["log"]).read_text(encoding="utf-8"), TRANSLATION["log"])
    hyps = read_hypotheses(source / TRANSLATION["hyps"])
    if len(hyps) != len(references) or len(sources) != len(references):
        raise ValueError(f"{source / TRANSLATION['hyps']}: {len(hyps)} hypotheses for {len(sources)} sources and "
                         f"{len(references)} references")
    scores = corpus_scores(hyps, references)
    for key in ("bleu", "tok_bleu"):
        if abs(scores[key] - log["scores"][key]) > tolerance:
            raise ValueError(f"{source / TRANSLATION['hyps']}: {key} recomputed here is {scores[key]:.4f}, the "
                             f"measurement recorded {log['scores'][key]:.4f}; are these the references it was scored on?")
    picks = [round(i * (len(hyps) - 1) / max(examples - 1, 1)) for i in range(examples)]
    corpus, scale, split = TRANSLATION_CORPUS
    result = {
        "preset": "small-can", "corpus": f"{corpus}/{scale}", "split": split, "sentences": len(hyps),
        "train_s": log.get("train_s"), "translate_s": log.get("translate_s"),
        "updates": log["final"].get("step"), "epochs": log["final"].get("epoch"),
        "valid_loss": log["final"].get("last_valid", {}).get("valid_loss"),
        "scores": {k: scores[k] for k in ("bleu", "tok_bleu", "signature", "sys_len", "ref_len")},
        "recorded_scores": {k: log["scores"][k] for k in ("bleu", "tok_bleu")},
        "hyp_words_mean": statistics.mean(len(h.split()) for h in hyps),
        "ref_words_mean": statistics.mean(len(r.split()) for r in references),
        "examples": [{"index": i, "source": sources[i], "reference": references[i], "hypothesis": hyps[i],
                      "sentence_bleu": sentence_bleu(hyps[i], references[i])} for i in picks],
    }
    prov = {"commit": commit, "date": date, "device": device, "scale": scale,
            "config": {"command": command, "raw_files": list(TRANSLATION.values())}, "source": note}
    return save_result(Path(out) / "translation_small.json", result, prov)


# -- loaders --------------------------------------------------------------------------------------

def available_runs() -> list[str]:
    """The stored GPU runs, newest folder name last."""
    root = results_dir() / "gpu"
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def speed_runs() -> list[str]:
    """The stored GPU runs that hold a speed measurement (``speed.json``), in folder-name order."""
    return [run for run in available_runs() if (gpu_dir(run) / "speed.json").exists()]


def speed_summary(run: str = DEFAULT_RUN) -> dict[str, Any]:
    """One GPU run's Table 2 speed in a row: device, commit, date, eager and CUDA-graph ratios (medians of
    the timed repeats) and how many systems' captured decoding returned the eager tokens."""
    eager, prov = gpu_speed("eager", run)
    graphs, _ = gpu_speed("captured", run)
    same = prov["captured_matches_eager"]

    def ratio(rows: dict[str, dict[str, float]], a: str, b: str) -> float:
        return rows[a]["tok_per_s"] / rows[b]["tok_per_s"] if a in rows and b in rows else float("nan")

    return {"device": prov["device"], "commit": str(prov["commit"])[:7], "date": prov["date"],
            "Balanced / Baseline eager": ratio(eager, "balanced", "baseline"),
            "CAN / Balanced eager": ratio(eager, "can", "balanced"),
            "CAN / Balanced graphs": ratio(graphs, "can", "balanced"),
            "captured == eager": f"{sum(map(bool, same.values()))} of {len(same)} systems"}


def load(kind: str, run: str = DEFAULT_RUN) -> tuple[dict[str, Any], dict[str, Any]]:
    """(result, provenance) of one stored file of a GPU run (``speed``, ``breakdown``, ``batch``, ``training_4k``...)."""
    if kind not in FILES.values():
        raise ValueError(f"kind={kind!r}: choose one of {', '.join(FILES.values())}")
    path = gpu_dir(run) / f"{kind}.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no stored GPU result; convert a measurement folder with "
                                "`python -m canlib.studies.gpu_results SOURCE OUT`")
    return load_result(path)


def gpu_speed(mode: str = "eager", run: str = DEFAULT_RUN) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Tokens/s of the Table 2 systems on the GPU: {system: {tok_per_s, min, median, max, ratio_to_balanced}}.

    ``mode`` is ``"eager"`` (PyTorch launching every kernel, the paper's regime) or ``"captured"``
    (decoder steps replayed from CUDA graphs).
    """
    if mode not in ("eager", "captured"):
        raise ValueError(f"mode={mode!r}: choose 'eager' or 'captured'")
    result, prov = load("speed", run)
    rows = {s: dict(r[mode]) for s, r in result["systems"].items() if mode in r}
    if "balanced" in rows:
        for row in rows.values():
            row["ratio_to_balanced"] = row["tok_per_s"] / rows["balanced"]["tok_per_s"]
    return rows, {**prov, "mode": mode, "dtype": result["dtype"], "settings": result["settings"],
                  "captured_matches_eager": result["captured_matches_eager"]}


def gpu_breakdown(run: str = DEFAULT_RUN) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Eager per-sentence milliseconds and shares of encoder, decoder layers, output projection and search."""
    result, prov = load("breakdown", run)
    return {s: r["breakdown"] for s, r in result["systems"].items() if "breakdown" in r}, {**prov, "dtype": result["dtype"], "settings": result["settings"]}


def gpu_batch(run: str = DEFAULT_RUN) -> tuple[dict[str, dict[int, float]], dict[str, Any]]:
    """Eager tokens/s per batch size: {system: {batch: tok/s}}."""
    result, prov = load("batch", run)
    out = {s: {int(b): v for b, v in r["by_batch"].items()} for s, r in result["systems"].items()}
    return out, {**prov, "dtype": result["dtype"], "settings": result["settings"]}


def gpu_training(kind: str = "training_4k", run: str = DEFAULT_RUN) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Training throughput (bf16, synthetic or real tokens): {system: {target_tokens_per_sec, mfu, ...}}."""
    if not kind.startswith("training"):
        raise ValueError(f"kind={kind!r}: a training file (training_4k, training_32k, training_small)")
    result, prov = load(kind, run)
    return result["runs"], {**prov, **{k: v for k, v in result.items() if k != "runs"}}


def gpu_translation(run: str = DEFAULT_RUN) -> tuple[dict[str, Any], dict[str, Any]]:
    """A small-can trained on the GPU with ``canlib train``: scores recomputed from its hypotheses, examples."""
    path = gpu_dir(run) / "translation_small.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no stored GPU translation; convert a measurement folder with "
                                "`python -m canlib.studies.gpu_results SOURCE OUT`")
    return load_result(path)


def gpu_setting(prov: dict[str, Any]) -> str:
    """How a GPU figure was measured, in words, for the line under a table."""
    s = prov.get("settings") or {}
    batch = (f"batch sizes {', '.join(map(str, s['batches']))}" if s.get("study") == "batch" and s.get("batches")
             else f"batch {s.get('batch', 1)}")
    return (f"{prov['device']}, {prov.get('dtype') or 'dtype not recorded'}, beam {s.get('beam')}, {batch}, "
            f"forced length {s.get('forced_length')}, {s.get('sentences')} sentences x {s.get('repeats')} repeats, "
            f"d=512 presets with random weights, commit {prov['commit']}, {prov['date']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="store raw GPU measurements as results with provenance")
    parser.add_argument("source", help="folder of raw JSON written by scripts/gpu_bench.py, canlib bench, gpu_smoke_train.py")
    parser.add_argument("out", help="e.g. book/results/gpu/h200-2026-11-26")
    parser.add_argument("--commit", help="the commit measured, when the raw files do not record it")
    parser.add_argument("--date", help="YYYY-MM-DD, when the raw files do not record it")
    parser.add_argument("--source-note", default=SOURCE, help="who measured it, stored as provenance.source")
    args = parser.parse_args(argv)
    written = convert_measurements(args.source, args.out, commit=args.commit, date=args.date, note=args.source_note)
    source = Path(args.source)
    if all((source / name).exists() for name in TRANSLATION.values()):
        from canlib.data import load_prepared, prepare

        corpus, scale, split = TRANSLATION_CORPUS
        test = load_prepared(prepare(corpus, scale, progress=False)).split(split)
        _, prov = load_result(written[0])  # the session's device, commit and date
        commands = readme_commands(source / "README.md") if (source / "README.md").exists() else {}
        written.append(convert_translation(source, args.out, list(test.src_text), list(test.tgt_text),
                                           device=prov["device"], commit=prov["commit"], date=prov["date"],
                                           command=commands.get(TRANSLATION["log"], ""), note=args.source_note))
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
