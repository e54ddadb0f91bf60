"""From a Transformer decoder layer to CAN's single sub-layer, step by step (paper Eqs. 6-13).

Every step of the paper's derivation is a function here that runs on real tensors, so
each claimed identity can be checked to 1e-10 in float64 and each assumption measured.

Conventions. The paper writes row vectors, ``y = x W + b`` with ``W`` of shape (in, out);
``nn.Linear`` stores (out, in). :class:`Affine` holds the paper's orientation. ``x`` is the
layer input (B, T, d), ``h`` the final-normalised encoder output H (B, S, d), ``pad`` the
(B, S) source padding mask (``True`` = padding) or ``None``. Heads split every d-wide projection
into h slices of width d/h; scores are scaled by sqrt(d/h) (the paper writes sqrt(d)).

Pre-norm. The paper omits LayerNorm; canlib's layers have one per sub-layer:
``Self`` reads LN_s(x), ``Cross`` reads LN_c(x'), the FFN reads LN_f(x''). A LayerNorm is
``n(x) * g + beta`` with ``n`` the plain normalisation, so its gain and bias fold into
the next linear map (:func:`fold`) and one plain ``n(x)`` can feed every projection.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from canlib.model.attention import merge_heads, split_heads
from canlib.model.layers import StandardDecoderLayer


@dataclass
class Affine:
    """A linear map in the paper's row-vector convention: ``x W + b``, W of shape (in, out)."""

    W: Tensor
    b: Tensor

    def __call__(self, x: Tensor) -> Tensor:
        return x @ self.W + self.b

    def then(self, M: Tensor) -> Affine:
        """The map ``(x W + b) M``: a product of learnable matrices is one learnable matrix."""
        return Affine(self.W @ M, self.b @ M)

    def __rmul__(self, c: float) -> Affine:
        """``c * f``: the map scaled by the number c."""
        return Affine(c * self.W, c * self.b)


@dataclass
class Norm:
    """A LayerNorm's gain and bias: ``LN(x) = n(x) * g + beta``."""

    g: Tensor
    beta: Tensor
    eps: float

    def __call__(self, x: Tensor) -> Tensor:
        return normalize(x, self.eps) * self.g + self.beta


def normalize(x: Tensor, eps: float) -> Tensor:
    """n(x): LayerNorm without gain or bias."""
    return F.layer_norm(x, x.shape[-1:], eps=eps)


def fold(norm: Norm, f: Affine) -> Affine:
    """The map that gives ``f(LN(x))`` from ``n(x)`` (exact): W' = diag(g) W, b' = beta W + b."""
    return Affine(norm.g[:, None] * f.W, norm.beta @ f.W + f.b)


def _affines(linear: nn.Linear, parts: int, dtype: torch.dtype) -> list[Affine]:
    """The ``parts`` equal row blocks of a (fused) nn.Linear, each in row-vector form."""
    Ws, bs = (t.detach().to(dtype).chunk(parts, dim=0) for t in (linear.weight, linear.bias))
    return [Affine(W.T.contiguous(), b.clone()) for W, b in zip(Ws, bs)]


def _norm(ln: nn.LayerNorm, dtype: torch.dtype) -> Norm:
    return Norm(ln.weight.detach().to(dtype), ln.bias.detach().to(dtype), ln.eps)


@dataclass
class StandardWeights:
    """One StandardDecoderLayer's weights (1 = self-attention, 2 = cross-attention)."""

    heads: int
    norm_s: Norm
    norm_c: Norm
    norm_f: Norm
    q1: Affine
    k1: Affine
    v1: Affine
    o1: Affine
    q2: Affine
    k2: Affine
    v2: Affine
    o2: Affine
    w1: Affine
    w2: Affine

    @property
    def eps(self) -> float:
        return self.norm_s.eps

    @property
    def width(self) -> int:
        """Per-head query/key width d/h of the original layer (sets the score scale)."""
        return self.q1.W.size(1) // self.heads


