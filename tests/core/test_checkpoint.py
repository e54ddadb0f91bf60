"""Checkpoints: atomic, weights_only loading, clear errors on corruption and mismatch."""

from __future__ import annotations

import pytest
import torch
from conftest import small_model

from canlib import CheckpointError, load_model, save_model


def test_round_trip_restores_config_and_weights(tmp_path):
    model = small_model("can")
    save_model(model, tmp_path / "m.pt", vocab_id="spm-sha256:abc")
    loaded = load_model(tmp_path / "m.pt", expected_vocab_id="spm-sha256:abc")
    assert loaded.cfg == model.cfg
    saved, back = model.state_dict(), loaded.state_dict()
    assert list(back) == list(saved)  # no parameter or buffer missing, added or renamed
    for k in saved:
        assert torch.equal(saved[k], back[k]), k


def test_checkpoint_loads_with_weights_only(tmp_path):
    save_model(small_model("can"), tmp_path / "m.pt")
    torch.load(tmp_path / "m.pt", weights_only=True)  # raises if anything but tensors/primitives


def test_truncated_checkpoint_is_a_clear_error(tmp_path):
    save_model(small_model("can"), tmp_path / "m.pt")
    data = (tmp_path / "m.pt").read_bytes()
    (tmp_path / "m.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="m.pt: not a readable canlib checkpoint"):
        load_model(tmp_path / "m.pt")


def test_pickled_object_is_refused(tmp_path):
    import argparse  # any non-tensor class: unpickling it would run arbitrary code paths

    torch.save({"format_version": 1, "obj": argparse.Namespace(a=1)}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match="evil.pt"):
        load_model(tmp_path / "evil.pt")


def test_vocabulary_mismatch_is_refused(tmp_path):
    save_model(small_model("can"), tmp_path / "m.pt", vocab_id="spm-sha256:aaa")
    with pytest.raises(CheckpointError, match="vocabulary"):
        load_model(tmp_path / "m.pt", expected_vocab_id="spm-sha256:bbb")


def test_config_mismatch_names_the_field(tmp_path):
    model = small_model("can")
    save_model(model, tmp_path / "m.pt")
    with pytest.raises(CheckpointError, match="decoder_kind"):
        load_model(tmp_path / "m.pt", expected_config=model.cfg.replace(decoder_kind="standard"))


def test_missing_file_is_named(tmp_path):
    with pytest.raises(CheckpointError, match="nothing.pt: no such checkpoint"):
        load_model(tmp_path / "nothing.pt")


def test_failed_write_leaves_previous_file_intact(tmp_path, monkeypatch):
    target = tmp_path / "m.pt"
    save_model(small_model("can"), target)
    before = target.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(OSError):
        save_model(small_model("standard"), target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.pt"]
