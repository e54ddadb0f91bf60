"""``python -m canlib bench``: the paper's decoding-speed studies, as JSON and plots.

Speed is generated target tokens per second of the search call alone (encoder included,
tokenization excluded), CUDA synchronised before the clock stops. Every system is warmed
up first, then the systems are timed round-robin within each repeat (so slow drifts of
the machine hit all of them alike) and the median repeat is reported, with the ratio to
Balanced. Random weights at the preset shapes with ``--forced-length N`` make every
system generate exactly N tokens per sentence, so speed is compared at equal work;
``--checkpoint name=PATH`` times trained models instead.

Studies: ``speed`` (Table 2), ``depth`` (Figure 4), ``beam`` (Figure 5: beam sizes, and
output-length buckets), ``batch`` (Figure 7), ``ablation`` (Table 5), and ``breakdown``
(time per component, from synchronised manual timers inside the search: encoder, decoder
layers, output projection + log-softmax, search bookkeeping). ``ct2:<system>`` times the
same weights in CTranslate2 (``standard`` systems only).
"""
from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from tqdm import tqdm

from canlib.model.checkpoint import load_model
from canlib.model.config import ABLATION_SYSTEMS, DEPTH_SYSTEMS, PAPER_SYSTEMS, preset
from canlib.model.seq2seq import Seq2Seq
from canlib.io import device_name, git_commit
from canlib.decoding.search import GraphedDecoder, beam_search, make_batch

STUDIES = {
    "speed": PAPER_SYSTEMS,
    "depth": DEPTH_SYSTEMS,
    "beam": ("balanced", "can"),
    "batch": ("balanced", "can"),
    "ablation": ABLATION_SYSTEMS,
    "breakdown": PAPER_SYSTEMS,
}
SIZE_PREFIX = {"full": "", "small": "small-", "tiny": "tiny-"}
PARTS = ("encode", "layers", "output", "search")


@dataclass
class System:
    """One timed system: a name and a function translating source id lists, returning token count.

    ``measure`` times one call; a system that runs in another process (CTranslate2) times
    itself there and passes ``timed``, returning (tokens, seconds).
    """

    name: str
    run: Callable[[list[list[int]], int, int | None], int]  # (sources, beam, forced_length) -> tokens
    model: Seq2Seq | None = None
    extra: dict = field(default_factory=dict)
    timed: Callable[[list[list[int]], int, int | None], tuple[int, float]] | None = None
    close: Callable[[], None] = lambda: None

    def measure(self, sources: list[list[int]], beam: int, forced: int | None, device: torch.device) -> tuple[int, float]:
        if self.timed:
            return self.timed(sources, beam, forced)
        sync(device)
        start = time.perf_counter()
        tokens = self.run(sources, beam, forced)
        return tokens, time.perf_counter() - start


def default_systems(study: str) -> list[str]:
    """The study's systems; the speed study adds CTranslate2 (the reference engine) where installed."""
    from canlib.decoding.ctranslate import ctranslate2_installed

    names = list(STUDIES[study])
    if study == "speed" and ctranslate2_installed():
        names += ["ct2:baseline", "ct2:balanced"]
    return names


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def build_model(name: str, checkpoints: dict[str, str], size: str, vocab_size: int, device: torch.device,
                half: bool, seed: int) -> Seq2Seq:
    """A trained checkpoint (``name=PATH``) or random weights at the preset shape (seeded per name)."""
    if name in checkpoints:
        model = load_model(checkpoints[name], map_location="cpu")
    else:
        sized = name.startswith(("tiny-", "small-"))  # an explicit size wins over --preset-size
        torch.manual_seed(seed)
        model = Seq2Seq(preset(name if sized else SIZE_PREFIX[size] + name, vocab_size=vocab_size))
    model = model.eval().to(device)
    return model.half() if half else model