def standard_weights(layer: StandardDecoderLayer, dtype: torch.dtype = torch.float64) -> StandardWeights:
    """Copy a StandardDecoderLayer's weights (qkv = [Wq1|Wk1|Wv1], kv = [Wk2|Wv2])."""
    if not isinstance(layer, StandardDecoderLayer):
        raise ValueError(f"expected a StandardDecoderLayer, got {type(layer).__name__}")
    eps = {layer.self_norm.eps, layer.cross_norm.eps, layer.ffn_norm.eps}
    if len(eps) != 1:
        raise ValueError(f"the layer's three LayerNorms use different eps {sorted(eps)}; one n(x) cannot feed them all")
    sa, ca = layer.self_attn, layer.cross_attn
    q1, k1, v1 = _affines(sa.qkv, 3, dtype)
    k2, v2 = _affines(ca.kv, 2, dtype)
    o1, q2, o2, w1, w2 = (_affines(m, 1, dtype)[0] for m in (sa.out, ca.q, ca.out, layer.ffn.w1, layer.ffn.w2))
    norm_s, norm_c, norm_f = (_norm(n, dtype) for n in (layer.self_norm, layer.cross_norm, layer.ffn_norm))
    return StandardWeights(sa.heads, norm_s, norm_c, norm_f, q1, k1, v1, o1, q2, k2, v2, o2, w1, w2)


# ---------------------------------------------------------------------------
# Attention pieces (per head, no dropout: the derivation is about the function)


def causal_bias(length: int, like: Tensor) -> Tensor:
    """(T, T) additive bias, -inf where a query would see the future."""
    return torch.full((length, length), float("-inf"), dtype=like.dtype, device=like.device).triu(1)


def source_bias(pad: Tensor | None, like: Tensor) -> Tensor | float:
    """(B, 1, 1, S) additive bias, -inf on padded source positions (0 without a mask)."""
    if pad is None:
        return 0.0
    return torch.zeros(pad.shape, dtype=like.dtype, device=like.device).masked_fill(pad, float("-inf"))[:, None, None]


def head_scores(q: Tensor, k: Tensor, heads: int, width: int) -> Tensor:
    """(B, h, T, L) scores q^i k^i^T / sqrt(width) of (B, T, h*w) queries and (B, L, h*w) keys."""
    return split_heads(q, heads) @ split_heads(k, heads).transpose(-1, -2) * width**-0.5


def head_value_map(v: Affine, out: Tensor, heads: int) -> Affine:
    """Head i's value map with the output map absorbed, ``Wv^i Out^i``, the h maps side by side.

    ``out`` (d, o) is the map after the heads are concatenated (Wo, or Wo W1); its row
    block i only ever sees head i, so ``concat_i(A^i V^i) Out = sum_i A^i (V^i Out^i)``.
    Result: (in, h*o), head i in column block i.
    """
    d_in, w, o = v.W.size(0), v.W.size(1) // heads, out.size(1)
    blocks = out.view(heads, w, o)
    W = torch.einsum("dhw,hwo->dho", v.W.view(d_in, heads, w), blocks).reshape(d_in, heads * o)
    b = torch.einsum("hw,hwo->ho", v.b.view(heads, w), blocks).reshape(heads * o)
    return Affine(W, b)


# ---------------------------------------------------------------------------
# The standard layer, and the residual decomposition (Huang et al. 2016)


def self_attention(w: StandardWeights, x: Tensor) -> Tensor:
    """Self(X): Eqs. 1-2 plus the output map, on LN_s(x)."""
    z = w.norm_s(x)
    probs = torch.softmax(head_scores(w.q1(z), w.k1(z), w.heads, w.width) + causal_bias(x.size(1), x), dim=-1)
    return w.o1(merge_heads(probs @ split_heads(w.v1(z), w.heads)))


def cross_attention(w: StandardWeights, x: Tensor, h: Tensor, pad: Tensor | None) -> Tensor:
    """Cross(X, H): Eqs. 3-4 plus the output map, on LN_c(x)."""
    z = w.norm_c(x)
    probs = torch.softmax(head_scores(w.q2(z), w.k2(h), w.heads, w.width) + source_bias(pad, x), dim=-1)
    return w.o2(merge_heads(probs @ split_heads(w.v2(h), w.heads)))


def ffn(w: StandardWeights, u: Tensor) -> Tensor:
    """ReLU(u W1 + b1) W2 + b2 (Eq. 5) on an already normalised input u."""
    return w.w2(F.relu(w.w1(u)))


