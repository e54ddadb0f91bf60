"""The study layer under the book: tiny studies are computed once and cached; larger scales only load."""
from __future__ import annotations

import pytest

from canlib.studies import experiments as ex
from canlib.cli import main


def test_tiny_study_is_computed_once_and_carries_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"value": 42}

    first, prov = ex._study("demo", "tiny", {"knob": 1}, compute)
    again, _ = ex._study("demo", "tiny", {"knob": 1}, compute)
    other, _ = ex._study("demo", "tiny", {"knob": 2}, compute)
    assert first == again == other == {"value": 42}
    assert len(calls) == 2  # a new config is a new study; the same one is reused
    assert prov["scale"] == "tiny" and prov["commit"] and prov["config"]["knob"] == 1


def test_small_scale_without_stored_result_names_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("CANLIB_RESULTS_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="canlib experiment --scale small"):
        ex._study("similarity", "small", {}, lambda: {"never": "computed"})


def test_unknown_scale_is_refused():
    with pytest.raises(ValueError, match="SCALE='huge'"):
        ex.scale_spec("huge")


def test_experiment_command_refuses_unknown_systems(capsys):
    assert main(["experiment", "--scale", "tiny", "--systems", "transformer-big"]) == 2
    assert "transformer-big" in capsys.readouterr().err