def canlib_system(name: str, model: Seq2Seq, batch: int, len_penalty: float, captured: bool) -> System:
    device = model.embed.weight.device
    # captured: CUDA graphs on CUDA; elsewhere the same static-buffer path, replayed eagerly
    graphs = GraphedDecoder(model, capture=device.type == "cuda") if captured else None

    def run(sources: list[list[int]], beam: int, forced: int | None) -> int:
        produced = 0
        for start in range(0, len(sources), batch):
            src = make_batch(sources[start : start + batch], model.cfg.pad_id, model.cfg.eos_id, device)
            result = beam_search(model, src, beam=beam, len_penalty=len_penalty, forced_length=forced, graphs=graphs)
            produced += sum(len(t) for t in result.tokens)
        sync(device)
        return produced

    return System(name, run, model)


def ct2_system(name: str, model: Seq2Seq, batch: int, len_penalty: float, device: torch.device, threads: int,
               workdir: Path) -> System:
    """The same weights in CTranslate2, run (and timed) in a process of its own.

    In one process with PyTorch, both engines' OpenMP runtimes are loaded. On this project's
    2-core CPU canlib then ran about 25% slower once CTranslate2 had run (its CPU use fell from
    2.0 to 1.5 cores) and CTranslate2 ran 25-45% slower than on its own; a worker process keeps
    each engine's timing its own.
    """
    from canlib.decoding.ctranslate import export_ctranslate2

    folder = export_ctranslate2(model.float().cpu(), workdir / name.replace(":", "_"))
    compute = "float16" if device.type == "cuda" else "float32"
    context = multiprocessing.get_context("spawn")
    conn, child_conn = context.Pipe()
    worker = context.Process(target=_ct2_worker, daemon=True,
                             args=(child_conn, str(folder), model.cfg.vocab_size, device.type, compute, threads, batch, len_penalty))
    worker.start()
    child_conn.close()

    def timed(sources: list[list[int]], beam: int, forced: int | None) -> tuple[int, float]:
        try:
            conn.send((sources, beam, forced))
            reply = conn.recv()
        except (EOFError, BrokenPipeError):
            worker.join(timeout=10)
            raise RuntimeError(f"{name}: the CTranslate2 worker process ended (exit code {worker.exitcode})") from None
        if isinstance(reply, str):
            raise RuntimeError(f"{name}: the CTranslate2 worker failed:\n{reply}")
        return reply

    def close() -> None:
        if worker.is_alive():
            try:
                conn.send(None)
            except BrokenPipeError:
                pass  # it ended already
            worker.join(timeout=10)
        if worker.is_alive():
            worker.terminate()
        conn.close()

    return System(name, lambda *call: timed(*call)[0], None, {"compute_type": compute}, timed, close)


def _ct2_worker(conn, folder: str, vocab_size: int, device: str, compute: str, threads: int, batch: int,
                len_penalty: float) -> None:
    """Child process of :func:`ct2_system`: translate what the parent sends, reply (tokens, seconds)."""
    import traceback

    from canlib.decoding.ctranslate import CT2Translator, token_names

    try:
        ct2 = CT2Translator(folder, token_names(vocab_size), device=device, compute_type=compute, threads=threads)
    except Exception:
        ct2, error = None, traceback.format_exc()
    while (request := conn.recv()) is not None:
        if ct2 is None:
            conn.send(error)
            continue
        sources, beam, forced = request
        try:
            start, produced = time.perf_counter(), 0
            for first in range(0, len(sources), batch):
                out = ct2.translate(sources[first : first + batch], beam=beam, len_penalty=len_penalty, forced_length=forced)
                produced += sum(len(t) for t in out)
            conn.send((produced, time.perf_counter() - start))
        except Exception:
            conn.send(traceback.format_exc())


def source_sentences(count: int, vocab_size: int, vocab_path: str | None, data_dir: str | None, seed: int,
                     min_len: int = 25, max_len: int = 30) -> list[list[int]]:
    """Realistic-length sources: newstest2014 English encoded with ``vocab_path`` if given,
    else random ids with lengths drawn from [min_len, max_len]."""
    if vocab_path:
        from canlib.data.vocab import Vocabulary

        vocab = Vocabulary.load(vocab_path)
        folder = Path(data_dir or os.environ.get("CANLIB_DATA_DIR", "../shared/data"))
        path = folder / "wmt14-en-de" / "newstest2014.en"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: newstest2014.en not found (set --data-dir or CANLIB_DATA_DIR)")
        lines = path.read_text(encoding="utf-8").splitlines()[:count]
        return [ids[:200] for ids in vocab.encode_batch(lines)]
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (count,), generator=g).tolist()
    return [torch.randint(4, vocab_size, (n,), generator=g).tolist() for n in lengths]