def residual_stream(w: StandardWeights, x: Tensor, h: Tensor, pad: Tensor | None = None) -> dict[str, Tensor]:
    """The standard layer as a sum: ``Y = X + Self(X) + Cross(X', H) + FFN(X'')`` (exact).

    ``X' = X + Self(X)`` is what cross-attention reads and ``X'' = X' + Cross(X', H)``
    what the FFN reads, each through its own LayerNorm.
    """
    s = self_attention(w, x)
    x1 = x + s
    c = cross_attention(w, x1, h, pad)
    x2 = x1 + c
    f = ffn(w, w.norm_f(x2))
    return {"x": x, "self": s, "x_cross": x1, "cross": c, "x_ffn": x2, "ffn": f, "y": x + s + c + f}


def cosine(a: Tensor, b: Tensor) -> float:
    """Mean over positions of the cosine similarity of feature vectors (the paper's Fig. 2 measure)."""
    return F.cosine_similarity(a.flatten(0, -2), b.flatten(0, -2), dim=-1).mean().item()


def relative_error(approx: Tensor, exact: Tensor) -> float:
    """||approx - exact|| / ||exact|| (Frobenius)."""
    return ((approx - exact).norm() / exact.norm()).item()


def identical_input_gap(w: StandardWeights, x: Tensor, h: Tensor, pad: Tensor | None = None) -> dict[str, float]:
    """How far the assumption X' := X (Eq. 6) is from the truth, at this layer.

    ``cos_input`` compares X and X' (as the paper's Fig. 2), ``cos_normed`` the
    LayerNorm'd inputs that cross-attention really reads, ``cross_rel_err`` compares
    Cross(X, H) with Cross(X', H).
    """
    x1 = x + self_attention(w, x)
    exact = cross_attention(w, x1, h, pad)
    return {
        "cos_input": cosine(x, x1),
        "cos_normed": cosine(w.norm_c(x), w.norm_c(x1)),
        "cross_rel_err": relative_error(cross_attention(w, x, h, pad), exact),
    }


# ---------------------------------------------------------------------------
# Eqs. 6-8: parallel attentions, then one product over concatenated values


def parallel_layer(
    w: StandardWeights, x: Tensor, h: Tensor, pad: Tensor | None = None, residual: bool = True
) -> Tensor:
    """Eq. 6 with X' := X: ``X + Self(X) + Cross(X, H) + FFN(LN_f(X + S + C))``.

    ``residual=False`` drops the direct ``S + C`` term, which CAN does: there the
    attention output reaches Y only through the FFN.
    """
    sc = self_attention(w, x) + cross_attention(w, x, h, pad)
    return x + sc * residual + ffn(w, w.norm_f(x + sc))


def two_softmax(s_x: Tensor, s_h: Tensor) -> Tensor:
    """Eqs. 7 and 10: A = [A_x, A_h], each block its own distribution (rows sum to 2)."""
    return torch.cat([torch.softmax(s_x, dim=-1), torch.softmax(s_h, dim=-1)], dim=-1)


def one_softmax(s_x: Tensor, s_h: Tensor) -> Tensor:
    """Eq. 11: one distribution over [target prefix ; source] (rows sum to 1)."""
    return torch.softmax(torch.cat([s_x, s_h], dim=-1), dim=-1)


def self_share(s_x: Tensor, s_h: Tensor) -> Tensor:
    """alpha, the mass one softmax gives the target prefix: ``one = [alpha A_x, (1 - alpha) A_h]``."""
    return torch.sigmoid(torch.logsumexp(s_x, dim=-1) - torch.logsumexp(s_h, dim=-1))[..., None]


def self_cross_values(w: StandardWeights, z: Tensor, h: Tensor, out_x: Tensor, out_h: Tensor) -> Tensor:
    """[z W_v1 Out_1 ; H W_v2 Out_2] per head: (B, h, T+S, o), the maps after the heads absorbed into the value maps
    of n(X) and of H (``Wv^i Out^i``, see :func:`head_value_map`): ``Out = Wo`` for Eq. 8, ``Wo W1`` for the exact
    (wide) merge of Eq. 13."""
    vx, vh = head_value_map(fold(w.norm_s, w.v1), out_x, w.heads), head_value_map(w.v2, out_h, w.heads)
    return torch.cat([split_heads(vx(z), w.heads), split_heads(vh(h), w.heads)], dim=-2)


