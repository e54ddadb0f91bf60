"""Export ``standard`` models (Baseline 6/6, Balanced 12/2, the other depths) to CTranslate2, the reference engine.

CTranslate2's pre-norm Transformer is the same function as ours once the weights are
placed right: fused [q|k|v] self-attention and [k|v] cross-attention projections (our
layouts already are), one embedding matrix shared by source, target and output
projection (no output bias), embeddings scaled by sqrt(d), our interleaved sinusoidal
table passed explicitly as the position encodings, final LayerNorms on both stacks and
LayerNorm epsilon 1e-5 (PyTorch's). Tokens are exchanged as names ``<blank>``, ``<unk>``,
``<s>``, ``</s>`` for the special ids and the SentencePiece pieces (or ``t<id>`` when no
vocabulary is given) for the rest. canlib's encoder reads each source with its EOS: the exported model says so
(``add_source_eos``), so CTranslate2 appends it to the pieces it is given, as canlib's batches do.

The other decoder kinds have no CTranslate2 layer (``UNSUPPORTED`` says why, one line each).
"""

from __future__ import annotations

import itertools
import json
import math
import os
from pathlib import Path

import torch
from torch import Tensor

from canlib.data.vocab import Vocabulary
from canlib.io import tqdm
from canlib.model.seq2seq import Seq2Seq

SPECIALS = {0: "<blank>", 1: "<unk>", 2: "<s>", 3: "</s>"}
_MERGED = "which CTranslate2's Transformer has no layer for"
# decoder kind -> why CTranslate2 cannot run it
UNSUPPORTED = {
    "can": f"CAN computes self-attention, cross-attention and the FFN as one compressed sub-layer, {_MERGED}",
    "can_attn": f"Compress Attention merges self- and cross-attention into one sub-layer, {_MERGED}",
    "can_ffn": f"Compress FFN merges cross-attention into the FFN, {_MERGED}",
    "can_residual": f"CAN (with the attention's own residual) is one compressed sub-layer, {_MERGED}",
    "can_nosplit": f"CAN (one head over its 4d-wide values) is one compressed sub-layer, {_MERGED}",
    "aan": "the Average Attention Network's cumulative average in place of self-attention has no CTranslate2 layer",
    "san": "the Sharing Attention Network reuses attention maps across layers, which CTranslate2 cannot express",
    "mixed": "a decoder of several layer kinds has no CTranslate2 counterpart",
}


def export_refusal(kind: str) -> str | None:
    """Why a model of decoder kind ``kind`` cannot be exported, in one line; None when it can."""
    if kind == "standard":
        return None
    reason = UNSUPPORTED.get(kind, "CTranslate2 runs standard Transformer decoders only")
    return (
        f"decoder_kind={kind!r} cannot be exported to CTranslate2: {reason}; the standard decoders export "
        "(baseline, balanced, depth-*)"
    )


def token_names(size: int, vocab: Vocabulary | None = None) -> list[str]:
    """One distinct name per id: specials, then pieces (or ``t<id>``)."""
    names = [vocab.sp.id_to_piece(i) if vocab else f"t{i}" for i in range(size)]
    for i, name in SPECIALS.items():
        names[i] = name
    return names


