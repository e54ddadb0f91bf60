"""Stacked seeds: K seeds trained as one model equal K separate runs of the same code, seed by seed."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from conftest import SHARED_DATA
from conftest import missing as missing_data

from canlib.data.batching import PairList, TokenBatchSampler, collate
from canlib.data.vocab import Vocabulary
from canlib.decoding.translate import translate_ids
from canlib.model import Seq2Seq
from canlib.model.checkpoint import safe_load
from canlib.model.config import ModelConfig
from canlib.training import TrainConfig, Trainer
from canlib.training.hash_dropout import HashDropout, set_dropout_key, use_hash_dropout
from canlib.training.objective import LabelSmoothedObjective
from canlib.training.stacked import StackedTrainer
from canlib.training.state import seed_everything

SEEDS = (1, 2, 3)
UPDATES = 160  # of the separate-runs comparison (about 25 s of one core)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def corpus():
    """A 1,000-piece vocabulary and short real Multi30k En-De pairs (training and validation)."""
    folder = SHARED_DATA / "multi30k-en-de"
    if not (folder / "train.en.gz").is_file():
        missing_data(f"real data folder {folder} not present")
    with gzip.open(folder / "train.en.gz", "rt") as f_en, gzip.open(folder / "train.de.gz", "rt") as f_de:
        en = [next(f_en).strip() for _ in range(3000)]
        de = [next(f_de).strip() for _ in range(3000)]
    vocab = Vocabulary.train(en[:2000] + de[:2000], 1000)
    pairs = [(vocab.encode(e), vocab.encode(d), e, d) for e, d in zip(en, de)]
    pairs = [p for p in pairs if 3 <= len(p[0]) <= 16 and 3 <= len(p[1]) <= 16]
    train, valid = pairs[:-40], pairs[-40:]
    return vocab, split_of(train), split_of(valid)


def split_of(pairs) -> PairList:
    return PairList([p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs], [p[3] for p in pairs])


def model_config(vocab: Vocabulary, dropout: float) -> ModelConfig:
    """CAN's decoder (the joint attention over [target ; source] keys), small enough for hundreds of CPU updates."""
    return ModelConfig(
        vocab_size=vocab.size,
        d_model=32,
        heads=4,
        ffn_dim=64,
        enc_layers=2,
        dec_layers=2,
        decoder_kind="can",
        dropout=dropout,
        attn_dropout=dropout,
        relu_dropout=dropout,
    )


def recipe(**kw) -> TrainConfig:
    base = dict(
        lr=3e-3,
        warmup=20,
        max_tokens=256,
        max_steps=UPDATES,
        valid_every=50,
        log_every=25,
        keep_last=2,
        average_last=2,
        progress=False,
        dropout_rng="counter-hash",
    )
    return TrainConfig(**{**base, **kw})


@pytest.fixture
def fp64():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def one_model_gradients(
    mc: ModelConfig, cfg: TrainConfig, split: PairList, hashed: bool, indices: list[int] | None = None
) -> dict[str, torch.Tensor]:
    """Update 1 of a lone seed computed by hand: the seed's model, its first batch (or ``indices``), the loss per
    target token."""
    sampler = TokenBatchSampler(split.src_lens, split.tgt_lens, cfg.max_tokens, seed=cfg.seed)
    indices = indices or next(iter(sampler))
    batch = collate(split, indices, mc.pad_id, mc.bos_id, mc.eos_id)
    seed_everything(cfg.seed)
    model = Seq2Seq(mc).train()
    if hashed:
        use_hash_dropout(model)
        set_dropout_key(model, cfg.seed, 1, 0)
    objective = LabelSmoothedObjective(model, cfg.label_smoothing, mc.pad_id, cfg.loss_chunk)
    loss, _ = objective(batch["src"], batch["tgt_in"], batch["tgt_out"])
    (loss / batch["ntokens"]).backward()
    return {name: p.grad for name, p in model.named_parameters()}


def stacked_gradients(stack: StackedTrainer) -> list[dict[str, torch.Tensor]]:
    k = len(stack.members)
    stack.gradients(stack._next_groups([None] * k, [{}] * k))
    return [{name: p.grad[i] for name, p in stack.params.items()} for i in range(k)]