# ---------------------------------------------------------------------------
# Eq. 9: one query for both attentions


def per_head(a: Affine, heads: int) -> Tensor:
    """``[W; b]`` (bias as an extra input row) split by output columns into heads: (in+1, h, out/h)."""
    return torch.cat([a.W, a.b[None]]).view(a.W.size(0) + 1, heads, -1)


def interleave_heads(a: Affine, b: Affine, heads: int) -> Affine:
    """Head i of the result is [a^i | b^i] (width 2w): two query maps side by side, per head."""

    def cat(x: Tensor, y: Tensor) -> Tensor:
        lead = x.shape[:-1]
        return torch.stack([x.view(*lead, heads, -1), y.view(*lead, heads, -1)], dim=-2).reshape(*lead, -1)

    return Affine(cat(a.W, b.W), cat(a.b, b.b))


def query_key_maps(w: StandardWeights) -> tuple[Affine, Affine, Affine, Affine]:
    """W_q1, W_k1 and W_q2 as maps of n(X) (LayerNorm folded in, X' := X), and W_k2 of H."""
    return fold(w.norm_s, w.q1), fold(w.norm_s, w.k1), fold(w.norm_c, w.q2), w.k2


def concat_query(w: StandardWeights) -> tuple[Affine, Affine, Affine]:
    """Eq. 9 made exact by width: maps of n(X) to the query ``[q1^i | q2^i]`` (2d/h per head) and to the
    prefix keys ``[k1^i | 0]``, and of H to the source keys ``[0 | k2^i]``: each query half meets only its keys."""
    q1, k1, q2, k2 = query_key_maps(w)
    zero = lambda a: Affine(torch.zeros_like(a.W), torch.zeros_like(a.b))  # noqa: E731
    return (
        interleave_heads(q1, q2, w.heads),
        interleave_heads(k1, zero(k1), w.heads),
        interleave_heads(zero(k2), k2, w.heads),
    )


def shared_query(q1: Affine, k1: Affine, q2: Affine, k2: Affine, heads: int, method: str = "gram") -> Affine:
    """A d/h-per-head query map W_q to replace W_q1 and W_q2 (an approximation).

    ``mean``: (W_q1 + W_q2) / 2. ``gram``: per head the least-squares fit of both score
    matrices, argmin ||(Wq - Wq1) Wk1^T||^2 + ||(Wq - Wq2) Wk2^T||^2, which is
    ``(Wq1 G1 + Wq2 G2)(G1 + G2)^-1`` with ``G = Wk^T Wk``; the query bias is fitted the
    same way (the key bias adds a per-query constant that softmax ignores).
    """
    if method == "mean":
        return Affine((q1.W + q2.W) / 2, (q1.b + q2.b) / 2)
    if method != "gram":
        raise ValueError(f"shared_query: method={method!r}; choose 'gram' or 'mean'")
    Q1, Q2 = (per_head(q, heads).transpose(0, 1) for q in (q1, q2))  # (h, d+1, w): [Wq^i; bq^i]
    K1, K2 = (per_head(k, heads)[:-1].transpose(0, 1) for k in (k1, k2))  # (h, d, w): Wk^i
    G1, G2 = K1.transpose(1, 2) @ K1, K2.transpose(1, 2) @ K2
    Q = torch.linalg.solve(G1 + G2, (Q1 @ G1 + Q2 @ G2).transpose(1, 2)).transpose(1, 2)  # G symmetric
    Q = Q.transpose(0, 1).flatten(1)  # (d+1, h*w)
    return Affine(Q[:-1].contiguous(), Q[-1].contiguous())


def absorbed_scores(q: Affine, k: Affine, zq: Tensor, zk: Tensor, heads: int, width: int) -> Tensor:
    """Scores with ``W_q W_k^T`` absorbed into the keys: the query is [z, 1] itself (exact).

    ``(z Wq^i + bq^i)(z' Wk^i + bk^i)^T = [z, 1] M^i [z', 1]^T`` with
    ``M^i = [Wq^i; bq^i][Wk^i; bk^i]^T``: every head and both attentions read the same
    query, paid for with (d+1)-wide keys per head instead of d/h.
    """
    ones = lambda z: torch.cat([z, z.new_ones(*z.shape[:-1], 1)], dim=-1)  # noqa: E731
    keys = torch.einsum("ble,ehw,fhw->bhlf", ones(zk), per_head(k, heads), per_head(q, heads))  # (B, h, L, d+1)
    return torch.einsum("btf,bhlf->bhtl", ones(zq), keys) * width**-0.5


