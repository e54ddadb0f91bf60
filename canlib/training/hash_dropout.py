"""Dropout whose masks come from a counter-based hash of (seed, update, micro-batch, site, element), not from a
generator's state.

Why: seeds stacked into one model (:mod:`canlib.training.stacked`) must each draw the masks they would draw alone.
A generator shared by the stack ties a seed's masks to the others' (and ``vmap``'s ``randomness="same"``
correlates them); a hash of the seed and of where an element sits draws each mask from the run's own numbers, so
a seed's masks do not depend on which seeds share its stack, on how far its batch is padded, nor on anything a
resume must restore. The element's key is its coordinates (row, position, feature; or row, head, query, key), not
its offset in memory, so padding a batch to a bigger shape leaves every real element's mask as it was.

A run records the scheme (``TrainConfig.dropout_rng``): ``"counter-hash"`` is a new draw of the recipe, not a
bit-match of a run trained with torch's generator (``"torch"``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

_M32 = 0xFFFFFFFF
# two odd multipliers below 2**31, so a 32-bit value times one stays inside int64 (no overflow on any device)
_MUL = (0x7FEB352D, 0x2C1B3C6D)
CALLS_PER_SITE = 64  # a module may drop several tensors per forward (the residual dropout of each sub-layer)


def mix32(x: Tensor) -> Tensor:
    """A 32-bit integer hash (xor-shift-multiply, "lowbias32"-style) of int64 tensors holding values < 2**32."""
    x = x ^ (x >> 16)
    x = (x * _MUL[0]) & _M32
    x = x ^ (x >> 15)
    x = (x * _MUL[1]) & _M32
    return x ^ (x >> 16)


def element_hash(key: Tensor, site: int, shape: torch.Size, device: torch.device) -> Tensor:
    """Uniform 32-bit integers (int64) of ``shape``, one per element, from ``key`` (int64 [seed, update, micro])
    and ``site``; element (i0, i1, ...) hashes its coordinates one dimension at a time."""
    h = mix32(torch.full((), site, dtype=torch.int64, device=device))
    for part in key.unbind(-1):
        h = mix32(h ^ (part & _M32))
    for dim, size in enumerate(shape):
        coords = torch.arange(size, dtype=torch.int64, device=device).view((size,) + (1,) * (len(shape) - dim - 1))
        h = mix32(h ^ coords)
    return h.expand(shape)


class HashDropout(nn.Module):
    """``nn.Dropout`` with counter-hashed masks (module docstring). ``site`` numbers the module in its model; the
    key (seed, update, micro-batch) is a buffer the trainer sets before each forward (:func:`set_dropout_key`), so
    ``torch.func.functional_call`` can give each stacked seed its own."""

    def __init__(self, p: float, site: int) -> None:
        super().__init__()
        self.p, self.site, self.calls = p, site, 0
        self.register_buffer("key", torch.zeros(3, dtype=torch.int64), persistent=False)

    def forward(self, x: Tensor, parts: tuple[int, ...] = ()) -> Tensor:
        """Drop elements of ``x``; ``parts`` cuts its last axis into blocks keyed apart (attention over joined
        [target ; source] keys), so a key's mask does not depend on how long the other block is padded."""
        if not self.training or self.p == 0.0:
            return x
        if parts:
            return torch.cat([self(block) for block in x.split(list(parts), dim=-1)], dim=-1)
        call = self.site * CALLS_PER_SITE + self.calls
        self.calls += 1
        keep = element_hash(self.key, call, x.shape, x.device) >= int(self.p * 2**32)
        return x * keep.to(x.dtype) * (1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return f"p={self.p}, site={self.site}"


def use_hash_dropout(model: nn.Module) -> nn.Module:
    """Replace every ``nn.Dropout`` of ``model`` by a :class:`HashDropout` of the same rate (numbered in module
    order, so the same config numbers the same sites); the weights are untouched. Returns ``model``."""
    site, device = 0, next(model.parameters()).device
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Dropout):
                setattr(parent, name, HashDropout(child.p, site).to(device))
                site += 1
    return model


def set_dropout_key(model: nn.Module, seed: int, update: int, micro: int) -> None:
    """Key the masks of the next forward by (seed, update, micro-batch); each site's count of calls restarts."""
    for module in model.modules():
        if isinstance(module, HashDropout):
            module.key.copy_(torch.tensor([seed, update, micro], dtype=torch.int64))
            module.calls = 0


def reset_dropout_calls(model: nn.Module) -> None:
    """Restart each site's count of calls (before a forward whose keys are passed in, as a stacked one)."""
    for module in model.modules():
        if isinstance(module, HashDropout):
            module.calls = 0
