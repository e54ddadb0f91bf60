"""What a bench study is asked to do (:class:`BenchSettings`) and what it returns (:class:`BenchResult`).

Plain data, no torch: the studies and the CLI build a ``BenchSettings``; ``run_study`` turns it
into a ``BenchResult``, stored as JSON ``{"systems": ..., "meta": ...}``.
"""

from __future__ import annotations

from dataclasses import dataclass

from canlib.catalogue import scale_spec


@dataclass(frozen=True)
class SpeedPlan:
    """The speed studies' settings, the one record every speed entry point reads (the bench's defaults, the GPU
    scripts' defaults, the speed standard a GPU run must meet to decide a claim)."""

    sentences: int = 8  # source sentences per timed repeat
    repeats: int = 10  # interleaved repeats per system: medians are taken over these
    forced_length: int = 30  # generated tokens per sentence when timing random-weight models
    min_seconds: float = 1.0  # a GPU run's shortest repeat: the sources translated as many times over as it takes
    beam_sweep: tuple[int, ...] = (1, 4, 16, 64, 256)
    length_sweep: tuple[int, ...] = (10, 20, 30, 40, 50)
    batch_sweep: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)


_PAPER = scale_spec("full")  # the defaults: the paper's shapes, vocabulary and beam


@dataclass(frozen=True)
class BenchSettings:
    """One bench run's settings; the defaults are the paper's regime (beam 4, batch 1, d=512, V=32k), as the full
    scale of :mod:`canlib.catalogue` states it, timed as :class:`SpeedPlan` says."""

    systems: tuple[str, ...] | None = None  # None: the study's default systems
    scale: str = _PAPER.name  # preset scale of random-weight models: "tiny" | "small" | "full"
    vocab_size: int = _PAPER.vocab_size
    beam: int = _PAPER.beam
    batch: int = 1
    forced_length: int = SpeedPlan.forced_length  # 0: free decoding
    sentences: int = SpeedPlan.sentences
    repeats: int = SpeedPlan.repeats
    warmup: int = 1
    len_penalty: float = 1.0
    beams: tuple[int, ...] = SpeedPlan.beam_sweep  # beam study
    lengths: tuple[int, ...] = SpeedPlan.length_sweep  # beam study
    batches: tuple[int, ...] = SpeedPlan.batch_sweep  # batch study
    device: str = "cpu"
    fp32: bool = False  # float32 on CUDA (default there: float16)
    graphs: bool = False  # CUDA: replay decode steps from CUDA graphs
    breakdown: bool = False
    threads: int = 0
    seed: int = 0
    checkpoints: tuple[tuple[str, str], ...] = ()  # (name, path) of trained models to time
    progress: bool = False

    def __post_init__(self) -> None:
        for name in ("systems", "beams", "lengths", "batches", "checkpoints"):  # lists from JSON or callers
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(tuple(v) if isinstance(v, list) else v for v in value))
        for name in ("vocab_size", "beam", "batch", "sentences", "repeats"):
            if getattr(self, name) < 1:
                raise ValueError(f"BenchSettings.{name}={getattr(self, name)}: must be at least 1")
        for name in ("forced_length", "warmup", "threads"):
            if getattr(self, name) < 0:
                raise ValueError(f"BenchSettings.{name}={getattr(self, name)}: must be at least 0")
        for name in ("beams", "lengths", "batches"):
            if not getattr(self, name) or min(getattr(self, name)) < 1:
                raise ValueError(f"BenchSettings.{name}={getattr(self, name)}: must be positive integers")


@dataclass
class BenchResult:
    """Per system, its figures (tok_per_s, ms_per_sentence, tokens, seconds, ratio_to_*, breakdown,
    by_beam / by_length / by_batch); ``meta``: device, dtype, torch, threads, load_average, date,
    git_commit, command, study, settings, ctranslate2 (if installed), busy_warning (if busy)."""

    systems: dict[str, dict]
    meta: dict


__all__ = ["BenchSettings", "BenchResult"]
