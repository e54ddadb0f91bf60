"""Stacked seeds: the K seeds of one system (same shapes) trained as one model in one process.

Why: one small update is a few milliseconds of kernels in about a thousand launches, so a GPU running one model,
or several processes side by side, waits on launches; K models whose every kernel serves all K at once spend the
same launches on K updates (horizontal fusion: Wang et al., "Horizontally Fused Training Array", MLSys 2021).

How, each piece the separate run's:

- each seed is a :class:`~canlib.training.trainer.Trainer` of its own (its initialisation, batch sampler, run
  folder, log, checkpoints, validation, ``average.pt`` and ``result.json``, exactly as a separate run builds and
  writes them); the stack only replaces the update;
- the parameters are stacked [K, ...] and each seed's model holds views of its slice; one forward runs the K
  models through ``torch.func.vmap`` over ``functional_call`` on each seed's own batch (padded to the stack's
  common shape: extra rows repeat a real one with no targets, extra columns are padding, so neither adds to a
  loss nor to a gradient);
- the loss of each seed is normalised by its own target tokens, as the separate run's; gradient clipping, if the
  recipe uses it, is per seed; Adam is element-wise, so one fused Adam over the stacked tensors is K Adams, and
  the learning-rate schedule is the same for all (the seeds share every option but ``seed``);
- dropout masks come from a counter-based hash of (seed, update, micro-batch, site, element)
  (:mod:`canlib.training.hash_dropout`), so a seed's masks do not depend on the other seeds or on the padding:
  the stack at K = 1, or a :class:`Trainer` with ``dropout_rng="counter-hash"``, is the separate run of this
  scheme, and either resumes a stacked seed's folder alone (``canlib train --out RUN --resume``).

Measured on one H200 (``measurements/h200-2026-11-28-5af6bb5`` in the repository): five seeds of the small
baseline trained 16 model-updates/s stacked, fewer than one run alone (21.8), so nothing stacks by default. One
cause is the common shape: each seed's batch padded to the step's largest rows and lengths computes 2.64x the token
slots of five separate updates (``scripts/bench_stacked.py --padding``); a profile would say the rest. What holds is
the equality with separate runs, which the tests pin.

The seeds stop together: a stack trains to ``max_steps`` (stopping on the validation curve, or after whole
epochs, would stop seeds at different updates; the small scale's converged recipe is a fixed budget).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import fields, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, vmap

from canlib.data.batching import Split
from canlib.model.config import ModelConfig
from canlib.training.config import ADAM_OPTIONS, TrainConfig
from canlib.training.hash_dropout import HashDropout, reset_dropout_calls
from canlib.training.objective import LabelSmoothedObjective
from canlib.training.schedule import inverse_sqrt_scheduler
from canlib.training.trainer import Trainer

DROPOUT_RNG = "counter-hash"


def _cloned(value: Any) -> Any:
    """``value`` with every tensor copied out of the stack's storage (a view would save the whole stack)."""
    if isinstance(value, Tensor):
        return value.clone()
    if isinstance(value, dict):
        return {k: _cloned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cloned(v) for v in value]
    return value


class SeedRun(Trainer):
    """One seed of a stack: a :class:`Trainer` whose parameters and Adam moments are views of the stack's, so its
    checkpoints, validations and ``average.pt`` are the separate run's; its checkpoints hold copies."""

    def _state(self) -> dict[str, Any]:
        return _cloned(super()._state())


