"""The model library: incremental decoding equals teacher forcing, causality, masks, configs."""

from __future__ import annotations

import pytest
import torch
from conftest import small_config

from canlib import DECODER_KINDS, ModelConfig, Seq2Seq, preset
from canlib.model.config import BOS_ID, EOS_ID, PAD_ID

VOCAB = 50


def tiny_config(kind: str, dec_layers: int = 2, enc_layers: int = 2, **kw) -> ModelConfig:
    return small_config(kind, vocab_size=VOCAB, enc_layers=enc_layers, dec_layers=dec_layers, max_len=64, **kw)


def mixed_batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Source and target-input batches of 3 sentences with different lengths, right-padded."""
    g = torch.Generator().manual_seed(seed)
    src_lens, tgt_lens = [7, 4, 9], [6, 9, 3]
    src = torch.full((3, max(src_lens)), PAD_ID)
    tgt = torch.full((3, max(tgt_lens)), PAD_ID)
    for i, (s, t) in enumerate(zip(src_lens, tgt_lens)):
        src[i, :s] = torch.randint(4, VOCAB, (s,), generator=g)
        src[i, s - 1] = EOS_ID
        tgt[i, 0] = BOS_ID
        tgt[i, 1:t] = torch.randint(4, VOCAB, (t - 1,), generator=g)
    return src, tgt


def incremental_log_probs(model: Seq2Seq, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    cache = model.init_cache(model.encode(src), max_len=tgt.size(1))
    return torch.stack([model.decode_step(tgt[:, t], cache) for t in range(tgt.size(1))], dim=1)


KINDS_AND_DEPTHS = [(k, n) for k in DECODER_KINDS for n in (1, 2, 3)]


@pytest.mark.parametrize("kind,dec_layers", KINDS_AND_DEPTHS)
def test_decode_step_matches_teacher_forcing(kind, dec_layers):
    model = Seq2Seq(tiny_config(kind, dec_layers)).eval()
    src, tgt = mixed_batch()
    with torch.no_grad():
        full = model(src, tgt)
        steps = incremental_log_probs(model, src, tgt)
    real = tgt.ne(PAD_ID)
    diff = (full - steps).abs()[real].max().item()
    assert diff < 1e-5, f"{kind}/{dec_layers}: max abs diff {diff:.2e}"


@pytest.mark.parametrize("kind", DECODER_KINDS)
def test_a_decode_step_can_run_twice(kind):
    """A step is a function of the cache before it: running step t again (as CUDA graph capture
    does: a warm-up run, then the replay) writes the same state and returns the same output (a running
    sum updated with ``+=``, AAN's obvious state, would not)."""
    model = Seq2Seq(tiny_config(kind, dec_layers=3)).eval()
    src, tgt = mixed_batch(4)
    with torch.no_grad():
        reference = incremental_log_probs(model, src, tgt)
        cache = model.init_cache(model.encode(src), max_len=tgt.size(1))
        out = []
        for t in range(tgt.size(1)):
            model.decode_step(tgt[:, t], cache)  # the warm-up
            cache.step = t
            out.append(model.decode_step(tgt[:, t], cache))  # the replay
    assert (torch.stack(out, dim=1) - reference).abs().max().item() < 1e-6


@pytest.mark.parametrize("kind", DECODER_KINDS)
def test_reordering_cache_permutes_results(kind):
    model = Seq2Seq(tiny_config(kind)).eval()
    src, tgt = mixed_batch(2)
    perm = torch.tensor([2, 0, 1])
    with torch.no_grad():
        reference = incremental_log_probs(model, src, tgt)
        cache = model.init_cache(model.encode(src), max_len=tgt.size(1))
        out = []
        for t in range(tgt.size(1)):
            if t == 3:  # permute mid-sentence: later steps must follow their new rows
                model.reorder_cache(cache, perm)
                tgt = tgt[perm]
            out.append(model.decode_step(tgt[:, t], cache))
    late = torch.stack(out[3:], dim=1)
    expected = reference[perm][:, 3:]
    mask = tgt[:, 3:].ne(PAD_ID)
    assert (late - expected).abs()[mask].max().item() < 1e-5


@pytest.mark.parametrize("kind", DECODER_KINDS)
def test_beam_rows_share_source_and_reorder_within_sentence(kind):
    """2 sentences x beam 3: rows reordered within a sentence continue the chosen rows."""
    model = Seq2Seq(tiny_config(kind)).eval()
    src, _ = mixed_batch(3)
    src = src[:2]
    beam = 3
    g = torch.Generator().manual_seed(5)
    prefix = torch.randint(4, VOCAB, (2 * beam, 6), generator=g)
    prefix[:, 0] = BOS_ID
    with torch.no_grad():
        memory = model.encode(src, beam=beam)
        cache = model.init_cache(memory, max_len=6)
        assert cache.sources[0] == {} or all(v.size(0) == 2 for v in cache.sources[0].values())
        index = torch.tensor([2, 2, 0, 4, 3, 3])
        out = []
        for t in range(6):
            if t == 2:
                model.reorder_cache(cache, index)
                prefix = torch.cat([prefix[index, :2], prefix[:, 2:]], dim=1)
            out.append(model.decode_step(prefix[:, t], cache))
        # reference: each row decoded alone with its own copy of the source
        src_rows = src.repeat_interleave(beam, dim=0)
        expected = model(src_rows, prefix)
    assert (torch.stack(out[2:], 1) - expected[:, 2:]).abs().max().item() < 1e-5


@pytest.mark.parametrize("kind", DECODER_KINDS)
def test_reordering_rows_moves_each_buffer_of_every_layer_with_its_row(kind):
    """The beam search's reorder (the written prefix of every layer's state gathered into the other buffer,
    no reallocation) against each layer's state indexed on its own; a joint layer's source part (the same
    for a sentence's rows) is there in both buffers."""
    torch.manual_seed(0)
    model = Seq2Seq(tiny_config(kind)).eval()
    src, _ = mixed_batch()
    with torch.no_grad():
        cache = model.init_cache(model.encode(src[:2], beam=2), max_len=6)
    g = torch.Generator().manual_seed(1)
    leads = [cache.lead if layer.joint else 0 for layer in model.decoder_layers]
    before = [{name: buf.clone() for name, buf in rows.items()} for rows in cache.rows]
    for rows, values, lead in zip(cache.rows, before, leads):
        for name, buf in rows.items():
            values[name][lead:] = torch.randn(values[name][lead:].shape, generator=g)  # the prefix: random
            buf.copy_(values[name])
    # no two layers' states share memory: each still holds what was written to it
    assert all(torch.equal(buf, values[name]) for rows, values in zip(cache.rows, before) for name, buf in rows.items())
    cache.step = 4
    index = torch.tensor([1, 0, 3, 2])  # every row moves, within its sentence
    current = cache.buffer
    model.reorder_rows(cache, index)
    assert cache.buffer is not current and cache.spare is current  # gathered into the other buffer
    for rows, old, lead in zip(cache.rows, before, leads):
        for name, buf in rows.items():
            assert torch.equal(buf[:lead], old[name][:lead]), name  # the source part
            assert torch.equal(buf[lead : lead + 4], old[name][lead : lead + 4, index]), name  # prefix positions 0..3
    assert (kind in ("can", "can_attn", "can_residual", "can_nosplit")) == (cache.lead == src.size(1))


def test_reorder_across_sentences_with_beams_is_refused():
    model = Seq2Seq(tiny_config("can")).eval()
    src, _ = mixed_batch()
    cache = model.init_cache(model.encode(src[:2], beam=2), max_len=4)
    with pytest.raises(ValueError, match="mixes sentences"):
        model.reorder_cache(cache, torch.tensor([0, 2, 1, 3]))


def test_reorder_can_drop_finished_sentences():
    model = Seq2Seq(tiny_config("standard")).eval()
    src, tgt = mixed_batch()
    with torch.no_grad():
        reference = incremental_log_probs(model, src, tgt)
        cache = model.init_cache(model.encode(src, beam=2), max_len=tgt.size(1))
        rows = tgt.repeat_interleave(2, dim=0)
        model.decode_step(rows[:, 0], cache)
        model.reorder_cache(cache, torch.tensor([0, 1, 4, 5]))  # keep sentences 0 and 2
        logp = model.decode_step(rows[[0, 1, 4, 5], 1], cache)
    assert (logp[::2] - reference[[0, 2], 1]).abs().max().item() < 1e-5


@pytest.mark.parametrize("kind", DECODER_KINDS)
def test_future_target_tokens_never_change_earlier_outputs(kind):
    model = Seq2Seq(tiny_config(kind)).eval()
    src, tgt = mixed_batch()
    changed = tgt.clone()
    changed[:, 4:] = torch.randint(4, VOCAB, changed[:, 4:].shape)
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    assert torch.equal(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 5:], b[:, 5:])  # the change is visible later: the test can fail


