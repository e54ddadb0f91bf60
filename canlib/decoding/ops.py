"""Operators dispatched by a piece of PyTorch code, counted on any device (a CPU will do).

At batch 1 on a GPU each kernel launch costs microseconds whatever its size, so the number of operators a
decoding step or a training update dispatches is the paper's speed argument made countable without a GPU.
:class:`OpCounter` records every ATen operator that reaches the dispatcher below autograd; views and
metadata-only operators launch no kernel, so they are counted apart, and a host synchronisation (a device
value read by Python: ``.item()``, ``.tolist()``, ``bool(tensor)``) is counted as its ``_local_scalar_dense``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from canlib.catalogue import ALL_SYSTEMS, scale_spec, scaled_preset

# operators that only describe memory (no kernel on a GPU)
NO_KERNEL = {
    "aten.view",
    "aten._unsafe_view",
    "aten.reshape",
    "aten.expand",
    "aten.permute",
    "aten.transpose",
    "aten.t",
    "aten.unsqueeze",
    "aten.squeeze",
    "aten.slice",
    "aten.select",
    "aten.as_strided",
    "aten.alias",
    "aten.detach",
    "aten.split",
    "aten.split_with_sizes",
    "aten.unbind",
    "aten.chunk",
    "aten.narrow",
    "aten.diagonal",
    "aten.unflatten",
    "aten.flatten",
    "aten.lift_fresh",
    "aten._reshape_alias",
    "aten.sym_size",
    "aten.sym_stride",
    "aten.sym_numel",
    "aten.is_same_size",
    "aten.empty",
    "aten.empty_like",
    "aten.empty_strided",
    "aten.new_empty",
    "aten.new_empty_strided",
    "aten.set_",
    "aten._local_scalar_dense",
}
HOST_SYNC = "aten._local_scalar_dense"
# operators whose output size depends on the data: on a GPU each waits for the device (a host sync)
_DATA_DEPENDENT = {"aten.nonzero", "aten.masked_select", "aten._unique2", "aten.unique_dim", "aten.unique_consecutive"}


# calls that a GPU runs as one kernel but PyTorch's meta device (and, for some shapes, a CPU) breaks into
# many: attention (CUDA's flash or memory-efficient kernel; on meta the "math" composite of ~8 operators),
# and a log-softmax from float16 logits to float32 (one CUDA kernel reads half and writes float; on meta a
# cast, then the softmax). With ``gpu=True`` each counts as the one operator named here.
GPU_FUSED = {
    F.scaled_dot_product_attention: "aten._scaled_dot_product_efficient_attention",
    F.log_softmax: "aten._log_softmax",
}


class _OneKernelOnGPU(TorchFunctionMode):
    def __init__(self, counter: OpCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = GPU_FUSED.get(func)
        if name is None:
            return func(*args, **(kwargs or {}))
        self.counter.by_name[name] += 1
        with self.counter.paused():
            out = func(*args, **(kwargs or {}))
            if func is F.scaled_dot_product_attention:  # laid out as CUDA's kernels write it: (N, L, heads, E)
                out = out.transpose(1, 2).contiguous().transpose(1, 2)
            return out


class OpCounter(TorchDispatchMode):
    """``with OpCounter() as ops: step()`` then ``ops.total``, ``ops.kernels`` (operators that launch a
    kernel: views, allocations and host reads excluded), ``ops.host_syncs`` and ``ops.by_name``.

    ``gpu=True`` counts as a GPU runs them the calls of :data:`GPU_FUSED` (one kernel each), whatever
    device the code runs on."""

    def __init__(self, gpu: bool = False) -> None:
        super().__init__()
        self.by_name: Counter[str] = Counter()
        self._functions = _OneKernelOnGPU(self) if gpu else nullcontext()
        self._paused = False

    def __enter__(self) -> OpCounter:
        super().__enter__()
        self._functions.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._functions.__exit__(*exc)
        super().__exit__(*exc)

    @contextmanager
    def paused(self) -> Iterator[None]:
        self._paused = True
        try:
            yield
        finally:
            self._paused = False

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if not self._paused:
            self.by_name[str(func.overloadpacket).replace("aten::", "aten.")] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.by_name.values())

    @property
    def kernels(self) -> int:
        return sum(n for name, n in self.by_name.items() if name not in NO_KERNEL)

    @property
    def host_syncs(self) -> int:
        """Host reads (``_local_scalar_dense``) and data-dependent shapes (``nonzero``, boolean indexing)."""
        return self.by_name[HOST_SYNC] + sum(self.by_name[name] for name in _DATA_DEPENDENT)

    def counts(self) -> dict[str, int]:
        return {"operators": self.total, "kernel_operators": self.kernels, "host_syncs": self.host_syncs}

    def summary(self) -> dict[str, Any]:
        """The counts as plain data (for a stored result)."""
        return {**self.counts(), "by_name": dict(self.by_name.most_common())}


# -- the operator-count study: one beam-search step per decoder kind --------------------------------------
#
# On a GPU an eager step costs host time per dispatched operator (Python, dispatcher, launch), so its
# operators are what the paper's launch-bound speed argument is about. A CPU takes another code path than
# a GPU (``rows_linear``'s few-row products), so the CUDA path is counted on PyTorch's ``meta`` device, in
# float16: no data, no arithmetic, and every branch that tests ``device.type != "cpu"`` goes the GPU's way.

PATHS = {"cuda": ("meta", torch.float16), "cpu": ("cpu", torch.float32)}
# a path's search: "cuda-fused" is the GPU's code path with the forced-length select as two Triton kernels
# (canlib.decoding.fused), each one registered operator: what a GPU launches, counted without running them
FUSED_PATHS = {"cuda-fused": "cuda"}


def search_step_ops(
    model: Any,
    beam: int = 4,
    batch: int = 1,
    src_len: int = 27,
    steps: int = 30,
    warmup: int = 5,
    seed: int = 0,
    fused: bool = False,
) -> dict[str, Any]:
    """Operators of beam-search step ``warmup`` (after ``warmup`` steps) of ``model`` on its own device,
    forced length ``steps``: the whole step, its decoder stack (``decode_hidden``), the embedding inside
    it, the output projection, per decoder layer, and the search's own bookkeeping (the rest)."""
    from canlib.decoding.decoder import EagerDecoder
    from canlib.decoding.search import SearchSettings, new_search

    if not 0 <= warmup < steps:
        raise ValueError(f"warmup={warmup}: must be in [0, steps={steps})")
    device = model.embed.weight.device
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, model.cfg.vocab_size, (batch, src_len), generator=g)
    src[:, -1] = model.cfg.eos_id
    parts: dict[str, OpCounter] = {}
    gpu = device.type == "meta"  # the GPU's code path: count its fused calls as the GPU launches them

    class Counted(EagerDecoder):
        def counted(self, part: str, fn: Any, *args: Any) -> Any:
            with OpCounter(gpu) as ops:
                out = fn(*args)
            parts[part] = ops
            return out

        def decode_hidden(self, tokens, cache):
            return self.counted("decoder", self.model.decode_hidden, tokens, cache)

        def output_log_probs(self, hidden):
            return self.counted("output", self.model.output_log_probs, hidden)

        def output_logits(self, hidden):
            return self.counted("output", self.model.output_logits, hidden)

    with torch.no_grad():
        settings = SearchSettings(beam=beam, forced_length=steps, fused=fused)
        search = new_search(model, src.to(device), settings, decoder=Counted(model))
        for t in range(warmup):
            search.step(t)
        with OpCounter(gpu) as embed:  # the embedding inside decode_hidden, counted apart (it is pure)
            model.embed_tokens(search.inputs(warmup)[:, None], offset=warmup)
        parts["embed"] = embed
        with OpCounter(gpu) as whole:
            search.step(warmup)
    n = model.cfg.dec_layers
    step, decoder, embed, output = (c.counts() for c in (whole, parts["decoder"], parts["embed"], parts["output"]))
    layers = {k: decoder[k] - embed[k] for k in decoder}
    return {
        "decoder_layers": n,
        "step": step,
        "decoder": decoder,
        "embedding": embed,
        "output": output,
        "per_layer": {k: v / n for k, v in layers.items()},
        "search": {k: step[k] - decoder[k] - output[k] for k in step},
        "by_name": dict(whole.by_name.most_common()),
    }


