"""The paper's decoding-speed studies: ``run_study(study, BenchSettings) -> BenchResult``.

Speed is generated target tokens per second of the search call alone (encoder included,
tokenization excluded), CUDA synchronised before the clock stops. Every system is warmed
up first, then the systems are timed round-robin within each repeat (so slow drifts of
the machine hit all of them alike) and the median repeat is reported, with the ratio to
Balanced. Random weights at the preset shapes with ``forced_length=N`` make every
system generate exactly N tokens per sentence, so speed is compared at equal work;
``checkpoints=(("name", PATH),)`` times trained models instead. The command line
(argparse) lives in :mod:`repro.bench.cli`.

Studies: ``speed`` (Table 2), ``depth`` (Figure 4), ``beam`` (Figure 5: beam sizes, and
output-length buckets), ``batch`` (Figure 7), ``ablation`` (Table 5), and ``breakdown``
(time per component, from synchronised timers around the decoder: encoder, decoder layers,
output projection + log-softmax, and the search bookkeeping as the rest; with ``graphs``
also with the decoder replayed from CUDA graphs). ``ct2:<system>`` times the
same weights in CTranslate2 (``standard`` systems only).
"""

from __future__ import annotations

import datetime
import math
import multiprocessing
import os
import shlex
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

import torch

from canlib.catalogue import ABLATION_SYSTEMS, DEPTH_SYSTEMS, PAPER_SYSTEMS, scaled_preset
from canlib.decoding.decoder import CompiledDecoder, EagerDecoder
from canlib.decoding.runners import StepGraphs
from canlib.decoding.search import SearchSettings, beam_search, make_batch
from canlib.decoding.timing import timed_search
from canlib.io import device_name, git_commit, tqdm
from canlib.model.checkpoint import load_model
from canlib.model.config import preset
from canlib.model.seq2seq import Seq2Seq
from repro.bench.settings import BenchResult, BenchSettings

STUDIES = {
    "speed": PAPER_SYSTEMS,
    "depth": DEPTH_SYSTEMS,
    "beam": ("balanced", "can"),
    "batch": ("balanced", "can"),
    "ablation": ABLATION_SYSTEMS,
    "breakdown": PAPER_SYSTEMS,
}
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
    timed: Callable[[list[list[int]], int, int | None], tuple[int, float]] | None = None
    close: Callable[[], None] = lambda: None

    def measure(
        self, sources: list[list[int]], beam: int, forced: int | None, device: torch.device
    ) -> tuple[int, float]:
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


def system_model(name: str, settings: BenchSettings, device: torch.device, half: bool) -> Seq2Seq:
    """A trained checkpoint (``settings.checkpoints``) or random weights at the preset shape of
    ``name`` at ``settings.scale`` (an explicit "tiny-"/"small-" prefix wins), seeded per call."""
    checkpoints = dict(settings.checkpoints)
    if name in checkpoints:
        model = load_model(checkpoints[name], map_location="cpu")
    else:
        torch.manual_seed(settings.seed)
        model = Seq2Seq(preset(scaled_preset(name, settings.scale), vocab_size=settings.vocab_size))
    model = model.eval().to(device)
    return model.half() if half else model


def canlib_system(
    name: str,
    model: Seq2Seq,
    batch: int,
    len_penalty: float,
    graphs: bool,
    max_shapes: int = 8,
    fused: bool = False,
    compiled: str | None = None,
) -> System:
    """``graphs``: whole search steps replayed from CUDA graphs on CUDA (elsewhere the same static path,
    eagerly), keeping the graphs of up to ``max_shapes`` shapes (source lengths) at once; ``fused``: the
    forced-length select step as two Triton kernels (:mod:`canlib.decoding.fused`); ``compiled``: the decoder
    layers and output compiled with this ``torch.compile`` backend (:class:`CompiledDecoder`)."""
    device = model.embed.weight.device
    capture = device.type == "cuda"
    graphed = StepGraphs(model, capture=capture, max_shapes=max_shapes, compiled=compiled) if graphs else None
    decoder = CompiledDecoder(model, backend=compiled) if compiled and not graphs else None

    def run(sources: list[list[int]], beam: int, forced: int | None) -> int:
        produced = 0
        for start in range(0, len(sources), batch):
            src = make_batch(sources[start : start + batch], model.cfg.pad_id, model.cfg.eos_id, device)
            settings = SearchSettings(beam=beam, len_penalty=len_penalty, forced_length=forced, fused=fused)
            result = beam_search(model, src, settings, decoder=decoder, graphs=graphed)
            produced += sum(len(t) for t in result.tokens)
        sync(device)
        return produced

    return System(name, run, model)