@pytest.mark.parametrize("kind", DECODER_KINDS)
def test_padded_source_positions_never_change_anything(kind):
    model = Seq2Seq(tiny_config(kind)).eval()
    src, tgt = mixed_batch()
    longer = torch.cat([src, torch.full((3, 5), PAD_ID)], dim=1)
    with torch.no_grad():
        a = model(src, tgt)
        b = model(longer, tgt)
        real = src.clone()
        real[1, 5] = 7  # a real (non-pad) source change does change the output
        c = model(real, tgt)
    assert (a - b).abs().max().item() < 1e-5
    assert (a[1] - c[1]).abs().max().item() > 1e-4


def test_baseline_and_balanced_have_similar_parameter_counts():
    counts = {name: Seq2Seq(preset(name)).num_parameters() for name in ("baseline", "balanced")}
    assert abs(counts["baseline"] - counts["balanced"]) / counts["baseline"] < 0.05


@pytest.mark.parametrize(
    "changes,field",
    [
        (dict(d_model=30, heads=4), "d_model"),
        (dict(decoder_kind="can", ffn_dim=66, heads=4), "ffn_dim"),
        (dict(enc_layers=0), "enc_layers"),
        (dict(dec_layers=-1), "dec_layers"),
        (dict(decoder_kind="lstm"), "decoder_kind"),
        (dict(dropout=1.5), "dropout"),
        (dict(decoder_kind="san", dec_layers=3, san_groups=(2,)), "san_groups"),
    ],
)
def test_bad_config_names_field_and_value(changes, field):
    base = dict(vocab_size=VOCAB, d_model=32, heads=4, ffn_dim=64)
    with pytest.raises(ValueError, match=rf"ModelConfig\.{field}="):
        ModelConfig(**{**base, **changes})


