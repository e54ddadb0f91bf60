"""The training objective: label-smoothed cross-entropy (fairseq's definition) over the tied output layer.

fairseq's label_smoothed_cross_entropy, as of the paper::

    loss = (1 - eps) * nll + eps / V * sum_v -log p(v)

i.e. cross-entropy against (1 - eps) * onehot + eps / V * uniform, summed over the
non-padding targets. Three ways to compute it give the same numbers:

- ``label_smoothed_nll_loss`` on the model's (tokens x V) float32 log-probabilities;
- ``chunked_label_smoothed_loss`` on the decoder's hidden states: output projection,
  log-softmax, loss and their gradients one chunk of target tokens at a time, in place, so
  no more than one (chunk x V) float32 tensor exists at any moment (at 32k tokens x 32k vocabulary the
  first way holds 4 GiB of log-probabilities for the backward pass, the second 0.5 GiB
  transiently at the default chunk of 4096 tokens);
- ``online_label_smoothed_loss``, the same with the vocabulary cut into blocks as well: a first
  pass over the blocks keeps a running maximum and sum of exponentials (an online logsumexp),
  the sum of the logits and the target's logit, a second pass turns each block's logits into its
  gradient. No more than one (chunk x block) float32 tensor exists, small enough to stay in a GPU's
  L2 cache, at the price of a fourth (tokens x d x V) matrix product (the logits are computed twice).

With label smoothing eps over V classes, per target token t with logits z and z_t the target's::

    nll = logsumexp(z) - z_t
    loss = (1 - eps) * nll + eps / V * sum_v (logsumexp(z) - z_v)
         = logsumexp(z) - (1 - eps) * z_t - eps / V * sum_v z_v
    d loss / d z_v = softmax(z)_v - (1 - eps) * [v = t] - eps / V
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from canlib.training.distributed import all_sum


def label_smoothed_nll_loss(
    log_probs: Tensor, target: Tensor, epsilon: float, ignore_index: int
) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed NLL over non-padding targets.

    ``F.cross_entropy(label_smoothing=eps)`` computes the same loss on
    log-probs (tests pin this).
    """
    lp = log_probs.reshape(-1, log_probs.size(-1))
    tgt = target.reshape(-1)
    keep = tgt.ne(ignore_index)
    nll = -lp.gather(-1, tgt.clamp(min=0)[:, None]).squeeze(-1)
    smooth = -lp.sum(-1)
    loss = (1.0 - epsilon) * nll + (epsilon / lp.size(-1)) * smooth
    return loss.masked_fill(~keep, 0.0).sum(), nll.masked_fill(~keep, 0.0).sum()


