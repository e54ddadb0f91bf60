"""Where a GPU's time goes: torch.profiler tables for one training update and one beam-search step.

    python scripts/gpu_profile.py --out DIR              # on a GPU (scripts/gpu_profile.sh runs this)
    python scripts/gpu_profile.py --out DIR --dry-run    # on a CPU: tiny sizes, checks the script end to end

Cases (random weights, synthetic tokens; bf16 training, fp16 decoding, as the project's GPU scripts):

- ``train_small-can``: one ``small-can`` update of 8,192 tokens (a 10,000-piece vocabulary, Multi30k-like lengths);
- ``train_baseline``, ``train_can``: one d=512 update of 32,768 tokens (32k vocabulary), the shapes where
  ``scripts/gpu_check.sh`` measured Baseline three times slower than CAN (token budgets are padded tokens; each
  case replays one batch, its epoch's fullest, and reports its target tokens);
- ``decode_balanced``, ``decode_can``: beam search (beam 4, batch 1, 30 forced tokens), reported per step;
  ``decode_balanced_fused``, ``decode_can_fused``: the same with the select step as two Triton kernels;
  ``decode_balanced_compiled``, ``decode_can_compiled``: with the encoder, decoder layers and output compiled by
  ``torch.compile`` (``--compile-backend``, default inductor; compiled by the warm-up search, not profiled).

For each case, ``DIR/<case>.txt`` (case = the names above) holds the operator table sorted by GPU time (CPU time on
a CPU), and
``DIR/<case>.json`` the summary: wall milliseconds per update or step (timed without the profiler), CPU and GPU
time under the profiler, kernel launches, host syncs (device synchronisations and device-to-host copies) and the
top kernels by GPU time. ``DIR/sdpa_backends.json`` times one Baseline and one CAN update with
scaled_dot_product_attention restricted to each backend (flash, efficient, cuDNN, math): the decoder's
self-attention passes an explicit boolean causal mask, which rules out the flash kernel, so this names the kernel
a slow update spends its attention time in. ``DIR/profile.json`` is the stored result (:mod:`repro.bench.stored`):
each case's figures and top kernels, the failed cases' errors, with its provenance (a ``--dry-run`` one at scale
``tiny``, never a measurement).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch.profiler import ProfilerActivity, profile

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

from gpu_smoke_train import synthetic_split  # noqa: E402

from canlib.decoding import fused  # noqa: E402
from canlib.io import origin  # noqa: E402
from canlib.model.config import preset  # noqa: E402
from canlib.training import TrainConfig, Trainer  # noqa: E402
from repro.bench.stored import gpu_provenance, profile_result  # noqa: E402
from repro.results.files import save_result  # noqa: E402

SYNC_EVENTS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
LAUNCH_EVENTS = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaGraphLaunch")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def wall_ms(fn: Callable[[], Any], device: torch.device, repeats: int) -> float:
    """Median milliseconds of ``fn`` (the device waited for after each call)."""
    times = []
    for _ in range(repeats):
        _sync(device)
        tic = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - tic) * 1e3)
    return sorted(times)[len(times) // 2]


def profiled(
    fn: Callable[[], Any], device: torch.device, per: int, out: Path, name: str, wall: float
) -> dict[str, Any]:
    """Profile one call of ``fn`` (which runs ``per`` updates or steps); write ``name``.txt and return the summary."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    _sync(device)
    with profile(activities=activities) as prof:
        fn()
        _sync(device)
    events = prof.key_averages()
    on_gpu = device.type == "cuda"
    try:
        table = events.table(sort_by="self_device_time_total" if on_gpu else "self_cpu_time_total", row_limit=40)
    except (AttributeError, KeyError):  # PyTorch before 2.4 names the GPU column "cuda"
        table = events.table(sort_by="self_cuda_time_total", row_limit=40)
    (out / f"{name}.txt").write_text(table + "\n")

    def device_us(e: Any) -> float:
        return float(getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0)) or 0.0)

    kernels = [
        e
        for e in events
        if on_gpu
        and device_us(e) > 0
        and not e.key.startswith(("aten::", "cuda", "Memcpy", "Memset"))
        and e.device_type == torch.autograd.DeviceType.CUDA
    ]
    counts = {e.key: e.count for e in events}
    launches = sum(counts.get(k, 0) for k in LAUNCH_EVENTS)
    syncs = sum(counts.get(k, 0) for k in SYNC_EVENTS)
    dtoh = sum(e.count for e in events if "DtoH" in e.key and e.device_type == torch.autograd.DeviceType.CUDA)
    top = sorted(kernels, key=device_us, reverse=True)[:15]
    gpu_us = sum(device_us(e) for e in kernels)
    cpu_us = sum(float(e.self_cpu_time_total) for e in events)
    return {
        "per": per,
        "wall_ms": round(wall, 3),
        "cpu_ms": round(cpu_us / 1e3 / per, 3),
        "gpu_kernel_ms": round(gpu_us / 1e3 / per, 3),
        "gpu_busy_share": round(gpu_us / 1e3 / per / wall, 3) if on_gpu and wall else None,
        "kernel_launches": round(launches / per, 1),
        "host_syncs": round((syncs + dtoh) / per, 1),
        "local_scalar_dense": round(counts.get("aten::_local_scalar_dense", 0) / per, 1),
        "top_kernels": [
            {
                "name": e.key[:120],
                "calls": round(e.count / per, 1),
                "gpu_ms": round(device_us(e) / 1e3 / per, 3),
                "share": round(device_us(e) / gpu_us, 3) if gpu_us else None,
            }
            for e in top
        ],
    }