def test_unknown_preset_is_a_value_error():
    with pytest.raises(ValueError, match="preset='transformer-big'"):
        preset("transformer-big")


def test_san_followers_reuse_leader_attention():
    model = Seq2Seq(tiny_config("san", dec_layers=4, san_groups=(2, 2)))
    leaders = [layer.leader for layer in model.decoder_layers]
    assert leaders == [True, False, True, False]
    assert not hasattr(model.decoder_layers[1], "cross_attn")


def test_can_values_are_ffn_wide_and_split_across_heads():
    cfg = tiny_config("can")
    layer = Seq2Seq(cfg).decoder_layers[0]
    cache = layer.new_cache(rows=2, max_len=5, like=torch.zeros(1))
    # per position and row: keys d wide, values ffn_dim wide, side by side in one buffer
    assert cache["kv"].shape == (5, 2, cfg.d_model + cfg.ffn_dim)
    assert layer.h_proj.out_features == cfg.d_model + cfg.ffn_dim


@pytest.mark.parametrize("shape", [(3, 32), (6, 1, 32), (2, 5, 32), (1, 1, 32), (32,), (70, 32)])
def test_the_fast_cpu_conversion_keeps_each_linears_parameters_and_products(shape):
    """``fast_cpu_linears`` swaps every nn.Linear of a module, nested ones too, for a RowsLinear over the same
    parameter tensors (an optimizer holding them goes on training the model); its product equals x W^T + b
    written out, for one row, a few rows and more rows than the fast form takes."""
    from canlib.model.attention import RowsLinear, fast_cpu_linears

    torch.manual_seed(0)
    inner = torch.nn.ModuleDict({"inner": torch.nn.Linear(48, 32, bias=False)})
    module = torch.nn.Sequential(torch.nn.Linear(32, 48), inner)
    params = [p for p in module.parameters()]
    state = {k: v.clone() for k, v in module.state_dict().items()}
    assert fast_cpu_linears(module) is module
    assert type(module[0]) is RowsLinear and type(module[1]["inner"]) is RowsLinear
    assert all(a is b for a, b in zip(module.parameters(), params)) and len(list(module.parameters())) == 3
    assert module[1]["inner"].bias is None
    assert module.state_dict().keys() == state.keys()
    assert all(torch.equal(v, state[k]) for k, v in module.state_dict().items())
    x = torch.randn(shape)
    with torch.no_grad():
        fast = module[0](x)
    expected = x @ params[0].detach().T + params[1].detach()
    assert fast.shape == expected.shape
    assert (fast - expected).abs().max().item() < 1e-5


def test_cpu_inference_takes_every_linear_through_the_fast_form_and_training_never(monkeypatch):
    """The CPU trick is one conversion, made when the model is built: encoding and decode steps without autograd
    on a CPU compute every linear as (W x^T)^T, never as F.linear; with autograd every one is F.linear."""
    import torch.nn.functional as F

    import canlib.model.attention as attention

    routed, plain = [], []
    rows_linear, linear = attention.rows_linear, F.linear
    monkeypatch.setattr(attention, "rows_linear", lambda x, w, b=None: routed.append(w.shape) or rows_linear(x, w, b))
    monkeypatch.setattr(F, "linear", lambda x, w, b=None: plain.append(w.shape) or linear(x, w, b))
    model = Seq2Seq(tiny_config("can", dec_layers=1)).eval()
    src, tgt = mixed_batch(6)
    with torch.no_grad():
        cache = model.init_cache(model.encode(src), max_len=3)
        model.decode_hidden(tgt[:, 0], cache)
    linears = {m.weight.shape for m in model.modules() if isinstance(m, torch.nn.Linear)}
    assert linears <= set(routed)
    assert plain == []
    model.train()
    model(src, tgt).sum().backward()
    assert linears <= set(plain)