def time_systems(systems: list[System], sources: list[list[int]], beam: int, forced: int | None, repeats: int,
                 warmup: int, device: torch.device, desc: str, progress: bool = True) -> dict[str, dict]:
    """Warm up every system on every source (captured paths capture then), then time them
    round-robin; median tokens/s per system."""
    for system in systems:
        for _ in range(warmup):
            system.run(sources, beam, forced)
    times: dict[str, list[float]] = {s.name: [] for s in systems}
    tokens: dict[str, int] = {}
    for _ in tqdm(range(repeats), desc=desc, unit="repeat", leave=False, disable=not progress):
        for system in systems:
            tokens[system.name], seconds = system.measure(sources, beam, forced, device)
            times[system.name].append(seconds)
    out = {}
    for system in systems:
        median = statistics.median(times[system.name])
        out[system.name] = {
            "tok_per_s": tokens[system.name] / median,
            "ms_per_sentence": 1000 * median / len(sources),
            "tokens": tokens[system.name],
            "seconds": times[system.name],
        }
    return out


def breakdown(system: System, sources: list[list[int]], beam: int, batch: int, forced: int | None,
              repeats: int, len_penalty: float) -> dict[str, float]:
    """Median share of each part (encoder, decoder layers, output projection + softmax, search
    bookkeeping) of the search time, from beam_search's synchronised timers."""
    model = system.model
    device = model.embed.weight.device
    runs = []
    for _ in range(repeats):
        totals = dict.fromkeys(PARTS + ("total",), 0.0)
        for start in range(0, len(sources), batch):
            src = make_batch(sources[start : start + batch], model.cfg.pad_id, model.cfg.eos_id, device)
            timing = beam_search(model, src, beam=beam, len_penalty=len_penalty, forced_length=forced, timing=True).timing
            for part in totals:
                totals[part] += timing[part]
        runs.append(totals)
    median = {part: statistics.median(r[part] for r in runs) for part in PARTS + ("total",)}
    result = {f"{part}_ms": 1000 * median[part] / len(sources) for part in PARTS + ("total",)}
    result.update({f"{part}_share": median[part] / median["total"] for part in PARTS})
    return result


def metadata(args: argparse.Namespace, device: torch.device, dtype: str) -> dict:
    meta = {
        "_device": device_name(device),
        "_device_type": device.type,
        "_dtype": dtype,
        "_torch": torch.__version__,
        "_threads": torch.get_num_threads(),
        "_load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,  # other work on the machine
        "_date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "_git_commit": git_commit(),
        "_command": " ".join(shlex.quote(a) for a in sys.argv),
        "_settings": {
            k: v for k, v in vars(args).items() if k not in ("func",) and isinstance(v, (int, float, str, list, type(None)))
        },
    }
    try:
        import ctranslate2

        meta["_ctranslate2"] = ctranslate2.__version__
    except ImportError:
        pass
    return meta


