"""The decoding chapter's numbers: from the stored operator counts and the models' own caches."""

from __future__ import annotations

import json

import pytest

from _code import decoding, speed_frames
from canlib.io import results_dir
from canlib.model.config import preset
from canlib.model.seq2seq import Seq2Seq


def test_values_quote_the_stored_counts_and_the_cache_widths_of_the_configs():
    raw = json.loads((results_dir() / "cpu" / "ops.json").read_text())["result"]["systems"]
    values = decoding.values()
    for system in ("balanced", "can", "baseline", "san", "aan"):
        assert values[f"{system}_kernels"] == raw[system]["cuda"]["step"]["kernel_operators"]
        assert values[f"{system}_layer_kernels"] == raw[system]["cuda"]["per_layer"]["kernel_operators"]
        assert values[f"{system}_search_kernels"] == raw[system]["cuda"]["search"]["kernel_operators"]
        assert values[f"{system}_fused_kernels"] == raw[system]["cuda-fused"]["step"]["kernel_operators"]
    cfg = preset("tiny-can")
    assert values["balanced_layer_width_d"] == 2  # a key and a value, d wide each
    assert values["can_layer_width_d"] == (cfg.d_model + cfg.ffn_dim) / cfg.d_model  # d-wide keys, 4d-wide values
    assert values["balanced_width_d"] == 2 * 2 and values["can_width_d"] == 2 * 5  # two decoder layers each
    assert values["can_lead"] == 5  # the chapter's five source tokens, in front of every CAN row's prefix
    # in d^2, a standard layer's step: [Wq|Wk|Wv], Wo, the cross-attention's Wq and Wo, W1 and W2 (4d wide)
    assert values["balanced_layer_weights_d2"] == 3 + 1 + 1 + 1 + 4 + 4
    # AAN's: its average's FFN (W1, W2), the 2d x 2d gate, then cross-attention's Wq and Wo, W1 and W2
    assert values["aan_layer_weights_d2"] == 4 + 4 + 4 + 1 + 1 + 4 + 4
    assert values["balanced_floor_us"] == pytest.approx(values["balanced_step_mb"] * 1e6 / 3.35e12 * 1e6)


def test_the_toy_step_keeps_the_best_candidates_and_points_at_their_beams():
    search = decoding.toy_search(steps=3, beam=2)
    decoding.step_table(search, 0)
    candidates, kept = decoding.step_table(search, 1)
    best = candidates.head(2)  # the table is sorted best first: the search must keep exactly these
    assert kept["score"].tolist() == best["score"].tolist()
    assert kept["word"].tolist() == best["next word"].tolist()
    assert kept["continues beam"].tolist() == best["beam"].tolist()


def test_the_first_exercise_follows_the_tables_back_pointers_to_the_searchs_hypotheses():
    """The exercise done by hand from the chapter's tables: from each beam kept at the last step, read its word and
    jump to the beam it continues one step earlier; the sentences read backwards are ``result().hypotheses``."""
    search = decoding.toy_search(steps=6, beam=2)  # six words: beams swap rows at step 3 and one is dropped at step 5
    kept = [decoding.step_table(search, t)[1] for t in range(6)]
    by_hand = []
    for beam, score in enumerate(kept[-1]["score"]):
        words = []
        for table in reversed(kept):
            words.append(table["word"][beam])
            beam = table["continues beam"][beam]
        by_hand.append((words[::-1], score))
    hypotheses = search.result().hypotheses[0]
    assert sorted(by_hand) == sorted(
        ([decoding.TOY_WORDS[w] for w in words], round(6 * score, 3)) for words, score in hypotheses
    )  # length penalty 1: the score over 6 words


def test_decode_step_bytes_count_target_side_weights_only():
    d, v = 512, 32000
    balanced = speed_frames.bytes_per_decode_step(Seq2Seq(preset("balanced", vocab_size=v)))
    can = speed_frames.bytes_per_decode_step(Seq2Seq(preset("can", vocab_size=v)))
    assert balanced["output"] == can["output"] == 4 * v * d
    # both decoder layer kinds read about 14 d^2 weights per step (biases and norms aside)
    for b in (balanced, can):
        assert abs(b["layers"] / 4 / 2 - 14 * d * d) / (14 * d * d) < 0.01
    baseline = speed_frames.bytes_per_decode_step(Seq2Seq(preset("baseline", vocab_size=v)))
    assert baseline["layers"] == 3 * balanced["layers"]


def test_decoding_costs_give_can_the_same_weights_and_two_and_a_half_times_the_cache():
    standard, can = speed_frames.decoding_costs("balanced"), speed_frames.decoding_costs("can")
    assert standard["weights_per_step_d2"] == can["weights_per_step_d2"] == 14
    assert (
        speed_frames.decoding_costs("can_attn")["weights_per_step_d2"] == 12
        and speed_frames.decoding_costs("can_ffn")["weights_per_step_d2"] == 13
    )
    assert (standard["cache_per_target_position_d"], can["cache_per_target_position_d"]) == (
        2,
        5,
    )  # key + value; key + 4d value
    assert (standard["cache_per_source_position_d"], can["cache_per_source_position_d"]) == (2, 5)