def attention_scores(
    w: StandardWeights, z: Tensor, h: Tensor, pad: Tensor | None, query: str = "separate"
) -> tuple[Tensor, Tensor]:
    """Masked (B, h, T, T) self and (B, h, T, S) cross scores from z = n(X), under X' := X.

    ``query`` picks the query map: ``separate`` (W_q1 and W_q2, Eqs. 1 and 3), ``concat``
    (per head [Wq1^i | Wq2^i] against keys [Wk1^i | 0] and [0 | Wk2^i], exact),
    ``absorb`` (see :func:`absorbed_scores`, exact), ``gram`` or ``mean`` (one d/h-wide
    W_q, Eq. 9, approximate; see :func:`shared_query`).
    """
    q1, k1, q2, k2 = query_key_maps(w)
    heads, width = w.heads, w.width
    if query == "separate":
        s_x, s_h = head_scores(q1(z), k1(z), heads, width), head_scores(q2(z), k2(h), heads, width)
    elif query == "concat":
        q, key_x, key_h = concat_query(w)
        s_x, s_h = head_scores(q(z), key_x(z), heads, width), head_scores(q(z), key_h(h), heads, width)
    elif query == "absorb":
        s_x, s_h = absorbed_scores(q1, k1, z, z, heads, width), absorbed_scores(q2, k2, z, h, heads, width)
    else:
        q = shared_query(q1, k1, q2, k2, heads, query)(z)
        s_x, s_h = head_scores(q, k1(z), heads, width), head_scores(q, k2(h), heads, width)
    return s_x + causal_bias(z.size(1), z), s_h + source_bias(pad, z)


# ---------------------------------------------------------------------------
# Eqs. 12-13: the FFN's W1 merged into the values


def merged_ffn_reference(w: StandardWeights, x: Tensor, h: Tensor, pad: Tensor | None = None) -> Tensor:
    """What merging W1 into the values computes: ``X + FFN(LN_f(X) + Self(X) + Cross(X, H))``.

    Two assumptions beyond X' := X: the residual ``S + C`` is dropped, and the FFN reads
    ``LN_f(X) + S + C`` instead of ``LN_f(X + S + C)`` (LayerNorm is not linear, so the
    attention output must enter W1 un-normalised for W1 to reach the values).
    """
    sc = self_attention(w, x) + cross_attention(w, x, h, pad)
    return x + ffn(w, w.norm_f(x) + sc)


def merged_values(w: StandardWeights) -> tuple[Affine, Affine]:
    """Eq. 12's ``W~v1 = Wv1 Wo1 W1`` of n(X) and ``W~v2 = Wv2 Wo2 W1`` of H (d x 4d each, biases carried)."""
    return fold(w.norm_s, w.v1).then(w.o1.W @ w.w1.W), w.v2.then(w.o2.W @ w.w1.W)


def merged_hidden(w: StandardWeights) -> Affine:
    """The FFN's own product of n(X), ``LN_f(X) W1 + b1``, plus ``(bo1 + bo2) W1``: the attentions' output
    biases reach W1 unchanged, because every attention row sums to one."""
    hidden = fold(w.norm_f, w.w1)
    return Affine(hidden.W, hidden.b + (w.o1.b + w.o2.b) @ w.w1.W)