def parse_checkpoints(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--checkpoint {item!r}: expected name=PATH")
        if not Path(path).is_file():
            raise FileNotFoundError(f"--checkpoint {name}={path}: no such file")
        out[name] = path
    return out


def int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("study", choices=sorted(STUDIES), help="which study to run")
    parser.add_argument("--systems", help="comma-separated systems (presets, ct2:<preset>, or checkpoint names); "
                        "default: the study's systems (speed: with CTranslate2's Baseline and Balanced where installed)")
    parser.add_argument("--checkpoint", action="append", default=[], metavar="NAME=PATH", help="time a trained model")
    parser.add_argument("--preset-size", choices=sorted(SIZE_PREFIX), default="full", help="random-weight preset size")
    parser.add_argument("--vocab-size", type=int, default=32000, help="random-weight vocabulary size (default 32000)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--beams", type=int_list, default=[1, 4, 16, 64, 256], help="beam study: beam sizes")
    parser.add_argument("--lengths", type=int_list, default=[10, 20, 30, 40, 50], help="beam study: output lengths")
    parser.add_argument("--batch", type=int, default=1, help="sentences per search call")
    parser.add_argument("--batches", type=int_list, default=[1, 2, 4, 8, 16, 32, 64], help="batch study: batch sizes")
    parser.add_argument("--forced-length", type=int, default=30, help="generate exactly N tokens (0: free decoding)")
    parser.add_argument("--sentences", type=int, default=8, help="source sentences per timed repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--len-penalty", type=float, default=1.0)
    parser.add_argument("--vocab", help="SentencePiece model: time real newstest2014 sentences instead of random ids")
    parser.add_argument("--data-dir", help="data folder (default: CANLIB_DATA_DIR)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: leave torch's default)")
    parser.add_argument("--fp32", action="store_true", help="float32 on CUDA (default there: float16)")
    parser.add_argument("--captured", action="store_true", help="CUDA: replay decode steps from CUDA graphs")
    parser.add_argument("--breakdown", action="store_true", help="also time the components of each canlib system")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (e.g. inside a notebook)")
    parser.add_argument("--json", help="write the results here (JSON)")
    parser.add_argument("--plot", help="write a plot here (default: the JSON path with .png)")


def run(args: argparse.Namespace) -> int:
    with torch.no_grad():  # never switch autograd off globally: callers may run bench in-process
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    half = device.type == "cuda" and not args.fp32
    if args.captured and device.type != "cuda":
        raise ValueError("--captured needs a CUDA device (CUDA graphs)")
    for name in ("beam", "batch", "sentences", "repeats"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name}={getattr(args, name)}: must be at least 1")
    forced = args.forced_length or None
    checkpoints = parse_checkpoints(args.checkpoint)
    names = args.systems.split(",") if args.systems else default_systems(args.study)
    workdir = Path(tempfile.mkdtemp(prefix="canlib-bench-"))
    models: dict[str, Seq2Seq] = {}
    created: list[System] = []

    def model_for(name: str) -> Seq2Seq:
        if name not in models:
            models[name] = build_model(name, checkpoints, args.preset_size, args.vocab_size, device, half, args.seed)
        return models[name]

    def make_systems(batch: int) -> list[System]:
        systems = []
        for name in names:
            if name.startswith("ct2:"):  # the same seeded weights as the canlib system, in float32 on the CPU
                copy = build_model(name[4:], checkpoints, args.preset_size, args.vocab_size, torch.device("cpu"), False, args.seed)
                systems.append(ct2_system(name, copy, batch, args.len_penalty, device, torch.get_num_threads(), workdir))
            else:
                systems.append(canlib_system(name, model_for(name), batch, args.len_penalty, args.captured))
        created.extend(systems)
        return systems

    vocab_size = model_for(names[0].removeprefix("ct2:")).cfg.vocab_size
    sources = source_sentences(args.sentences, vocab_size, args.vocab, args.data_dir, args.seed)
    try:
        results = run_study(args, names, sources, forced, make_systems, device)
    finally:
        for system in created:  # CTranslate2 worker processes
            system.close()
        shutil.rmtree(workdir, ignore_errors=True)  # exported CTranslate2 models
    results.update(metadata(args, device, "float16" if half else "float32"))
    print_table(args.study, results)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
        plot(args.study, results, args.plot or str(Path(args.json).with_suffix(".png")))
    elif args.plot:
        plot(args.study, results, args.plot)
    return 0


def run_study(args: argparse.Namespace, names: list[str], sources: list[list[int]], forced: int | None,
              make_systems: Callable[[int], list[System]], device: torch.device) -> dict:
    """Time the study's systems; the result maps system name -> its figures."""
    results: dict = {}
    if args.study in ("speed", "depth", "ablation", "breakdown"):
        systems = make_systems(args.batch)
        results = time_systems(systems, sources, args.beam, forced, args.repeats, args.warmup, device, args.study, not args.no_progress)
        reference = results.get("balanced") or results.get(names[0])
        for row in results.values():
            row["ratio_to_balanced" if "balanced" in results else f"ratio_to_{names[0]}"] = row["tok_per_s"] / reference["tok_per_s"]
        if args.breakdown or args.study == "breakdown":
            for system in tqdm(systems, desc="breakdown", leave=False, disable=args.no_progress):
                if system.model is not None:
                    results[system.name]["breakdown"] = breakdown(
                        system, sources, args.beam, args.batch, forced, max(1, args.repeats // 2 + 1), args.len_penalty)
    elif args.study == "beam":
        systems = make_systems(args.batch)
        for beam in args.beams:
            for name, row in time_systems(systems, sources, beam, forced, args.repeats, args.warmup, device, f"beam {beam}", not args.no_progress).items():
                results.setdefault(name, {}).setdefault("by_beam", {})[str(beam)] = row["tok_per_s"]
        for length in args.lengths:
            for name, row in time_systems(systems, sources, args.beam, length, args.repeats, args.warmup, device, f"length {length}", not args.no_progress).items():
                results[name].setdefault("by_length", {})[str(length)] = row["tok_per_s"]
    else:  # batch
        for batch in args.batches:
            count = max(len(sources), batch)
            batch_sources = (sources * (count // len(sources) + 1))[:count]
            systems = make_systems(batch)
            rows = time_systems(systems, batch_sources, args.beam, forced, args.repeats, args.warmup, device, f"batch {batch}", not args.no_progress)
            for system in systems:
                system.close()
            for name, row in rows.items():
                results.setdefault(name, {}).setdefault("by_batch", {})[str(batch)] = row["tok_per_s"]
    return results


def systems_of(results: dict) -> dict[str, dict]:
    return {k: v for k, v in results.items() if not k.startswith("_")}


def print_table(study: str, results: dict) -> None:
    rows = systems_of(results)
    print(f"# {study} on {results['_device']} ({results['_dtype']}, {results['_threads']} threads)")
    for name, row in rows.items():
        if "tok_per_s" in row:
            ratio = next((v for k, v in row.items() if k.startswith("ratio_to_")), float("nan"))
            line = f"{name:<16}{row['tok_per_s']:>10.1f} tok/s  {row['ms_per_sentence']:>8.1f} ms/sent  x{ratio:.2f}"
            if "breakdown" in row:
                b = row["breakdown"]
                line += "  | " + "  ".join(f"{p} {b[p + '_ms']:.1f}ms ({100 * b[p + '_share']:.0f}%)" for p in PARTS)
            print(line)
        else:
            for key, series in row.items():
                print(f"{name:<16}{key}: " + ", ".join(f"{x}={v:.1f}" for x, v in series.items()))


def plot(study: str, results: dict, path: str) -> None:
    """Save the study's plot. Uses matplotlib's object API, never pyplot, so running the bench
    inside a notebook leaves the notebook's backend (and its inline figures) alone."""
    from matplotlib.figure import Figure

    rows = systems_of(results)
    series_keys = sorted({k for row in rows.values() for k in row if k.startswith("by_")})
    panels = series_keys or ["tok_per_s"]
    fig = Figure(figsize=(5 * len(panels), 3.5))
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, key in zip(axes[0], panels):
        if key == "tok_per_s":
            ax.bar(list(rows), [row["tok_per_s"] for row in rows.values()], color="tab:blue")
            ax.set_ylabel("target tokens / s")
            ax.tick_params(axis="x", rotation=30)
        else:
            for name, row in rows.items():
                xs = [int(x) for x in row[key]]
                ax.plot(xs, list(row[key].values()), marker="o", label=name)
            ax.set_xscale("log", base=2)
            ax.set_xlabel(key[3:])
            ax.set_ylabel("target tokens / s")
            ax.legend()
    fig.suptitle(f"{study}: {results['_device']} ({results['_dtype']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