def max_gap(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max((a[n] - b[n]).abs().max().item() for n in a)


def test_hash_dropout_masks_depend_on_coordinates_not_on_padding_or_other_seeds():
    drop = HashDropout(0.25, site=3).train()
    x = torch.ones(5, 7, 16)
    set_dropout_key(drop, 2, 10, 0)
    small = drop(x)
    set_dropout_key(drop, 2, 10, 0)
    padded = drop(torch.ones(8, 11, 16))
    assert torch.equal(small, padded[:5, :7])  # padding a batch leaves every real element's mask
    kept = (drop(torch.ones(200, 50, 40)) > 0).double().mean().item()  # the second call of the site: a new mask
    assert abs(kept - 0.75) < 0.005  # 400k draws: 5 standard errors of a 0.75 rate is 0.0034
    assert (small == 0).any() and torch.allclose(small[small > 0], torch.tensor(1 / 0.75))
    for other in ((3, 10, 0), (2, 11, 0), (2, 10, 1)):  # another seed, update or micro-batch: another mask
        set_dropout_key(drop, *other)
        assert not torch.equal(drop(x), small)
    # under vmap each seed's key gives the mask it gives alone
    keys = torch.tensor([[7, 10, 0], [2, 10, 0], [5, 10, 0]])

    def one(key, t):
        drop.calls = 0
        return torch.func.functional_call(drop, {"key": key}, (t,))

    stacked = torch.vmap(one)(keys, torch.ones(3, 5, 7, 16))
    assert torch.equal(stacked[1], small)


def test_step_one_gradients_equal_separate_models_fp64(corpus, fp64, tmp_path):
    vocab, train, valid = corpus
    mc = model_config(vocab, dropout=0.0)
    cfgs = [recipe(seed=s) for s in SEEDS]
    stack = StackedTrainer(mc, cfgs, train, valid, [tmp_path / f"s{s}" for s in SEEDS])
    for cfg, grads in zip(cfgs, stacked_gradients(stack)):
        reference = one_model_gradients(mc, cfg, train, hashed=False)
        assert max_gap(grads, reference) < 1e-12, cfg.seed


def test_a_seeds_dropout_masks_do_not_depend_on_the_stack(corpus, fp64, tmp_path):
    vocab, train, valid = corpus
    mc = model_config(vocab, dropout=0.3)
    cfgs = [recipe(seed=s) for s in SEEDS]
    stack = StackedTrainer(mc, cfgs, train, valid, [tmp_path / f"s{s}" for s in SEEDS])
    # batches of three lengths, so that two seeds' batches are padded in the stack (source, target and rows)
    sampler = TokenBatchSampler(train.src_lens, train.tgt_lens, 256, seed=5)
    longest = {max(len(train[i][1]) for i in b): b for b in sampler}
    lengths = sorted(longest)
    groups = [[longest[n]] for n in (lengths[-1], lengths[len(lengths) // 2], lengths[0])]
    stack.gradients(groups)
    for k, cfg in enumerate(cfgs):
        three = {name: p.grad[k] for name, p in stack.params.items()}
        alone = StackedTrainer(mc, [cfg], train, valid, [tmp_path / f"alone{k}"])
        alone.gradients(groups[k : k + 1])
        one = {name: p.grad[0] for name, p in alone.params.items()}
        reference = one_model_gradients(mc, cfg, train, hashed=True, indices=groups[k][0])
        assert max_gap(three, one) < 1e-12, cfg.seed
        assert max_gap(three, reference) < 1e-12, cfg.seed
    dropout_off = one_model_gradients(mc, cfgs[1], train, hashed=False)
    assert max_gap(reference, dropout_off) > 1e-3  # the masks are on


def test_gradient_clipping_is_per_seed(corpus, fp64, tmp_path):
    vocab, train, valid = corpus
    mc = model_config(vocab, dropout=0.0)
    cfgs = [recipe(seed=s, clip_norm=0.05) for s in SEEDS]
    stack = StackedTrainer(mc, cfgs, train, valid, [tmp_path / f"s{s}" for s in SEEDS])
    stacked = stacked_gradients(stack)
    stack.clip_per_seed(0.05)
    for cfg, grads in zip(cfgs, stacked):
        reference = one_model_gradients(mc, cfg, train, hashed=False)
        norm = torch.nn.utils.get_total_norm(list(reference.values()))  # the one model's norm, as clip_grad_norm_
        assert norm > 0.1  # clipping bites
        reference = {n: g * (0.05 / (norm + 1e-6)) for n, g in reference.items()}  # clip_grad_norm_'s scaling
        assert max_gap(grads, reference) < 1e-12, cfg.seed


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """Three seeds stacked and each alone (K = 1 of the same code), in float64 with dropout, UPDATES updates."""
    vocab, train, valid = corpus
    mc = model_config(vocab, dropout=0.1)
    root = tmp_path_factory.mktemp("stacked")
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        StackedTrainer(mc, [recipe(seed=s) for s in SEEDS], train, valid, [root / f"stack{s}" for s in SEEDS]).fit()
        for s in SEEDS:
            StackedTrainer(mc, [recipe(seed=s)], train, valid, [root / f"alone{s}"]).fit()
    finally:
        torch.set_default_dtype(before)
    return root, mc


def weights(run: Path, name: str = "average.pt") -> dict[str, torch.Tensor]:
    return safe_load(run / name)["model"]


def test_stacked_seeds_train_as_separate_runs(trained, corpus):
    root, mc = trained
    vocab, _, valid = corpus
    sources = [valid[i][0].tolist() for i in range(len(valid))]
    for s in SEEDS:
        stack, alone = root / f"stack{s}", root / f"alone{s}"
        assert sorted(p.name for p in stack.rglob("*")) == sorted(p.name for p in alone.rglob("*"))
        # float64: the stack and the lone seed differ in the padding's summation order only (7.7e-13 seen)
        assert max_gap(weights(stack), weights(alone)) < 1e-10, s
        rows = [[json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()] for run in (stack, alone)]
        assert [r["step"] for r in rows[0]] == [r["step"] for r in rows[1]]
        for a, b in zip(*rows):
            key = "valid_loss" if a["kind"] == "valid" else "train_loss"
            assert abs(a[key] - b[key]) < 1e-9
        config = json.loads((stack / "config.json").read_text())
        assert config["train"]["dropout_rng"] == "counter-hash" and config["stacked_seeds"] == list(SEEDS)
        outputs = []
        for run in (stack, alone):
            model = Seq2Seq(mc).double()
            model.load_state_dict(weights(run))
            outputs.append(translate_ids(model, vocab, sources, beam=1))
        assert outputs[0] == outputs[1]
    seeds_apart = max_gap(weights(root / "stack1"), weights(root / "stack2"))
    assert seeds_apart > 0.1  # each seed its own model


def test_a_stacked_seeds_folder_resumes_alone(trained, corpus, tmp_path):
    root, mc = trained
    vocab, train, valid = corpus
    half = [tmp_path / f"half{s}" for s in SEEDS]
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        StackedTrainer(mc, [recipe(seed=s, max_steps=UPDATES // 2) for s in SEEDS], train, valid, half).fit()
        stored = json.loads((half[1] / "config.json").read_text())
        cfg = replace(TrainConfig.from_dict(stored["train"]), max_steps=UPDATES)  # the run folder's own recipe
        Trainer(mc, cfg, train, valid, half[1], resume=True).fit()  # the separate run's resume, on this folder alone
    finally:
        torch.set_default_dtype(before)
    assert max_gap(weights(half[1]), weights(root / "stack2")) < 1e-9
    final = json.loads((half[1] / "result.json").read_text())
    assert (
        final["step"] == UPDATES
        and final["averaged"] == json.loads((root / "stack2/result.json").read_text())["averaged"]
    )


def test_a_stack_refuses_seeds_that_differ_in_more_than_the_seed(corpus, tmp_path):
    vocab, train, valid = corpus
    mc = model_config(vocab, dropout=0.0)
    with pytest.raises(ValueError, match=r"seeds 1 and 2 differ in lr \(0.003 against 0.001\)"):
        StackedTrainer(mc, [recipe(seed=1), recipe(seed=2, lr=1e-3)], train, valid, [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(ValueError, match="patience=3: stacked seeds stop together"):
        StackedTrainer(mc, [recipe(seed=1, patience=3)], train, valid, [tmp_path / "a"])
    assert not (tmp_path / "a").exists()
