"""The operator counter and the operator-count study: counted, never timed."""
from __future__ import annotations

import pytest
import torch

from canlib.bench.ops import OpCounter, PATHS, ops_study, search_step_ops
from canlib.bench.speed import PARTS, breakdown_gap
from canlib.model import Seq2Seq
from canlib.model.attention import SourceMemory, joint_attention
from canlib.model.config import ALL_SYSTEMS, preset
from canlib.studies.results import check_provenance


def test_op_counter_counts_a_hand_written_sequence():
    a = torch.arange(12.0).view(3, 4)
    with OpCounter() as ops:
        b = a + 1  # add: a kernel
        c = b.view(12)  # view: no kernel
        d = c.sum()  # sum: a kernel
        d.item()  # a host read
        torch.nonzero(c > 5)  # gt: a kernel; nonzero: a kernel whose size depends on the data (a sync on a GPU)
    assert dict(ops.by_name) == {"aten.add": 1, "aten.view": 1, "aten.sum": 1, "aten._local_scalar_dense": 1,
                                 "aten.gt": 1, "aten.nonzero": 1}
    assert (ops.total, ops.kernels, ops.host_syncs) == (6, 4, 2)


def _model(system: str, path: str = "cuda") -> Seq2Seq:
    device, dtype = PATHS[path]
    torch.manual_seed(0)
    with torch.device(device):
        model = Seq2Seq(preset(f"small-{system}"))
    return model.to(dtype).eval()


def test_a_can_layer_step_launches_at_most_seven_tenths_of_a_standard_layers_kernels():
    standard = search_step_ops(_model("balanced"))["per_layer"]["kernel_operators"]
    can = search_step_ops(_model("can"))["per_layer"]["kernel_operators"]
    assert can <= 0.7 * standard, (can, standard)


@pytest.mark.parametrize("system", ALL_SYSTEMS)
def test_a_search_step_on_the_gpu_path_never_reads_back_to_the_host(system):
    counts = search_step_ops(_model(system))
    assert counts["step"]["host_syncs"] == 0, counts["by_name"]


def test_the_step_splits_into_decoder_output_and_search_bookkeeping():
    counts = search_step_ops(_model("balanced"))
    by_name = counts["by_name"]
    # the search's own operators: the best of each piece of a row of beam x V scores, then the best of those
    # (two top-k's), no softmax (the output's log-softmax is counted there)
    assert by_name["aten.topk"] == 2 and by_name["aten._log_softmax"] == 1
    assert counts["decoder"]["kernel_operators"] == 2 * counts["per_layer"]["kernel_operators"] + counts["embedding"]["kernel_operators"]
    whole = counts["step"]["operators"]
    assert whole == counts["decoder"]["operators"] + counts["output"]["operators"] + counts["search"]["operators"]


def test_ops_study_records_where_it_was_counted():
    result = ops_study(["can"], scale="tiny", vocab_size=50, paths=("cuda",))
    assert set(result["result"]["systems"]["can"]) == {"cuda"}
    check_provenance(result["provenance"], "ops_study")
    assert result["provenance"]["config"]["paths"] == {"cuda": {"device": "meta", "dtype": "float16"}}
    with pytest.raises(ValueError, match="paths"):
        ops_study(["can"], scale="tiny", paths=("tpu",))


@pytest.mark.parametrize("preset_name", ["tiny-can", "small-can", "can"])
def test_can_decode_step_scores_equal_the_scores_scaled_after_the_product(preset_name):
    cfg = preset(preset_name)
    h, w, f = cfg.heads, cfg.d_model // cfg.heads, cfg.ffn_dim // cfg.heads
    g = torch.Generator().manual_seed(1)
    beam, sentences, t, src_len = 4, 2, 5, 7
    rows = beam * sentences
    q = torch.randn(rows, h, 1, w, generator=g)
    self_k, self_v = torch.randn(rows, h, t, w, generator=g), torch.randn(rows, h, t, f, generator=g)
    src = {"k": torch.randn(sentences, h, src_len, w, generator=g), "v": torch.randn(sentences, h, src_len, f, generator=g)}
    pad = torch.zeros(sentences, src_len, dtype=torch.bool)
    pad[1, -2:] = True
    memory = SourceMemory(torch.zeros(sentences, src_len, cfg.d_model), pad, beam)
    out = joint_attention(q, self_k, self_v, None, memory, src, torch.nn.Identity())
    # reference: every row against its own sentence's source, scores scaled after the product
    src_k, src_v = src["k"].repeat_interleave(beam, 0), src["v"].repeat_interleave(beam, 0)
    bias = torch.zeros(rows, 1, 1, src_len).masked_fill(pad.repeat_interleave(beam, 0)[:, None, None, :], float("-inf"))
    scores = torch.cat([(q @ self_k.transpose(-1, -2)) * w**-0.5, (q @ src_k.transpose(-1, -2)) * w**-0.5 + bias], dim=-1)
    probs = torch.softmax(scores, dim=-1)
    expected = probs[..., :t] @ self_v + probs[..., t:] @ src_v
    assert torch.allclose(out, expected, rtol=0, atol=1e-6)
    # scaling q before the product is exact (the scale is a power of two): the same scores, bit for bit
    assert torch.equal(memory.scores(q * w**-0.5, src["k"], prescaled=True), memory.scores(q, src["k"]))
    assert torch.equal((q * w**-0.5) @ self_k.transpose(-1, -2), (q @ self_k.transpose(-1, -2)) * w**-0.5)


def test_breakdown_gap_is_the_parts_against_the_untimed_search():
    row = {"encode_ms": 10.0, "layers_ms": 60.0, "output_ms": 10.0, "search_ms": 30.0, "end_to_end_ms": 100.0}
    assert PARTS == ("encode", "layers", "output", "search")
    assert breakdown_gap(row) == pytest.approx(0.10)
    assert breakdown_gap(dict(row, end_to_end_ms=110.0)) == pytest.approx(0.0)