def ops_study(
    systems: Any = None,
    scale: str = "full",
    vocab_size: int = scale_spec("full").vocab_size,
    beam: int = 4,
    batch: int = 1,
    warmup: int = 5,
    paths: Any = ("cuda", "cuda-fused", "cpu"),
    seed: int = 0,
) -> dict[str, Any]:
    """:func:`search_step_ops` for each system (default: the nine) and path (``"cuda"``: the GPU's code
    path in float16, counted on the meta device; ``"cpu"``: float32 on this CPU), as a stored result:
    ``{"result": {"systems": {system: {path: counts}}}, "provenance": {commit, date, device, scale, config}}``."""
    import sys

    from canlib.io import origin
    from canlib.model.config import preset
    from canlib.model.seq2seq import Seq2Seq

    systems = tuple(systems or ALL_SYSTEMS)
    unknown = [p for p in paths if p not in PATHS and p not in FUSED_PATHS]
    if unknown:
        raise ValueError(f"paths={unknown}: choose from {', '.join([*PATHS, *FUSED_PATHS])}")
    out: dict[str, Any] = {}
    for system in systems:
        cfg = preset(scaled_preset(system, scale), vocab_size=vocab_size)
        out[system] = {}
        for path in paths:
            device, dtype = PATHS[FUSED_PATHS.get(path, path)]
            torch.manual_seed(seed)
            with torch.device(device):
                model = Seq2Seq(cfg)
            model = model.to(dtype).eval()
            out[system][path] = search_step_ops(
                model, beam=beam, batch=batch, warmup=warmup, seed=seed, fused=path in FUSED_PATHS
            )
    config = {
        "study": "ops",
        "command": " ".join(sys.argv),
        "threads": torch.get_num_threads(),
        "systems": list(systems),
        "vocab_size": vocab_size,
        "beam": beam,
        "batch": batch,
        "warmup_steps": warmup,
        "forced_length": 30,
        "source_length": 27,
        "paths": {
            p: {
                "device": PATHS[FUSED_PATHS.get(p, p)][0],
                "fused_select": p in FUSED_PATHS,
                "dtype": str(PATHS[FUSED_PATHS.get(p, p)][1]).removeprefix("torch."),
            }
            for p in paths
        },
    }
    # the stored-result format of repro.results.files: the result and its provenance
    return {"result": {"systems": out}, "provenance": origin("cpu") | {"scale": scale, "config": config}}
