"""The paper's analyses, computed from the trained seed-1 runs of a scale's main corpus and stored.

* ``similarity``: Figure 2, cosine similarity of the decoder sub-layer inputs of the 6/6 Baseline;
  ``similarity-balanced``: the same for the two decoder layers of Balanced, the decoder CAN replaces.
* ``errors``: Figure 6, BLEU by source-word frequency and by sentence length.
* ``attention``: one test pair's maps in Balanced and CAN, and CAN's target share alpha across the test split.
* ``conversion``: beyond the paper, Balanced converted to CAN (:mod:`canlib.model.compress`) before and after a
  short fine-tune, against CAN trained from scratch.
* ``approximations``: every stage of the paper's derivation (Eqs. 6-13) measured on Balanced's trained decoder
  layers, and Balanced converted to CAN without training (the compression chapter's trained-model part).

Each is a record of the study table (:class:`repro.results.studies.Analysis`: the runs it reads, the function
of :data:`COMPUTATIONS` that computes it, the configuration it is stored with, :data:`CONFIGS`). Every model an
analysis reads is a run of the plan (:func:`runs_needed`), trained by the pool before the analysis is computed;
computing one trains nothing (:func:`repro.experiments.run.trained` only loads). The chapters read what is
stored here with the book's own reader, which does not import this package.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from canlib.analysis import attention_maps as am
from canlib.analysis.probes import sublayer_similarity
from canlib.bleu import corpus_scores
from canlib.catalogue import scale_spec
from canlib.data.batching import collate
from canlib.data.binarized import PreparedCorpus
from canlib.model.config import BOS_ID, EOS_ID
from canlib.model.conversion import alpha_value_scale, layer_approximations, standard_to_can
from canlib.model.seq2seq import Seq2Seq
from canlib.training.config import TrainConfig
from canlib.training.objective import LabelSmoothedObjective
from canlib.training.trainer import split_loss
from repro.experiments.corpus import batches, corpus_of, score_split, teacher_forced_batches
from repro.experiments.run import Run, Variant, budget, run, trained
from repro.results.layout import Where, hyp_file, read_hypotheses, study
from repro.results.studies import analysis_record


def runs_needed(name: str, where: Where) -> tuple[list[Run], list[Run]]:
    """(runs the analysis ``name`` reads, evaluated and stored like the plan's; further runs it trains for its own
    use only: the conversion study's fine-tunes and its longer CAN), from its record in the study table."""
    record = analysis_record(name)
    reads = [run(s, where, 1) for s in record.reads]
    if not record.finetunes:
        return reads, []
    start, finetune = reads[0], finetune_budget(where)
    own = [
        run("can", where, 1, variant=Variant(name, init, init=init, parent=start), train=finetune)
        for init in record.finetunes
    ]
    if base := budget(where.scale, 1, where.reduced).get("max_steps"):
        longer = budget(where.scale, 1, base + finetune["max_steps"])
        own.append(run("can", where, 1, variant=Variant(name, "longer"), train=longer))
    return reads, own


def finetune_budget(where: Where) -> dict[str, Any]:
    """The conversion study's fine-tune: ``Scale.finetune_steps`` updates (the reduced budget when given), a tenth
    of them warm-up, the scale's recipe otherwise."""
    steps = where.reduced if where.reduced is not None else scale_spec(where.scale).finetune_steps
    finetune = {
        **budget(where.scale, 1),
        "max_epochs": 0,
        "patience": 0,
        "max_steps": steps,
        "warmup": max(1, steps // 10),
    }
    if finetune.get("valid_every"):
        finetune["valid_every"] = min(finetune["valid_every"], steps)
    return finetune


def compute(name: str, where: Where) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compute (from the trained runs) and store the analysis ``name`` ``where`` its record says; a stored one is
    returned. Those that fine-tune models of their own are computed on the runs' device, the others on the CPU."""
    record = analysis_record(name)
    reads, own = runs_needed(name, where)
    config = CONFIGS[record.config](reads, where)
    device = reads[0].device if record.finetunes else "cpu"
    return study(name, where, config, lambda: COMPUTATIONS[record.compute](corpus_of(reads[0]), reads, own), device)


def one_run(reads: list[Run], where: Where) -> dict[str, Any]:
    """The stored configuration of an analysis of one run: the run's."""
    return reads[0].config


def each_run(reads: list[Run], where: Where) -> dict[str, Any]:
    """The stored configuration of an analysis of several runs: their systems and each run's."""
    return {"systems": [r.system for r in reads], **{r.system: r.config for r in reads}}


def can_and_finetune(reads: list[Run], where: Where) -> dict[str, Any]:
    """The stored configuration of the conversion study: CAN's from scratch and the fine-tune's budget."""
    return {**run("can", where, 1).config, "finetune": finetune_budget(where)}


# the ``config`` of an analysis record -> the configuration it is stored with
CONFIGS = {"run": one_run, "runs": each_run, "finetune": can_and_finetune}


def similarity(data: PreparedCorpus, reads: list[Run], own: list[Run]) -> dict[str, Any]:
    """Figure 2: cosine similarity of sub-layer inputs in the trained standard decoder it reads (the 6/6 Baseline,
    or Balanced's two layers), raw and LayerNorm'd, over the validation split."""
    model = trained(reads[0]).model()
    out = {}
    for normalized in (False, True):
        sims = sublayer_similarity(
            model, teacher_forced_batches(data, "valid", model.cfg), model.cfg.pad_id, normalized=normalized
        )
        out["normalized" if normalized else "residual"] = {k: v.tolist() for k, v in sims.items()}
    return out


def quantile_buckets(values: np.ndarray, n: int) -> tuple[np.ndarray, list[str]]:
    """Bucket ids of ``values`` in ``n`` quantile buckets, and each bucket's range as a label."""
    edges = np.quantile(values, np.linspace(0, 1, n + 1))
    ids = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, n - 1)
    return ids, [f"{edges[i]:.0f}-{edges[i + 1]:.0f}" for i in range(n)]


def buckets_of(hyps: list[str], data: Any, n_freq: int = 5) -> dict[str, dict[str, list]]:
    """Tokenized corpus BLEU of ``hyps``, translations of the test split, per bucket of average source-subword
    training frequency (quantile buckets) and of source length in words (1-10, 11-20, 21-30, 31-40, 41+)."""
    test, train_split = data.split("test"), data.split("train")
    srcs, refs = list(test.src_text), list(test.tgt_text)
    counts = np.bincount(
        np.concatenate([train_split[i][0] for i in range(len(train_split))]), minlength=data.vocab.size
    )
    freq = np.array([counts[data.vocab.encode(s)].mean() if s.strip() else 0.0 for s in srcs])
    freq_ids, freq_labels = quantile_buckets(freq, n_freq)
    lengths = np.array([len(s.split()) for s in srcs])
    len_ids = np.minimum((np.maximum(lengths, 1) - 1) // 10, 4)
    len_labels = ["1-10", "11-20", "21-30", "31-40", "41+"]
    out = {}
    for name, ids, labels in (("frequency", freq_ids, freq_labels), ("length", len_ids, len_labels)):
        bleu, sizes = [], []
        for b in range(len(labels)):
            members = np.flatnonzero(ids == b)
            sizes.append(int(members.size))
            sub_h, sub_r = [hyps[i] for i in members], [refs[i] for i in members]
            bleu.append(corpus_scores(sub_h, sub_r, lang=data.tgt_lang)["tok_bleu"] if members.size else float("nan"))
        out[name] = {"labels": labels, "bleu": bleu, "sentences": sizes}
    return out


def error_buckets(data: PreparedCorpus, reads: list[Run], own: list[Run]) -> dict[str, Any]:
    """Figure 6 for each run (seed 1, the test split, from its stored hypotheses): {system: {"frequency", "length"}}."""
    return {r.system: buckets_of(read_hypotheses(hyp_file(r.result_path, "test")), data) for r in reads}


def attention(data: PreparedCorpus, reads: list[Run], own: list[Run]) -> dict[str, Any]:
    """The maps of one test pair (per layer, mean over heads) in the standard-decoder run it reads and the
    joint-attention one, and the joint run's alpha over the test split (summary, histogram, mean per target
    position against uniform attention's i/(i+s))."""
    standard, joint = reads
    runs = {r.system: trained(r) for r in (standard, joint)}
    models = {s: r.model() for s, r in runs.items()}
    test = data.split("test")
    index = am.pick_pair(test)
    src, tgt = (list(map(int, part)) for part in test[index])
    src_in, tgt_in = src + [EOS_ID], [BOS_ID] + tgt
    maps = {
        s: [{k: v.tolist() for k, v in layer.items() if k != "heads"} for layer in am.attention_maps(m, src_in, tgt_in)]
        for s, m in models.items()
    }
    cfg = models[joint.system].cfg
    alphas, by_position = am.alpha_statistics(
        models[joint.system], teacher_forced_batches(data, "test", cfg), max_position=30
    )
    return {
        "systems": {"standard": standard.system, "joint": joint.system},
        "pair": {
            "index": index,
            "source": data.vocab.decode(test[index][0]),
            "target": data.vocab.decode(test[index][1]),
            "src_tokens": [data.vocab.sp.IdToPiece(i) for i in src_in],
            "tgt_tokens": [data.vocab.sp.IdToPiece(i) for i in tgt_in],
        },
        "maps": maps,
        "test_sentences": len(test),
        "alpha_summary": am.alpha_summary(alphas),
        "alpha_histogram": am.alpha_histogram(alphas),
        "alpha_by_position": {k: v.tolist() for k, v in by_position.items()},
        "models": {
            s: {
                **_shape(m.cfg, "enc_layers", "dec_layers", "decoder_kind", "d_model", "heads"),
                "trained_s": runs[s].result.get("wall_s"),
                "trained_on": runs[s].result.get("provenance", {}).get("device"),
            }
            for s, m in models.items()
        },
    }


def _shape(cfg: Any, *fields: str) -> dict[str, Any]:
    """The named fields of a model's configuration, as stored beside an analysis."""
    return {f: getattr(cfg, f) for f in fields}


# every model of the conversion study is scored alike, whatever it trained with: whole-vocabulary log-softmax,
# 4,096-token batches, the recipe's label smoothing
VALID_LOSS = TrainConfig(max_tokens=4096, loss_chunk=0)


def valid_loss(model: Seq2Seq, data: Any, cfg: TrainConfig = VALID_LOSS) -> float:
    """Label-smoothed cross entropy per target token on the validation split, computed as the trainer's validation
    computes it (:func:`canlib.training.trainer.split_loss`)."""
    device = next(model.parameters()).device
    model.eval()
    objective = LabelSmoothedObjective(model, cfg.label_smoothing, model.cfg.pad_id, cfg.loss_chunk)
    on_device = (
        {**batch, **{k: batch[k].to(device) for k in ("src", "tgt_in", "tgt_out")}}
        for batch in batches(data.split("valid"), model.cfg, cfg.max_tokens)
    )
    return split_loss(objective, on_device, device)["valid_loss"]


def conversion(data: PreparedCorpus, reads: list[Run], own: list[Run]) -> dict[str, Any]:
    """Balanced converted to CAN before and after a short fine-tune of n updates, against the rows a fair comparison
    needs: CAN with Balanced's trained encoder and a random decoder fine-tuned for the same n updates (conversion
    against random initialisation at an equal budget), and CAN from scratch for the scale's budget and for that
    budget plus n (equal total updates). Each row states its updates."""
    balanced_run, can_run = reads
    finetune = finetune_budget(balanced_run.where)
    steps, base = finetune["max_steps"], balanced_run.steps or None  # None: the scale trains by epochs
    balanced = trained(balanced_run).model()
    b = f"{base}" if base else "B"
    models = [
        ("Balanced (trained)", f"{b}", balanced),
        ("converted, no training", f"{b} + 0", standard_to_can(balanced)),
        ("converted + fine-tune", f"{b} + {steps}", trained(own[0]).model()),
        ("Balanced encoder, random CAN decoder + fine-tune", f"{b} (encoder) + {steps}", trained(own[1]).model()),
        ("CAN from scratch", f"{b}", trained(can_run).model()),
    ]
    if base:
        models.append((f"CAN from scratch, {base + steps} updates", f"{base + steps}", trained(own[2]).model()))
    rows = []
    for name, updates, model in models:
        model = model.to(balanced_run.device).eval()
        _, scores = score_split(model, data, "test", scale_spec(balanced_run.scale).beam)
        rows.append(
            {
                "system": name,
                "updates": updates,
                "valid loss": valid_loss(model, data),
                "test BLEU": scores["bleu"],
                "test tok-BLEU": scores["tok_bleu"],
            }
        )
    return {"rows": rows, "finetune": finetune}


APPROXIMATION_SENTENCES = 100  # validation pairs measured one at a time, in float64 on the CPU


@torch.no_grad()
def approximations(data: PreparedCorpus, reads: list[Run], own: list[Run]) -> dict[str, Any]:
    """The compression chapter's measurements on the trained run it reads (Balanced, seed 1): what the model
    learnt (validation NLL against a uniform guess), every stage of the derivation per decoder layer
    (:func:`canlib.model.conversion.layer_approximations`), and the validation NLL of the model converted to CAN
    without training, in variants, beside an untrained CAN. Runs in float64 on the CPU."""
    source = reads[0]
    done = trained(source)
    model = done.model().cpu().float().eval()
    cfg = model.cfg
    valid = data.split("valid")
    indices = range(min(APPROXIMATION_SENTENCES, len(valid)))
    pairs = [tuple(map(list, valid[i])) for i in indices]
    batch = collate(valid, indices, cfg.pad_id, cfg.bos_id, cfg.eos_id)

    def nll(m: Seq2Seq) -> float:  # mean NLL per target token (nats), teacher-forced
        logp = m.eval()(batch["src"], batch["tgt_in"])
        return torch.nn.functional.nll_loss(
            logp.flatten(0, 1).float(), batch["tgt_out"].flatten(), ignore_index=cfg.pad_id
        ).item()

    layers = layer_approximations(model.double(), pairs)
    model = model.float()
    torch.manual_seed(0)  # the untrained CAN's initialisation
    candidates = {
        "trained standard (Balanced)": model,
        "converted: shared query (least squares), values x2": standard_to_can(model),
        "converted: values x1": standard_to_can(model, value_scale=1.0),
        "converted: mean query": standard_to_can(model, query="mean"),
        "converted: values 1/alpha, 1/(1-alpha)": standard_to_can(
            model, value_scale=[alpha_value_scale(layer["alpha_mean"]) for layer in layers]
        ),
        "untrained CAN": Seq2Seq(cfg.replace(decoder_kind="can")),
    }
    return {
        "model": {
            "system": source.system,
            **_shape(cfg, "enc_layers", "dec_layers", "d_model", "heads", "vocab_size"),
            "params": done.result.get("params"),
            "updates": done.result.get("step"),
            "train_pairs": len(data.split("train")),
        },
        "sentences": len(pairs),
        "valid_nll": nll(model),
        "uniform_nll": math.log(cfg.vocab_size),
        "layers": layers,
        "conversion": {name: nll(m) for name, m in candidates.items()},
    }


# the ``compute`` of an analysis record -> the function that computes it from the main corpus (the one every run it
# reads trains on), the runs it reads and its own
COMPUTATIONS = {f.__name__: f for f in (similarity, error_buckets, attention, conversion, approximations)}