class _Features(nn.Module):
    """The training forward up to the tied output layer (the loss is computed per seed, outside ``vmap``)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    forward = LabelSmoothedObjective.features


def check_stackable(cfgs: list[TrainConfig]) -> None:
    """Seeds stack when they differ in ``seed`` only, train on one device to a fixed budget, and are not fp16."""
    if not cfgs:
        raise ValueError("a stack needs at least one seed")
    first = cfgs[0]
    for cfg in cfgs[1:]:
        other = [
            f.name for f in fields(TrainConfig) if f.name != "seed" and getattr(cfg, f.name) != getattr(first, f.name)
        ]
        if other:
            name = other[0]
            raise ValueError(
                f"seeds {first.seed} and {cfg.seed} differ in {name} ({getattr(first, name)!r} against "
                f"{getattr(cfg, name)!r}): stacked seeds share every option but the seed"
            )
    seeds = [c.seed for c in cfgs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds {seeds}: each seed may appear once in a stack")
    if not first.max_steps or first.max_epochs or first.patience:
        raise ValueError(
            f"max_steps={first.max_steps}, max_epochs={first.max_epochs}, patience={first.patience}: stacked seeds "
            "stop together, so they train to max_steps alone (max_epochs = patience = 0)"
        )
    if first.precision == "fp16":
        raise ValueError("precision=fp16: its loss scale is one per stack; stack in bf16 or fp32")
    if not first.loss_chunk:
        raise ValueError("loss_chunk=0: a stack computes each seed's loss from its decoder states (loss_chunk > 0)")


def padded_stack(batches: list[dict[str, Any]], pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """(src, tgt_in, tgt_out), each (K, rows, length): every seed's batch padded to the largest. Extra columns are
    padding; an extra row repeats the seed's first (a row of padding alone would attend to nothing) and has no
    target, so it adds nothing to the loss nor to a gradient."""
    rows = max(b["src"].size(0) for b in batches)
    src_len = max(b["src"].size(1) for b in batches)
    tgt_len = max(b["tgt_in"].size(1) for b in batches)
    out: dict[str, list[Tensor]] = {"src": [], "tgt_in": [], "tgt_out": []}
    for b in batches:
        extra = rows - b["src"].size(0)
        for key, length in (("src", src_len), ("tgt_in", tgt_len), ("tgt_out", tgt_len)):
            t = F.pad(b[key], (0, length - b[key].size(1)), value=pad_id)
            if extra:
                more = torch.full_like(t[:1], pad_id) if key == "tgt_out" else t[:1]
                t = torch.cat([t, more.expand(extra, -1)])
            out[key].append(t)
    return torch.stack(out["src"]), torch.stack(out["tgt_in"]), torch.stack(out["tgt_out"])


def no_targets(batch: dict[str, Any], pad_id: int) -> dict[str, Any]:
    """``batch`` with every target padding: a seed whose update has fewer micro-batches than the stack's fills
    the gap with it (no loss, no gradient)."""
    return {**batch, "tgt_out": torch.full_like(batch["tgt_out"], pad_id), "ntokens": 0}


class StackedTrainer:
    """Trains the seeds ``cfgs`` (TrainConfigs that differ in ``seed`` only) of one model config as one stacked
    model, each into its run folder of ``run_dirs`` (module docstring). ``fit()`` returns each seed's result."""

    def __init__(
        self,
        model_cfg: ModelConfig,
        cfgs: list[TrainConfig],
        train_split: Split,
        valid_split: Split | None,
        run_dirs: list[str | os.PathLike],
        vocab: Any = None,
        data_path: str | None = None,
        resume: bool = False,
        overwrite: bool = False,
        console: bool = False,
        run_info: dict[str, Any] | None = None,
    ) -> None:
        cfgs = [replace(c, dropout_rng=DROPOUT_RNG) for c in cfgs]
        check_stackable(cfgs)
        if len(run_dirs) != len(cfgs):
            raise ValueError(f"{len(cfgs)} seeds but {len(run_dirs)} run folders")
        self.cfg = cfgs[0]
        info = {**(run_info or {}), "stacked_seeds": [c.seed for c in cfgs]}
        options = dict(vocab=vocab, data_path=data_path, resume=resume, overwrite=overwrite, console=console)
        self.members = [
            SeedRun(model_cfg, cfg, train_split, valid_split, run_dir, run_info=info, **options)
            for cfg, run_dir in zip(cfgs, run_dirs)
        ]
        steps = {str(m.run_dir): m.step for m in self.members}
        if len(set(steps.values())) > 1:
            raise ValueError(f"the seeds' folders hold different steps {steps}: resume each alone, or start over")
        self.device = self.members[0].device
        self._stack()

    # -- the stack -------------------------------------------------------------------------------------------
    def _stack(self) -> None:
        """Stack the seeds' parameters and Adam states, and point each seed's model and optimizer at its slice."""
        members, cfg = self.members, self.cfg
        named = [dict(m.model.named_parameters()) for m in members]
        self.names = list(named[0])
        self.params = {n: torch.stack([p[n].detach() for p in named]).requires_grad_() for n in self.names}
        adam = dict(betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay, **ADAM_OPTIONS[cfg.optimizer])
        self.optimizer = torch.optim.Adam(list(self.params.values()), lr=cfg.lr, **adam)
        self.scheduler = inverse_sqrt_scheduler(self.optimizer, cfg.warmup)
        saved = [m.optimizer.state_dict() for m in members]
        state: dict[int, dict[str, Tensor]] = {}
        for i, n in enumerate(self.names):
            moments = [s["state"].get(i) for s in saved]
            if moments[0] is None:
                zeros = torch.zeros_like(self.params[n])
                state[i] = {"step": torch.zeros(()), "exp_avg": zeros, "exp_avg_sq": zeros.clone()}
            else:
                state[i] = {
                    "step": moments[0]["step"],
                    "exp_avg": torch.stack([m["exp_avg"] for m in moments]),
                    "exp_avg_sq": torch.stack([m["exp_avg_sq"] for m in moments]),
                }
        group = {k: v for k, v in saved[0]["param_groups"][0].items() if k != "params"}
        self.optimizer.load_state_dict({"state": state, "param_groups": [{**group, "params": list(state)}]})
        self.scheduler.load_state_dict(members[0].scheduler.state_dict())
        for k, (m, mine) in enumerate(zip(members, named)):
            for n, stacked in self.params.items():
                mine[n].data = stacked.data[k]  # the seed's model reads and keeps its slice
                moments = self.optimizer.state[stacked]
                m.optimizer.state[mine[n]] = {
                    "step": moments["step"],
                    "exp_avg": moments["exp_avg"][k],
                    "exp_avg_sq": moments["exp_avg_sq"][k],
                }
        template = members[0].model
        self.features = _Features(template)
        self.key_names = [f"model.{n}.key" for n, mod in template.named_modules() if isinstance(mod, HashDropout)]
        self.buffers = {f"model.{n}": b for n, b in template.named_buffers() if f"model.{n}" not in self.key_names}
        self._sync_members()

    def _sync_members(self) -> None:
        """Each seed's schedule and learning rate follow the stack's (what its log rows and checkpoints hold)."""
        sched, lr = self.scheduler.state_dict(), self.optimizer.param_groups[0]["lr"]
        for m in self.members:
            m.scheduler.load_state_dict(sched)
            for group in m.optimizer.param_groups:
                group["lr"] = lr

    def _forward(self, params: dict[str, Tensor], key: Tensor, src: Tensor, tgt_in: Tensor) -> Tensor:
        """One seed's final-normed decoder states (run under ``vmap``: ``params`` and ``key`` are its slices)."""
        state = {**{f"model.{n}": p for n, p in params.items()}, **self.buffers}
        state.update(dict.fromkeys(self.key_names, key))
        return functional_call(self.features, state, (src, tgt_in))

    def gradients(self, groups: list[list[list[int]]]) -> tuple[Tensor, list[int]]:
        """Forward and backward of every seed, seed k on its micro-batches ``groups[k]``: the stacked parameters'
        ``grad`` [K, ...] hold each seed's gradient of its mean loss per target token. Returns (K, 2) float64 sums
        of the label-smoothed loss and the NLL (on the device: nothing here waits for it) and each seed's tokens."""
        members, pad = self.members, self.members[0].model_cfg.pad_id
        lead = members[0]
        with lead._kernels():
            for m in members:
                m.model.train()
            batches = [[m._batch_to_device(b, m.train_split, "train") for b in g] for m, g in zip(members, groups)]
            tokens = [sum(b["ntokens"] for b in mine) for mine in batches]
            sums = torch.zeros(len(members), 2, dtype=torch.float64, device=self.device)
            embed = self.params["embed.weight"]
            for i in range(max(len(mine) for mine in batches)):
                micro = [mine[i] if i < len(mine) else no_targets(mine[0], pad) for mine in batches]
                src, tgt_in, tgt_out = padded_stack(micro, pad)
                keys = torch.tensor([[m.cfg.seed, m.step + 1, i] for m in members], device=self.device)
                reset_dropout_calls(lead.model)
                with lead._autocast():
                    hidden = vmap(self._forward)(self.params, keys, src, tgt_in)
                    total: Tensor | float = 0.0
                    for k, m in enumerate(members):
                        loss, nll = m.objective.features_loss(hidden[k], embed[k], tgt_out[k])
                        total = total + loss * (1.0 / tokens[k])  # the mean loss per target token of the seed
                        sums[k] += torch.stack([loss.detach(), nll.detach()]).double()
                total.backward()
        return sums, tokens

    def _update(self, groups: list[list[list[int]]]) -> tuple[Tensor, list[int]]:
        """One update of every seed (:meth:`gradients`, per-seed clipping, Adam, the schedule)."""
        sums, tokens = self.gradients(groups)
        with self.members[0]._kernels():
            for k, m in enumerate(self.members):
                m._flag_nonfinite(sums[k, 0])
            if self.cfg.clip_norm > 0:
                self.clip_per_seed(self.cfg.clip_norm)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.scheduler.step()
            for m in self.members:
                m.step += 1
            self._sync_members()
        return sums, tokens

    def clip_per_seed(self, max_norm: float) -> None:
        """``clip_grad_norm_`` of each seed's gradients on its own (a norm over the stack would couple the seeds)."""
        grads = [p.grad for p in self.params.values() if p.grad is not None]
        norms = torch.stack([g.pow(2).flatten(1).sum(1) for g in grads]).sum(0).sqrt()
        coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.view(-1, *([1] * (g.dim() - 1))).to(g.dtype))

    # -- the loop --------------------------------------------------------------------------------------------
    def _next_groups(self, streams: list[Iterator[list[list[int]]] | None], intervals: list[dict]) -> list:
        """The next update's micro-batches of every seed, each from its own sampler (an epoch ends per seed)."""
        groups = []
        for k, m in enumerate(self.members):
            if m._epoch_drawn():  # resumed after an epoch's last update
                m._end_epoch(intervals[k])
                streams[k] = None
            if streams[k] is None:
                streams[k] = m._groups()
            groups.append(next(streams[k]))
        return groups

    def fit(self) -> list[dict[str, Any]]:
        """Train every seed to ``max_steps``; write each seed's average.pt and result.json; return the results."""
        members, cfg = self.members, self.cfg
        intervals = [{"loss": 0.0, "nll": 0.0, "tokens": 0, "steps": 0, "time": 0.0} for _ in members]
        streams: list[Iterator[list[list[int]]] | None] = [None] * len(members)
        stop = members[0].stop_reason()
        while stop is None:
            groups = self._next_groups(streams, intervals)
            for m in members:
                m._start_clock()
            sums, tokens = self._update(groups)
            for k, interval in enumerate(intervals):
                for key, value in (("loss", sums[k, 0]), ("nll", sums[k, 1]), ("tokens", tokens[k]), ("steps", 1)):
                    interval[key] += value
            step = members[0].step
            log_point = step % cfg.log_every == 0 or step == cfg.max_steps
            valid_point = bool(cfg.valid_every and step % cfg.valid_every == 0)
            epoch_over = [m._epoch_drawn() for m in members]
            saving = bool(cfg.save_every and step % cfg.save_every == 0)
            if log_point or valid_point or saving or any(epoch_over):
                for m, interval in zip(members, intervals):
                    m._stop_clock(interval)  # one seed's validation is not another's update time
            for k, m in enumerate(members):
                if log_point:
                    m._log_interval(intervals[k], None)
                if valid_point:
                    m._checkpoint_point(intervals[k])
                if epoch_over[k]:
                    m._end_epoch(intervals[k])
                    streams[k] = None
            stop = members[0]._stop_reason(False)
            if stop is None:
                for m, interval in zip(members, intervals):
                    m._between_checkpoints(interval, log_point)
        for m, interval in zip(members, intervals):
            m._last_checkpoint(interval)
        return [m._finish(stop) for m in members]