def ct2_system(
    name: str, model: Seq2Seq, batch: int, len_penalty: float, device: torch.device, threads: int, workdir: Path
) -> System:
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
    worker = context.Process(
        target=_ct2_worker,
        daemon=True,
        args=(child_conn, str(folder), model.cfg.vocab_size, device.type, compute, threads, batch, len_penalty),
    )
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
            with suppress(BrokenPipeError):  # it ended already
                conn.send(None)
            worker.join(timeout=10)
        if worker.is_alive():
            worker.terminate()
        conn.close()

    return System(name, lambda *call: timed(*call)[0], None, timed, close)


def _ct2_worker(
    conn, folder: str, vocab_size: int, device: str, compute: str, threads: int, batch: int, len_penalty: float
) -> None:
    """Child process of :func:`ct2_system`: translate what the parent sends, reply (tokens, seconds), or the
    traceback of what failed (loading the model, on the first request, or translating)."""
    import traceback

    from canlib.decoding.ctranslate import CT2Translator, token_names

    ct2 = None
    while (request := conn.recv()) is not None:
        sources, beam, forced = request
        try:
            ct2 = ct2 or CT2Translator(
                folder, token_names(vocab_size), device=device, compute_type=compute, threads=threads
            )
            start, produced = time.perf_counter(), 0
            for first in range(0, len(sources), batch):
                out = ct2.translate(
                    sources[first : first + batch], beam=beam, len_penalty=len_penalty, forced_length=forced
                )
                produced += sum(len(t) for t in out)
            conn.send((produced, time.perf_counter() - start))
        except Exception:
            conn.send(traceback.format_exc())


def source_sentences(count: int, vocab_size: int, seed: int, min_len: int = 25, max_len: int = 30) -> list[list[int]]:
    """Random source ids with realistic lengths drawn from [min_len, max_len] (newstest2014's
    sentences are about 27 BPE tokens long on average)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (count,), generator=g).tolist()
    return [torch.randint(4, vocab_size, (n,), generator=g).tolist() for n in lengths]


def time_systems(
    systems: list[System],
    sources: list[list[int]],
    beam: int,
    forced: int | None,
    repeats: int,
    warmup: int,
    device: torch.device,
    desc: str,
    progress: bool = True,
    min_seconds: float = 0.0,
) -> dict[str, dict]:
    """Warm up every system on every source (captured paths capture then), then time them
    round-robin; median tokens/s per system. ``min_seconds``: every repeat translates the sources
    as many times over (``passes``) as makes the fastest system's repeat last at least that long,
    judged from the faster of two timed passes after the warm-up (a captured path may still capture in
    the first), so that short repeats' jitter does not decide a ratio."""
    for system in systems:
        for _ in range(warmup):
            system.run(sources, beam, forced)
    passes = 1
    if min_seconds > 0:
        fastest = min(system.measure(sources, beam, forced, device)[1] for system in systems for _ in range(2))
        passes = max(1, math.ceil(min_seconds / max(fastest, 1e-9)))
    timed = sources * passes
    times: dict[str, list[float]] = {s.name: [] for s in systems}
    tokens: dict[str, int] = {}
    for _ in tqdm(range(repeats), desc=desc, unit="repeat", leave=False, disable=not progress):
        for system in systems:
            tokens[system.name], seconds = system.measure(timed, beam, forced, device)
            times[system.name].append(seconds)
    medians = {name: statistics.median(seconds) for name, seconds in times.items()}
    return {
        name: {
            "tok_per_s": tokens[name] / median,
            "ms_per_sentence": 1000 * median / len(timed),
            "tokens": tokens[name],
            "seconds": times[name],
            "passes": passes,
        }
        for name, median in medians.items()
    }