def test_seek_gives_the_view_of_the_cache_that_steps_with_gathering_reorders_leave(monkeypatch):
    """Steps whose reorders gather into the other buffer (a GPU's; the CPU's in-place shortcut is switched off)
    leave before step t: ``step`` t, buffer t % 2 current; after step t's layers: ``step`` t + 1, the same buffer.
    ``seek`` must set exactly that view, from wherever the cache's view stands."""
    import canlib.model.seq2seq

    monkeypatch.setattr(canlib.model.seq2seq, "reorder_moved_rows", lambda *args: False)
    model = Seq2Seq(tiny_config("can")).eval()
    src, tgt = mixed_batch(7)
    steps = tgt.size(1)
    with torch.no_grad():
        cache = model.init_cache(model.encode(src, beam=2), max_len=steps)
        views = []
        for t in range(steps):
            before = (cache.step, cache.buffer, cache.rows)
            model.decode_hidden(tgt[:, t].repeat_interleave(2), cache)
            views.append((before, (cache.step, cache.buffer, cache.rows)))
            model.reorder_rows(cache, torch.arange(2 * src.size(0)).view(-1, 2).flip(1).reshape(-1))
    assert [v[0][0] for v in views] == list(range(steps))  # the eager steps' own view, the reference
    for t, (before, after) in reversed(list(enumerate(views))):
        for written, (step, buffer, rows) in ((False, before), (True, after)):
            cache.seek(t, written=written)
            assert cache.step == step and cache.buffer is buffer and cache.rows is rows, (t, written)


def _explicit_attention(q, keys, values, mask, dropout, parts=()):
    """What ``scaled_dot_product_attention`` computes, written out (the pre-fusion code)."""
    s = torch.matmul(q, keys.transpose(-1, -2)) * q.size(-1) ** -0.5
    s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.matmul(dropout(torch.softmax(s, dim=-1)), values)


@pytest.mark.parametrize("kind", DECODER_KINDS)
def test_fused_teacher_forcing_equals_explicit_attention(kind, monkeypatch):
    """Training runs attention through one fused kernel; in float32 it equals the written-out
    softmax(q k^T / sqrt(w) + mask) v to 1e-5, and dropout on the probabilities stays active."""
    import canlib.model.attention as attention

    model = Seq2Seq(tiny_config(kind, dec_layers=2)).eval()
    src, tgt = mixed_batch(5)
    with torch.no_grad():
        fused = model(src, tgt)
        monkeypatch.setattr(attention, "fused_attention", _explicit_attention)
        explicit = model(src, tgt)
    monkeypatch.undo()
    real = tgt.ne(PAD_ID)
    assert (fused - explicit).abs()[real].max().item() < 1e-5
    noisy = Seq2Seq(tiny_config(kind).replace(attn_dropout=0.5)).train()
    torch.manual_seed(1)
    first = noisy(src, tgt)
    first.sum().backward()
    assert not torch.equal(first, noisy(src, tgt))


def test_inference_ffn_with_bias_and_relu_in_the_gemm_equals_the_layers_written_out():
    from canlib.model.attention import FeedForward, linear_relu

    torch.manual_seed(3)
    ffn = FeedForward(8, 32, relu_dropout=0.0).eval()
    with torch.no_grad():
        ffn.w1.bias.normal_()  # a zero bias would hide a missing one
        x = torch.randn(3, 2, 8)
        expected = torch.relu(x @ ffn.w1.weight.T + ffn.w1.bias) @ ffn.w2.weight.T + ffn.w2.bias
        assert torch.allclose(linear_relu(x, ffn.w1), torch.relu(x @ ffn.w1.weight.T + ffn.w1.bias), atol=1e-6)
        assert torch.allclose(ffn(x), expected, atol=1e-6)


def test_score_biases_hide_padded_positions_and_keep_their_rows_aligned_to_16():
    from canlib.model.attention import SourceMemory

    pad = torch.tensor([[False, False, True], [False, False, False]])
    memory = SourceMemory(torch.zeros(2, 3, 4), pad, beam=2)
    bias = memory.score_bias(torch.float32)
    assert bias.shape == (2, 1, 1, 3) and bias.stride(0) % 16 == 0
    assert bias.view(2, 3).tolist() == [[0, 0, float("-inf")], [0, 0, 0]]
    joint = memory.joint_bias(3 + 5, torch.float32)  # each row: its sentence's source, then 5 prefix positions
    assert joint.shape == (4, 1, 1, 8) and joint.stride(0) % 16 == 0
    assert joint.view(4, 8).isinf().tolist() == [[False, False, True] + [False] * 5] * 2 + [[False] * 8] * 2