def compressed_layer(
    w: StandardWeights,
    x: Tensor,
    h: Tensor,
    pad: Tensor | None = None,
    *,
    query: str = "concat",
    softmax: str = "two",
    values: str = "wide",
    value_scale: float = 1.0,
) -> Tensor:
    """``X + ReLU(z W1 + A [z W~v1 ; H W~v2] + b1) W2 + b2`` with z = n(X) (Eq. 13).

    ``W~v = Wv Wo W1`` (Eq. 12, the paper omits Wo). ``values="wide"``: each head keeps a
    4d-wide value map ``Wv^i Wo^i W1`` and the head outputs are summed: exactly
    :func:`merged_ffn_reference` with two softmaxes and an exact ``query``.
    ``values="split"``: the paper's cheaper form, one d x 4d map ``Wv Wo W1`` cut into h
    column slices, head i mixing slice i with its own attention (exact only if all heads
    attend alike). ``softmax="one"`` is Eq. 11; ``value_scale`` multiplies the values
    (2 makes one softmax match two when the self/cross partitions are equal).
    """
    if softmax not in ("two", "one") or values not in ("wide", "split"):
        raise ValueError(
            f"compressed_layer: softmax={softmax!r} (choose 'two' or 'one'), values={values!r} "
            "(choose 'wide' or 'split')"
        )
    z = normalize(x, w.eps)
    s_x, s_h = attention_scores(w, z, h, pad, query)
    probs = two_softmax(s_x, s_h) if softmax == "two" else one_softmax(s_x, s_h)
    if values == "wide":  # head i has its own 4d-wide map Wv^i Wo^i W1; the head outputs are summed
        mixed = (probs @ self_cross_values(w, z, h, w.o1.W @ w.w1.W, w.o2.W @ w.w1.W)).sum(1)
    else:  # CAN: one d x 4d map per block, head i mixing its 4d/h-wide slice
        vx, vh = merged_values(w)
        mixed = merge_heads(probs @ split_heads(torch.cat([vx(z), vh(h)], dim=1), w.heads))
    return x + w.w2(F.relu(merged_hidden(w)(z) + value_scale * mixed))


@dataclass
class Step:
    """One stage of the derivation: its output Y and whether it equals the stage before."""

    name: str
    equation: str
    exact: bool
    y: Tensor


def compression_steps(
    w: StandardWeights, x: Tensor, h: Tensor, pad: Tensor | None = None, value_scale: float = 2.0, query: str = "gram"
) -> list[Step]:
    """Every stage from the standard layer to CAN, in the order the chapter derives them."""
    c = lambda **kw: compressed_layer(w, x, h, pad, **kw)  # noqa: E731
    one = dict(query=query, softmax="one", value_scale=value_scale)  # Eq. 11, which the last stage keeps
    return [
        Step("standard layer", "Eqs. 1-5", True, residual_stream(w, x, h, pad)["y"]),
        Step("attentions in parallel (X' = X)", "Eq. 6", False, parallel_layer(w, x, h, pad)),
        Step("attention residual dropped", "Eq. 12", False, parallel_layer(w, x, h, pad, residual=False)),
        Step("FFN reads LN(X) + S + C", "Eq. 12", False, merged_ffn_reference(w, x, h, pad)),
        Step("W1 inside 4d-wide values", "Eqs. 7-8, 12", True, c(query="separate")),
        Step("both queries side by side", "Eq. 9", True, c(query="concat")),
        Step(f"one shared query ({query})", "Eq. 9", False, c(query=query)),
        Step(f"one softmax, values x {value_scale:g}", "Eq. 11", False, c(**one)),
        # exact with one head: nothing to split
        Step("heads split the values (CAN)", "Eq. 13", w.heads == 1, c(**one, values="split")),
    ]


def concat_steps(runs: list[list[Step]]) -> list[Step]:
    """Join the stages of several runs (e.g. one per sentence, so nothing is padded) along the positions."""
    return [
        Step(s.name, s.equation, s.exact, torch.cat([r[i].y.flatten(0, 1) for r in runs])[None])
        for i, s in enumerate(runs[0])
    ]


def step_errors(steps: list[Step], x: Tensor) -> list[dict]:
    """Per stage: relative error of the layer's update Y - X against the previous stage and the standard layer.

    The update, not Y, because Y = X + ... and X dominates it.
    """
    ref = steps[0].y - x
    rows, prev = [], ref
    for s in steps:
        upd = s.y - x
        rows.append(
            {
                "step": s.name,
                "eq": s.equation,
                "exact": s.exact,
                "max_abs_vs_prev": (upd - prev).abs().max().item(),
                "rel_vs_prev": relative_error(upd, prev),
                "rel_vs_standard": relative_error(upd, ref),
                "cos_vs_standard": cosine(upd, ref),
            }
        )
        prev = upd
    return rows