def breakdown(system: System, sources: list[list[int]], s: BenchSettings, graphs: bool = False) -> dict[str, float]:
    """Median time per sentence of each part (encoder, decoder layers, output projection + softmax, search
    bookkeeping), marked on one timeline without synchronising (:func:`canlib.decoding.timing.timed_search`:
    CUDA events on a GPU), and, interleaved in the same repeats, the same search untimed
    (``end_to_end_ms``): the parts are only worth reading when their sum agrees with it
    (:func:`breakdown_gap`).

    ``graphs``: each step replayed as three CUDA graphs (layers, output, search; :class:`StepGraphs`
    with ``parts=True``) against whole steps replayed as one graph each, untimed, which is what the
    benchmark's "graphs" speed measures. One untimed pass of each first warms up (and captures); then half the
    study's repeats, plus one, of each in turn."""
    model = system.model
    device = model.embed.weight.device
    capture = device.type == "cuda"
    timed_path = StepGraphs(model, capture=capture, parts=True) if graphs else EagerDecoder(model)
    whole_path = dict(graphs=StepGraphs(model, capture=capture)) if graphs else {}
    parts = PARTS + ("total",)
    batches = [
        make_batch(sources[start : start + s.batch], model.cfg.pad_id, model.cfg.eos_id, device)
        for start in range(0, len(sources), s.batch)
    ]
    settings = SearchSettings(beam=s.beam, len_penalty=s.len_penalty, forced_length=s.forced_length or None)

    def untimed() -> float:
        sync(device)
        start = time.perf_counter()
        for src in batches:
            beam_search(model, src, settings, **whole_path)
        sync(device)
        return time.perf_counter() - start

    def timed() -> dict[str, float]:
        totals = dict.fromkeys(parts, 0.0)
        for src in batches:
            _, timing = timed_search(timed_path, src, settings)
            for part in totals:
                totals[part] += timing[part]
        return totals

    untimed(), timed()  # warm-up (and, with graphs, the captures)
    runs, whole = [], []
    for _ in range(s.repeats // 2 + 1):
        runs.append(timed())
        whole.append(untimed())
    median = {part: statistics.median(r[part] for r in runs) for part in parts}
    result = {f"{part}_ms": 1000 * median[part] / len(sources) for part in parts}
    result.update({f"{part}_share": median[part] / median["total"] for part in PARTS})
    result["end_to_end_ms"] = 1000 * statistics.median(whole) / len(sources)
    result["gap"] = breakdown_gap(result)
    result["mode"] = "graphs" if graphs else "eager"
    return result


def breakdown_gap(row: dict[str, float]) -> float:
    """How far the breakdown's parts (encode + layers + output + search) are from the end-to-end time of
    the same search run untimed, as a fraction of the latter (0.1: the parts add up to 10 % more)."""
    parts = sum(row[f"{part}_ms"] for part in PARTS)
    return parts / row["end_to_end_ms"] - 1


def busy_warning(load_average: list[float] | None, threads: int) -> str | None:
    """A warning when other work competes for the CPU: the 1-minute load average, taken before
    the bench starts, above the threads the bench itself uses (timings then mean little)."""
    if load_average is None or load_average[0] <= threads:
        return None
    return (
        f"the machine is busy: load average {load_average[0]:.2f} exceeds the bench's {threads} thread(s); "
        "other processes share the CPU and these timings may be unreliable"
    )


def run_study(study: str, settings: BenchSettings) -> BenchResult:
    """Time ``study`` (one of :data:`STUDIES`) as ``settings`` say; autograd is off inside only. Its ``meta`` says
    where, when and how the result was measured."""
    if study not in STUDIES:
        raise ValueError(f"study={study!r}: choose one of {', '.join(sorted(STUDIES))}")
    device = torch.device(settings.device)
    if settings.graphs and device.type != "cuda":
        raise ValueError("graphs=True needs a CUDA device (CUDA graphs)")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device={settings.device!r}: CUDA is not available here")
    for name, path in settings.checkpoints:
        if not Path(path).is_file():
            raise FileNotFoundError(f"checkpoint {name}={path}: no such file")
    if settings.threads:
        torch.set_num_threads(settings.threads)
    load_average = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    busy = busy_warning(load_average, torch.get_num_threads()) if device.type == "cpu" else None
    if busy:
        warnings.warn(f"python -m repro bench: {busy}", RuntimeWarning, stacklevel=2)
    half = device.type == "cuda" and not settings.fp32
    with torch.no_grad():  # never switch autograd off globally: callers run the bench in-process
        systems = _timed_study(study, settings, device, half)
    meta = {
        "device": device_name(device),
        "device_type": device.type,
        "dtype": "float16" if half else "float32",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average": load_average,  # other work on the machine, taken before the bench started
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "command": " ".join(shlex.quote(a) for a in sys.argv),
        "study": study,
        "settings": asdict(settings),
    }
    with suppress(ImportError):  # CTranslate2 is optional
        import ctranslate2

        meta["ctranslate2"] = ctranslate2.__version__
    return BenchResult(systems, meta | ({"busy_warning": busy} if busy else {}))


def _timed_study(study: str, s: BenchSettings, device: torch.device, half: bool) -> dict[str, dict]:
    """Time the study's systems; the result maps system name -> its figures. The CTranslate2 worker processes
    are closed and their exported models removed however it ends."""
    names = list(s.systems) if s.systems else default_systems(study)
    forced, results = s.forced_length or None, {}

    @cache
    def model_for(name: str) -> Seq2Seq:
        return system_model(name, s, device, half)

    with tempfile.TemporaryDirectory(prefix="canlib-bench-", ignore_cleanup_errors=True) as tmp, ExitStack() as stack:

        def make_systems(batch: int) -> list[System]:
            systems = []
            for name in names:
                if name.startswith("ct2:"):  # the same seeded weights as the canlib system, in float32 on the CPU
                    copy = system_model(name[4:], s, torch.device("cpu"), False)
                    threads = torch.get_num_threads()
                    systems.append(ct2_system(name, copy, batch, s.len_penalty, device, threads, Path(tmp)))
                else:
                    systems.append(canlib_system(name, model_for(name), batch, s.len_penalty, s.graphs))
                stack.callback(systems[-1].close)
            return systems

        vocab_size = model_for(names[0].removeprefix("ct2:")).cfg.vocab_size
        sources = source_sentences(s.sentences, vocab_size, s.seed)
        if study in ("speed", "depth", "ablation", "breakdown"):
            systems = make_systems(s.batch)
            results = time_systems(systems, sources, s.beam, forced, s.repeats, s.warmup, device, study, s.progress)
            reference = "balanced" if "balanced" in results else next(iter(results))  # else the first system
            for row in results.values():
                row[f"ratio_to_{reference}"] = row["tok_per_s"] / results[reference]["tok_per_s"]
            if s.breakdown or study == "breakdown":
                timed = [system for system in systems if system.model is not None]  # canlib's, not CTranslate2's
                for system in tqdm(timed, desc="breakdown", leave=False, disable=not s.progress):
                    for graphs in (False, True) if s.graphs else (False,):  # graphs: the decoder replayed from them
                        key = "breakdown_graphs" if graphs else "breakdown"
                        results[system.name][key] = breakdown(system, sources, s, graphs)
            return results

        def series(
            key: str, value: int, systems: list[System], srcs: list[list[int]], beam: int, length: int | None
        ) -> None:
            """Tokens/s of each system at one point of the study's curve ``key`` ("by_beam": at beam ``value``)."""
            desc = f"{key[3:]} {value}"
            rows = time_systems(systems, srcs, beam, length, s.repeats, s.warmup, device, desc, s.progress)
            for name, row in rows.items():
                results.setdefault(name, {}).setdefault(key, {})[str(value)] = row["tok_per_s"]

        if study == "beam":
            systems = make_systems(s.batch)
            for beam in s.beams:
                series("by_beam", beam, systems, sources, beam, forced)
            for length in s.lengths:
                series("by_length", length, systems, sources, s.beam, length)
        else:  # batch: the sources repeated to fill the largest batch
            for batch in s.batches:
                count = max(len(sources), batch)
                systems = make_systems(batch)
                series("by_batch", batch, systems, (sources * (count // len(sources) + 1))[:count], s.beam, forced)
                for system in systems:
                    system.close()
        return results