def ctranslate2_installed() -> bool:
    """Whether the optional reference engine can be imported (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("ctranslate2") is not None


def _np(t: Tensor):
    return t.detach().float().cpu().numpy()


def _linear(spec, linear: torch.nn.Linear) -> None:
    spec.weight = _np(linear.weight)
    spec.bias = _np(linear.bias)


def _norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _np(norm.weight), _np(norm.bias)


def export_ctranslate2(model: Seq2Seq, output_dir: str | os.PathLike, vocab: Vocabulary | None = None) -> Path:
    """Write a CTranslate2 model directory for a ``standard``-decoder model; returns its path."""
    import ctranslate2.specs.transformer_spec as ts

    cfg = model.cfg
    refusal = export_refusal(cfg.decoder_kind)
    if refusal:
        raise ValueError(refusal)
    if vocab is not None and vocab.size != cfg.vocab_size:
        raise ValueError(f"{vocab.source}: {vocab.size} pieces but the model has vocab_size={cfg.vocab_size}")
    spec = ts.TransformerSpec.from_config((cfg.enc_layers, cfg.dec_layers), cfg.heads, pre_norm=True)
    spec.config.layer_norm_epsilon = 1e-5
    spec.config.decoder_start_token = SPECIALS[cfg.bos_id]
    spec.config.add_source_eos = True  # canlib's encoder reads each source with its EOS
    embed = _np(model.embed.weight)
    positions = _np(model.positions)
    for stack in (spec.encoder, spec.decoder):
        stack.scale_embeddings = True  # times sqrt(d), as Seq2Seq.embed_tokens
        stack.position_encodings.encodings = positions
    spec.encoder.embeddings[0].weight = embed
    spec.decoder.embeddings.weight = embed
    spec.decoder.projection.weight = embed
    decoder = list(zip(spec.decoder.layer, model.decoder_layers))
    for layer_spec, layer in [*zip(spec.encoder.layer, model.encoder_layers), *decoder]:  # both stacks' sub-layers
        _norm(layer_spec.self_attention.layer_norm, layer.self_norm)
        _linear(layer_spec.self_attention.linear[0], layer.self_attn.qkv)
        _linear(layer_spec.self_attention.linear[1], layer.self_attn.out)
        _norm(layer_spec.ffn.layer_norm, layer.ffn_norm)
        _linear(layer_spec.ffn.linear_0, layer.ffn.w1)
        _linear(layer_spec.ffn.linear_1, layer.ffn.w2)
    for layer_spec, layer in decoder:  # and the decoder's cross-attention
        _norm(layer_spec.attention.layer_norm, layer.cross_norm)
        _linear(layer_spec.attention.linear[0], layer.cross_attn.q)
        _linear(layer_spec.attention.linear[1], layer.cross_attn.kv)
        _linear(layer_spec.attention.linear[2], layer.cross_attn.out)
    _norm(spec.encoder.layer_norm, model.encoder_norm)
    _norm(spec.decoder.layer_norm, model.decoder_norm)
    names = token_names(cfg.vocab_size, vocab)
    spec.register_source_vocabulary(names)
    spec.register_target_vocabulary(names)
    spec.validate()
    spec.optimize(quantization="float32")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    spec.save(str(output_dir))
    return output_dir


class CT2Translator:
    """A CTranslate2 translator over canlib ids, with canlib's length limits.

    Scores follow CTranslate2's conventions: banned tokens are masked before the softmax, so
    ``SearchSettings(renormalize=True)`` gives the canlib search that matches it (:mod:`canlib.decoding.search`).
    """

    def __init__(
        self,
        model_dir: str | os.PathLike,
        names: list[str],
        device: str = "cpu",
        compute_type: str = "float32",
        threads: int = 0,
    ) -> None:
        import ctranslate2

        self.names = names
        self.ids = {name: i for i, name in enumerate(names)}
        self.translator = ctranslate2.Translator(
            str(model_dir), device=device, compute_type=compute_type, intra_threads=threads, inter_threads=1
        )
        config = Path(model_dir) / "config.json"
        # a model exported before it said add_source_eos gets the EOS here
        self.eos = [] if config.is_file() and json.loads(config.read_text()).get("add_source_eos") else [SPECIALS[3]]

    def translate(
        self,
        sources: list[list[int]],
        beam: int = 4,
        len_penalty: float = 1.0,
        max_len_a: float = 1.2,
        max_len_b: float = 10,
        forced_length: int | None = None,
        max_len: int | None = None,
    ) -> list[list[int]]:
        """Best output ids (no BOS/EOS) per source id list (each given without its EOS).

        ``forced_length=N`` sets CTranslate2's min and max decoding length to N (EOS cannot
        come earlier, and decoding stops there), as canlib's forced length does. Otherwise at most
        floor(max_len_a * (longest source + EOS) + max_len_b) tokens, and fewer than the model's ``max_len``.
        """
        batch = [[self.names[i] for i in ids] + self.eos for ids in sources]
        if forced_length is not None:
            lengths = dict(min_decoding_length=forced_length, max_decoding_length=forced_length)
        else:
            longest = max(len(ids) + 1 for ids in sources)
            most = max(int(math.floor(max_len_a * longest + max_len_b)), 1)
            lengths = dict(max_decoding_length=min(most, max_len - 1) if max_len else most, min_decoding_length=1)
        results = self.translator.translate_batch(
            batch,
            beam_size=beam,
            length_penalty=len_penalty,
            return_scores=True,
            suppress_sequences=[[SPECIALS[0]], [SPECIALS[2]]],
            **lengths,  # canlib never emits PAD or BOS
        )
        return [[self.ids[name] for name in r.hypotheses[0]] for r in results]

    def translate_ids(
        self,
        vocab: Vocabulary,
        ids: list[list[int]],
        beam: int = 4,
        batch_size: int = 32,
        progress: bool = False,
        max_len: int | None = None,
        **limits: float,
    ) -> list[str]:
        """``canlib translate``'s outputs, from CTranslate2: detokenized translations of tokenized sentences in
        order. Each batch holds sentences of one source length, since CTranslate2's length limit is one per batch
        and canlib's one per sentence; empty sentences give empty outputs. ``limits``: len_penalty, max_len_a,
        max_len_b."""
        outputs = [""] * len(ids)
        order = sorted((i for i, x in enumerate(ids) if x), key=lambda i: -len(ids[i]))
        bar = tqdm(total=len(order), unit="sent", desc="translate", disable=not progress)
        for _, same_length in itertools.groupby(order, key=lambda i: len(ids[i])):
            group = list(same_length)
            for start in range(0, len(group), batch_size):
                chunk = group[start : start + batch_size]
                found = self.translate([ids[i] for i in chunk], beam=beam, max_len=max_len, **limits)
                for i, tokens in zip(chunk, found):
                    outputs[i] = vocab.decode(tokens)
                bar.update(len(chunk))
        bar.close()
        return outputs


__all__ = ["export_ctranslate2", "export_refusal", "CT2Translator", "token_names", "ctranslate2_installed"]
