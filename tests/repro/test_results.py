"""Stored results always carry their provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.results.files import ProvenanceError, describe, load_result, provenance, save_result


def test_round_trip_keeps_result_and_provenance(tmp_path):
    prov = provenance("tiny", {"preset": "tiny-can"})
    save_result(tmp_path / "r.json", {"bleu": 1.5}, prov)
    result, back = load_result(tmp_path / "r.json")
    assert result == {"bleu": 1.5}
    assert back["commit"] and back["device"] and back["scale"] == "tiny"
    assert "scale=tiny" in describe(back)


@pytest.mark.parametrize("drop", ["commit", "date", "device", "scale", "config"])
def test_result_without_a_provenance_field_is_refused(tmp_path, drop):
    prov = provenance("tiny", {"preset": "tiny-can"})
    del prov[drop]
    (tmp_path / "r.json").write_text(json.dumps({"result": 1, "provenance": prov}))
    with pytest.raises(ProvenanceError, match=drop):
        load_result(tmp_path / "r.json")


def test_bare_number_file_is_refused(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"bleu": 27.3}))
    with pytest.raises(ProvenanceError, match="r.json"):
        load_result(tmp_path / "r.json")


def test_unknown_scale_is_refused():
    with pytest.raises(ValueError, match="scale='huge'"):
        provenance("huge", {})


BOOK_RESULTS = Path(__file__).resolve().parents[2] / "book" / "results"


@pytest.mark.parametrize("folder", ["cpu", "gpu", "small"])
def test_every_stored_result_in_the_book_has_provenance(folder):
    """The repository's stored results (not whatever CANLIB_RESULTS_DIR names): each folder the
    chapters read holds result files, and every one of them carries its provenance."""
    files = sorted((BOOK_RESULTS / folder).rglob("*.json"))
    assert files, f"no stored results in {BOOK_RESULTS / folder}"
    for path in files:
        load_result(path)  # raises ProvenanceError naming the file