def _softmax_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for half-precision logits (as the model's log-softmax), else their own dtype."""
    return torch.promote_types(dtype, torch.float32)


def _chunk_loss(
    hidden: Tensor, weight: Tensor, target: Tensor, grad_weight: Tensor | None, epsilon: float, ignore_index: int
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Loss sum, NLL sum and (given ``grad_weight``, to which it adds d loss / d weight) d loss / d hidden for one
    chunk, in the chunk's one float32 (rows x V) buffer: logits -> log-probs -> probabilities -> gradient, each in
    place."""
    lp = F.linear(hidden, weight)
    lp = lp.to(_softmax_dtype(lp.dtype))
    # log-softmax in place; the exponentials are summed a quarter of the columns at a time, so
    # their temporaries stay below the size of the buffer (torch.logsumexp would add a second one)
    lp.sub_(lp.amax(dim=-1, keepdim=True))
    total = sum(block.exp().sum(-1) for block in lp.tensor_split(4, dim=-1))
    lp.sub_(total.log_()[:, None])
    loss_sum, nll_sum = label_smoothed_nll_loss(lp, target, epsilon, ignore_index)
    if grad_weight is None:
        return loss_sum, nll_sum, None
    # d loss / d logits = softmax - (1 - eps) * onehot - eps / V, zero on padding rows
    keep, safe = target.ne(ignore_index), target.clamp(min=0)[:, None]
    grad = lp.exp_().sub_(epsilon / lp.size(-1))
    grad.scatter_add_(-1, safe, torch.full_like(safe, -(1.0 - epsilon), dtype=grad.dtype))
    grad.mul_(keep[:, None])
    g = grad.to(hidden.dtype)
    if g.dtype == grad_weight.dtype:
        grad_weight.addmm_(g.t(), hidden)
    else:  # half-precision product, float32 sum over chunks
        grad_weight += g.t() @ hidden
    return loss_sum, nll_sum, g @ weight


def _summed(
    h: Tensor,
    w: Tensor,
    tgt: Tensor,
    chunk: int,
    chunk_loss: Any,
    grad_hidden: Tensor | None = None,
    grad_weight: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Loss and NLL sums over chunks of rows, ``chunk_loss(rows, w, targets, grad_weight) -> (loss, nll, d loss /
    d rows)``; given the two gradient buffers, it fills them as well."""
    acc = _softmax_dtype(h.dtype)
    loss_sum, nll_sum = h.new_zeros((), dtype=acc), h.new_zeros((), dtype=acc)
    for start in range(0, h.size(0), chunk):
        rows = slice(start, start + chunk)
        loss, nll, grad = chunk_loss(h[rows], w, tgt[rows], grad_weight)
        loss_sum, nll_sum = loss_sum + loss, nll_sum + nll
        if grad_hidden is not None:
            grad_hidden[rows] = grad
    return loss_sum, nll_sum


class _ChunkedLoss(torch.autograd.Function):
    """Forward computes the loss and, chunk by chunk, its gradients for ``hidden`` and ``weight`` (the output layer
    is then multiplied once forward and twice backward, as unfused); backward only scales them by the incoming
    gradient. The NLL output is for logging: not differentiable."""

    @staticmethod
    def forward(
        ctx: Any, hidden: Tensor, weight: Tensor, target: Tensor, chunk: int, chunk_loss: Any
    ) -> tuple[Tensor, Tensor]:
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros_like(weight, dtype=_softmax_dtype(hidden.dtype))
        loss_sum, nll_sum = _summed(hidden, weight, target, chunk, chunk_loss, grad_hidden, grad_weight)
        ctx.save_for_backward(grad_hidden, grad_weight.to(weight.dtype))
        ctx.mark_non_differentiable(nll_sum)
        return loss_sum, nll_sum

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, _: Tensor) -> tuple[Tensor | None, ...]:
        grad_hidden, grad_weight = ctx.saved_tensors
        return (
            grad_hidden * grad_loss.to(grad_hidden.dtype),
            grad_weight * grad_loss.to(grad_weight.dtype),
            None,
            None,
            None,
        )


def _loss(hidden: Tensor, weight: Tensor, target: Tensor, chunk: int, chunk_loss: Any) -> tuple[Tensor, Tensor]:
    """The summed loss and NLL of ``chunk_loss`` (:func:`_summed`) over the (tokens, d) rows of ``hidden``: under
    autocast the matrix products in its dtype and the softmax in float32; differentiable where gradients are on."""
    h = hidden.reshape(-1, hidden.size(-1))
    tgt = target.reshape(-1)
    if h.size(0) != tgt.size(0):
        raise ValueError(f"{h.size(0)} hidden rows but {tgt.size(0)} targets")
    w = weight
    if torch.is_autocast_enabled(h.device.type):
        dtype = torch.get_autocast_dtype(h.device.type)
        h, w = h.to(dtype), w.to(dtype)
    with torch.autocast(h.device.type, enabled=False):
        if torch.is_grad_enabled() and (h.requires_grad or w.requires_grad):
            return _ChunkedLoss.apply(h, w, tgt, chunk, chunk_loss)
        return _summed(h, w, tgt, chunk, chunk_loss)


def chunked_label_smoothed_loss(
    hidden: Tensor, weight: Tensor, target: Tensor, epsilon: float, ignore_index: int, chunk: int = 4096
) -> tuple[Tensor, Tensor]:
    """``label_smoothed_nll_loss(log_softmax(hidden @ weight.T), ...)`` without the (tokens x V) tensor.

    ``hidden`` (..., d) are the final-normed decoder states, ``weight`` (V, d) the tied output
    embedding, ``target`` (...) the next tokens. Returns the summed loss (differentiable in
    ``hidden`` and ``weight``) and the summed NLL (not differentiable). Under autocast the
    matrix products run in the autocast dtype and the softmax in float32, as in the model.
    """
    if chunk < 1:
        raise ValueError(f"chunk={chunk}: must be >= 1 target tokens")
    return _loss(hidden, weight, target, chunk, lambda h, w, t, gw: _chunk_loss(h, w, t, gw, epsilon, ignore_index))


def _block_stats(
    h: Tensor, w: Tensor, first: int, safe: Tensor, m: Tensor, s: Tensor, zsum: Tensor, zt: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One vocabulary block (columns ``first`` ...) folded into the running maximum ``m``, the sum of
    exponentials ``s`` (relative to ``m``), the sum of logits and the target's logit, per row."""
    z = F.linear(h, w).to(m.dtype)
    top = torch.maximum(m, z.amax(dim=-1))
    s = s * torch.exp(m - top) + torch.exp(z - top[:, None]).sum(-1)
    local = safe - first
    inside = (local >= 0) & (local < z.size(1))
    zt = zt + torch.where(inside, z.gather(-1, local.clamp(0, z.size(1) - 1)[:, None]).squeeze(-1), 0.0)
    return top, s, zsum + z.sum(-1), zt


def _block_grad(
    h: Tensor, w: Tensor, first: int, safe: Tensor, keep: Tensor, lse: Tensor, epsilon: float, vocab: int
) -> Tensor:
    """d loss / d logits of one vocabulary block, zero on padding rows, in the products' dtype."""
    z = F.linear(h, w).to(lse.dtype)
    grad = torch.exp(z - lse[:, None]) - epsilon / vocab
    is_target = torch.arange(first, first + z.size(1), device=z.device) == safe[:, None]
    grad = torch.where(is_target, grad - (1.0 - epsilon), grad)
    return torch.where(keep[:, None], grad, 0.0).to(h.dtype)


def _online_chunk_loss(
    h: Tensor,
    weight: Tensor,
    tgt: Tensor,
    grad_weight: Tensor | None,
    epsilon: float,
    ignore_index: int,
    block: int,
    stats: Any,
    grads: Any,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """As :func:`_chunk_loss`, over the vocabulary in blocks: an online logsumexp over them, then each block's
    gradient from its recomputed logits."""
    acc = _softmax_dtype(h.dtype)
    vocab = weight.size(0)
    keep, safe = tgt.ne(ignore_index), tgt.clamp(min=0)
    m = h.new_full((h.size(0),), float("-inf"), dtype=acc)
    s, zsum, zt = (h.new_zeros(h.size(0), dtype=acc) for _ in range(3))
    for first in range(0, vocab, block):
        m, s, zsum, zt = stats(h, weight[first : first + block], first, safe, m, s, zsum, zt)
    lse = m + s.log()
    loss = lse - (1.0 - epsilon) * zt - (epsilon / vocab) * zsum
    loss_sum, nll_sum = loss.masked_fill(~keep, 0.0).sum(), (lse - zt).masked_fill(~keep, 0.0).sum()
    if grad_weight is None:
        return loss_sum, nll_sum, None
    grad_h = torch.zeros(h.shape, dtype=acc, device=h.device)
    for first in range(0, vocab, block):
        w = weight[first : first + block]
        g = grads(h, w, first, safe, keep, lse, epsilon, vocab)
        grad_h += g @ w
        grad_weight[first : first + block] += g.t() @ h
    return loss_sum, nll_sum, grad_h


_COMPILED: dict[str, Any] = {}


def _block_functions(compiled: bool) -> tuple[Any, Any]:
    """The two per-block functions, eager or through torch.compile (made once per process)."""
    if not compiled:
        return _block_stats, _block_grad
    if not _COMPILED:
        _COMPILED.update(
            stats=torch.compile(_block_stats, dynamic=True), grads=torch.compile(_block_grad, dynamic=True)
        )
    return _COMPILED["stats"], _COMPILED["grads"]


def online_label_smoothed_loss(
    hidden: Tensor,
    weight: Tensor,
    target: Tensor,
    epsilon: float,
    ignore_index: int,
    chunk: int = 4096,
    block: int = 2048,
    compiled: bool = False,
) -> tuple[Tensor, Tensor]:
    """``label_smoothed_nll_loss(log_softmax(hidden @ weight.T), ...)`` over (chunk x block) tiles of the
    logits: an online logsumexp over the vocabulary blocks, never a (tokens x V) tensor (module docstring).

    Arguments and results as :func:`chunked_label_smoothed_loss`; ``block`` = vocabulary columns per tile;
    ``compiled`` runs the per-block arithmetic through torch.compile (a fused kernel or two per block
    on a GPU instead of about ten).
    """
    if chunk < 1 or block < 1:
        raise ValueError(f"chunk={chunk}, block={block}: both must be >= 1 (target tokens, vocabulary columns)")
    stats, grads = _block_functions(compiled)

    def chunk_loss(h: Tensor, w: Tensor, t: Tensor, gw: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        return _online_chunk_loss(h, w, t, gw, epsilon, ignore_index, block, stats, grads)

    return _loss(hidden, weight, target, chunk, chunk_loss)


class LabelSmoothedObjective(nn.Module):
    """Model + loss as one module, so DDP's hooks see the whole training forward.

    ``forward(src, tgt_in, tgt_out) -> (loss sum, nll sum)``; ``chunk`` = 0 uses the model's
    full log-probabilities and ``label_smoothed_nll_loss``, else, on the final-normed decoder states,
    ``chunked_label_smoothed_loss`` (``vocab_block`` = 0) or ``online_label_smoothed_loss`` with
    vocabulary blocks of ``vocab_block`` columns. ``compile`` runs the model part through
    torch.compile, and the online loss's per-block arithmetic; the token-chunked loss stays eager (its
    big products are single matrix multiplies already, and its loop over chunks would make the
    compiled graph depend on the number of tokens).
    """

    def __init__(
        self,
        model: nn.Module,
        epsilon: float,
        ignore_index: int,
        chunk: int,
        compile: bool = False,
        vocab_block: int = 0,
    ) -> None:
        super().__init__()
        if vocab_block and not chunk:
            raise ValueError(f"vocab_block={vocab_block} needs a chunked loss (chunk > 0, not the full log-softmax)")
        self.model, self.epsilon, self.ignore_index, self.chunk = model, epsilon, ignore_index, chunk
        self.vocab_block, self.compile = vocab_block, compile
        run = self.features if chunk else model.forward
        self._run = torch.compile(run) if compile else run

    def features(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Final-normed decoder states (B, T, d): what the tied output layer reads."""
        model = self.model
        return model.decoder_norm(model.decode(tgt_in, model.encode(src)))

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> tuple[Tensor, Tensor]:
        out = self._run(src, tgt_in)
        if not self.chunk:
            return label_smoothed_nll_loss(out, tgt_out, self.epsilon, self.ignore_index)
        return self.features_loss(out, self.model.embed.weight, tgt_out)

    def features_loss(self, out: Tensor, weight: Tensor, tgt_out: Tensor) -> tuple[Tensor, Tensor]:
        """(loss sum, NLL sum) of final-normed decoder states ``out`` through the tied output ``weight`` (V, d),
        chunked or online as configured (``chunk`` > 0)."""
        if self.vocab_block:
            return online_label_smoothed_loss(
                out, weight, tgt_out, self.epsilon, self.ignore_index, self.chunk, self.vocab_block, self.compile
            )
        return chunked_label_smoothed_loss(out, weight, tgt_out, self.epsilon, self.ignore_index, self.chunk)


@torch.no_grad()
def split_loss(
    objective: LabelSmoothedObjective,
    batches: Iterable[dict[str, Any]],
    device: torch.device,
    world_size: int = 1,
    context: Callable[[], AbstractContextManager] = nullcontext,
) -> dict[str, float]:
    """Label-smoothed loss and NLL per target token over ``batches`` (collated, on ``device``), each forward pass
    inside ``context()``: what :meth:`Trainer.validate` logs, for any model wrapped in an objective. The sums are
    float64, so the order of the batches changes the result only in its last bits; with several ranks each passes
    its own share of the batches and the sums are added over all of them."""
    sums = torch.zeros(3, dtype=torch.float64, device=device)
    for batch in batches:
        with context():
            loss, nll = objective(batch["src"], batch["tgt_in"], batch["tgt_out"])
        sums += torch.stack([loss.double(), nll.double(), loss.new_tensor(batch["ntokens"], dtype=torch.float64)])
    loss_sum, nll_sum, tokens = all_sum(sums, world_size).tolist()
    return {"valid_loss": loss_sum / tokens, "valid_nll": nll_sum / tokens}