def profile_trainer(
    name: str, vocab: int, tokens: int, max_len: int, device: torch.device, run: str, pairs: int | None = None
) -> tuple[Trainer, list[list[int]], int]:
    """A trainer for preset ``name`` on synthetic pairs (``pairs``, default enough for several full batches of
    ``tokens`` padded tokens) and the one update every timing of it replays: the epoch's group with the most
    target tokens, with that count. Replaying one group means a case never runs out of batches (an epoch of
    4,000 pairs at 32,768 tokens holds six, fewer than the warm-up, timed and profiled updates together) and
    every case and attention backend times the same tokens."""
    precision = "bf16" if device.type == "cuda" else "fp32"
    split = synthetic_split(pairs or max(4000, 16 * tokens // max_len), vocab, max_len)
    cfg = TrainConfig(
        max_tokens=tokens,
        max_steps=10**6,
        warmup=4000,
        device=str(device),
        precision=precision,
        progress=False,
        keep_last=1,
        average_last=1,
    )
    trainer = Trainer(preset(name, vocab_size=vocab), cfg, split, None, run)
    target = lambda group: sum(int(split.tgt_lens[i]) + 1 for batch in group for i in batch)  # noqa: E731  (+1: EOS)
    group = max(trainer._groups(), key=target)
    return trainer, group, target(group)


def train_case(
    label: str,
    name: str,
    vocab: int,
    tokens: int,
    max_len: int,
    device: torch.device,
    out: Path,
    warmup: int,
    repeats: int,
    pairs: int | None = None,
) -> dict[str, Any]:
    """Profile one update of preset ``name`` on a batch of at most ``tokens`` padded tokens (after ``warmup``
    untimed ones); tokens per second count the batch's target tokens (EOS included)."""
    with tempfile.TemporaryDirectory() as run:
        trainer, group, target_tokens = profile_trainer(name, vocab, tokens, max_len, device, run, pairs)
        step = lambda: trainer._update(group)  # noqa: E731
        for _ in range(warmup):
            step()
        wall = wall_ms(step, device, repeats)
        summary = profiled(step, device, 1, out, label, wall)
        precision = trainer.cfg.precision
    summary.update(
        preset=name,
        tokens=tokens,
        target_tokens=target_tokens,
        precision=precision,
        target_tokens_per_sec=round(target_tokens / (wall / 1e3)) if wall else None,
    )
    return summary


def decode_case(
    label: str,
    name: str,
    vocab: int,
    steps: int,
    device: torch.device,
    out: Path,
    repeats: int,
    fused: bool = False,
    compiled: str | None = None,
) -> dict[str, Any]:
    """Profile a beam search (beam 4, batch 1, ``steps`` forced tokens; ``fused``: the select step as two
    Triton kernels; ``compiled``: the encoder, decoder layers and output compiled with that backend); times per step."""
    from canlib.decoding.decoder import CompiledDecoder
    from canlib.decoding.search import SearchSettings, beam_search
    from canlib.model import Seq2Seq

    torch.manual_seed(0)
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    model = Seq2Seq(preset(name, vocab_size=vocab)).to(device=device, dtype=dtype).eval()
    src = torch.randint(4, vocab, (1, 27), device=device)
    src[:, -1] = model.cfg.eos_id
    decoder = CompiledDecoder(model, backend=compiled) if compiled else None
    settings = SearchSettings(beam=4, forced_length=steps, fused=fused)
    search = lambda: beam_search(model, src, settings, decoder=decoder)  # noqa: E731
    # no_grad for the compiled cases: torch.compile's symbolic sizes refuse inference-mode tensors
    with torch.no_grad() if compiled else torch.inference_mode():
        search()
        wall = wall_ms(search, device, repeats) / steps
        summary = profiled(search, device, steps, out, label, wall)
    summary.update(
        preset=name,
        beam=4,
        batch=1,
        forced_length=steps,
        dtype=str(dtype).replace("torch.", ""),
        fused=fused,
        compiled=compiled,
    )
    return summary


def sdpa_backends(
    names: list[str], vocab: int, tokens: int, max_len: int, device: torch.device, warmup: int, repeats: int
) -> dict[str, Any]:
    """Milliseconds per update with scaled_dot_product_attention restricted to one backend at a time."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = {
        "default": None,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "math": SDPBackend.MATH,
    }
    out: dict[str, Any] = {}
    for name in names:
        with tempfile.TemporaryDirectory() as run:
            trainer, group, _ = profile_trainer(name, vocab, tokens, max_len, device, run)
            row: dict[str, Any] = {}
            for label, backend in backends.items():

                def step() -> None:
                    with nullcontext() if backend is None else sdpa_kernel([backend]):
                        trainer._update(group)

                try:
                    for _ in range(warmup):
                        step()
                    row[label] = round(wall_ms(step, device, repeats), 3)
                except RuntimeError as exc:  # e.g. flash takes no attention mask
                    row[label] = f"not available: {str(exc).splitlines()[0][:160]}"
            out[name] = row
    return out


class Sizes(NamedTuple):
    """Tokens per batch, vocabularies and repetitions of the cases."""

    small_tokens: int
    big_tokens: int
    vocab_small: int
    vocab_big: int
    warmup: int
    repeats: int
    steps: int


SIZES = {False: Sizes(8192, 32768, 10000, 32000, 3, 3, 30), True: Sizes(256, 512, 300, 500, 1, 1, 3)}  # True: dry run


def profile_cases(
    args: argparse.Namespace, device: torch.device, out: Path, summary: dict[str, Any]
) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """The cases to profile, as (label, function): training updates and decoding steps at the paper's sizes (tiny
    ones with ``--dry-run``), the compiled ones only where ``--cases`` names them, the fused ones where triton is."""
    tiny = args.dry_run
    prefix = "tiny-" if tiny else ""
    small_tokens, big_tokens, vocab_small, vocab_big, warmup, repeats, steps = SIZES[tiny]
    cases: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        (
            "train_small-can",
            lambda: train_case(
                "train_small-can",
                f"{'tiny' if tiny else 'small'}-can",
                vocab_small,
                small_tokens,
                32,
                device,
                out,
                warmup,
                repeats,
            ),
        ),
        (
            "train_baseline",
            lambda: train_case(
                "train_baseline", f"{prefix}baseline", vocab_big, big_tokens, 64, device, out, warmup, repeats
            ),
        ),
        (
            "train_can",
            lambda: train_case("train_can", f"{prefix}can", vocab_big, big_tokens, 64, device, out, warmup, repeats),
        ),
        (
            "decode_balanced",
            lambda: decode_case("decode_balanced", f"{prefix}balanced", vocab_big, steps, device, out, repeats),
        ),
        ("decode_can", lambda: decode_case("decode_can", f"{prefix}can", vocab_big, steps, device, out, repeats)),
    ]
    cases += [
        (
            f"decode_{system}_compiled",
            lambda system=system: decode_case(
                f"decode_{system}_compiled",
                f"{prefix}{system}",
                vocab_big,
                steps,
                device,
                out,
                repeats,
                compiled=args.compile_backend,
            ),
        )
        for system in ("balanced", "can")
    ]
    if fused.available():  # the select step as two Triton kernels: PyTorch's CUDA wheels bring triton, a CPU may not
        cases += [
            (
                "decode_balanced_fused",
                lambda: decode_case(
                    "decode_balanced_fused", f"{prefix}balanced", vocab_big, steps, device, out, repeats, fused=True
                ),
            ),
            (
                "decode_can_fused",
                lambda: decode_case(
                    "decode_can_fused", f"{prefix}can", vocab_big, steps, device, out, repeats, fused=True
                ),
            ),
        ]
    else:
        summary["fused"] = "not profiled: the triton package is not installed"
    return select_cases(cases, args.cases)


def select_cases(
    cases: list[tuple[str, Callable[[], dict[str, Any]]]], wanted_names: str | None
) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """The cases ``--cases`` names (an unknown name refused), else all but the compiled ones."""
    if wanted_names:
        wanted = wanted_names.split(",")
        unknown = sorted(set(wanted) - {label for label, _ in cases})
        if unknown:
            raise SystemExit(
                f"--cases: unknown case(s) {', '.join(unknown)}; choose from {', '.join(name for name, _ in cases)}"
            )
        cases = [(label, run) for label, run in cases if label in wanted]
    else:  # compiling takes tens of seconds a case: only where asked for (gpu_check.sh --compiled)
        cases = [(label, run) for label, run in cases if not label.endswith("_compiled")]
    return cases


def run_cases(cases: list[tuple[str, Callable[[], dict[str, Any]]]], out: Path, summary: dict[str, Any]) -> None:
    """Each case run and its table written to ``out``, one line printed per case; a failing case keeps the others."""
    for label, run in cases:
        start = time.perf_counter()
        try:
            summary["cases"][label] = run()
        except Exception as exc:  # one failing case must not lose the others' tables
            summary["cases"][label] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        (out / f"{label}.json").write_text(json.dumps(summary["cases"][label], indent=1) + "\n")
        c = summary["cases"][label]
        print(
            f"{label}: {time.perf_counter() - start:.1f} s; "
            + json.dumps(
                {
                    k: c.get(k)
                    for k in ("wall_ms", "gpu_kernel_ms", "cpu_ms", "kernel_launches", "host_syncs", "error")
                    if k in c
                }
            ),
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for the tables and summaries")
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny presets and sizes: a check of the script")
    p.add_argument("--device", default=None, help="default: cuda (cpu with --dry-run)")
    p.add_argument("--compile-backend", default="inductor", help="torch.compile backend of the *_compiled cases")
    p.add_argument(
        "--cases",
        default=None,
        help="comma-separated case names to run (default: all but the compiled ones, and the SDPA backends)",
    )
    args = p.parse_args(argv)

    device = torch.device(args.device or ("cpu" if args.dry_run else "cuda"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU visible: use --dry-run on a CPU")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tiny = args.dry_run
    prefix, size = ("tiny-" if tiny else ""), SIZES[tiny]
    summary: dict[str, Any] = {"device": origin(device), "cases": {}}
    tic = time.perf_counter()
    run_cases(profile_cases(args, device, out, summary), out, summary)
    try:
        if args.cases:
            raise RuntimeError("not run (--cases)")
        summary["sdpa_backends"] = sdpa_backends(
            [f"{prefix}baseline", f"{prefix}can"],
            size.vocab_big,
            size.big_tokens,
            64,
            device,
            1 if tiny else 2,
            size.repeats,
        )
    except Exception as exc:
        summary["sdpa_backends"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    (out / "sdpa_backends.json").write_text(json.dumps(summary["sdpa_backends"], indent=1) + "\n")
    print("sdpa backends (ms per update):", json.dumps(summary["sdpa_backends"]), flush=True)
    summary["seconds"] = round(time.perf_counter() - tic, 1)
    prov = gpu_provenance(summary["device"], scale="tiny" if tiny else "full", command=" ".join(["python", *sys.argv]))
    save_result(out / "profile.json", profile_result(summary), prov)
    failed = [k for k, c in summary["cases"].items() if "error" in c]
    print(
        f"profile: {len(summary['cases']) - len(failed)} of {len(summary['cases'])} cases in {summary['seconds']} s"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
