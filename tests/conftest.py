"""Shared fixtures: where the real test data and raw measurements live, deterministic torch, the small model the
unit tests build, and a toy parallel corpus.

CI (``.ci/run``) sets ``CANLIB_REQUIRE_DATA=1``: then a missing data folder or raw-measurements
folder fails the tests that need it instead of skipping them, so a CI run without its data is red.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from canlib.model.config import EOS_ID, ModelConfig
from canlib.model.seq2seq import Seq2Seq

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CANLIB_DATA_DIR", REPO.parent / "shared" / "data"))
MEASUREMENTS = Path(os.environ.get("CANLIB_MEASUREMENTS_DIR", REPO.parent / "shared" / "measurements"))
REQUIRE_DATA = os.environ.get("CANLIB_REQUIRE_DATA", "") not in ("", "0")


def missing(what: str) -> None:
    """Skip (a developer's machine without the folder) or, under CANLIB_REQUIRE_DATA=1, fail."""
    if REQUIRE_DATA:
        pytest.fail(f"{what} (CANLIB_REQUIRE_DATA=1: CI must have it)", pytrace=False)
    pytest.skip(what)


@contextmanager
def stored_results(results: Path) -> Iterator[pytest.MonkeyPatch]:
    """The real data (the evaluation sets' references) and the stored results ``results`` for the tests of a module,
    set with a patch that is undone after them; skip (or fail under CI) without the data."""
    if not (SHARED_DATA / "multi30k-en-de").is_dir():
        missing(f"real data {SHARED_DATA}/multi30k-en-de not present (the evaluation sets' references)")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CANLIB_DATA_DIR", str(SHARED_DATA))
        patch.setenv("CANLIB_RESULTS_DIR", str(results))
        yield patch


@pytest.fixture(autouse=True)
def _deterministic_torch():
    # one thread: the tests' tensors are small, so a second thread gains little, and on a CPU shared with other
    # jobs it waits for a busy core; a fixed thread count also keeps float sums in one order from run to run
    torch.manual_seed(0)
    torch.set_num_threads(1)
    yield


@pytest.fixture
def shared_data() -> Path:
    """The folder of real corpora (CANLIB_DATA_DIR, else ../shared/data); skip if absent."""
    if not SHARED_DATA.is_dir():
        missing(f"real data folder {SHARED_DATA} not present")
    return SHARED_DATA


@pytest.fixture
def measurements() -> Path:
    """The raw GPU measurements (CANLIB_MEASUREMENTS_DIR, else ../shared/measurements) that stored
    results are converted from; skip if absent."""
    if not MEASUREMENTS.is_dir():
        missing(f"raw measurements folder {MEASUREMENTS} not present (set CANLIB_MEASUREMENTS_DIR)")
    return MEASUREMENTS


@pytest.fixture(scope="session")
def claims_json() -> dict[str, dict]:
    """`python -m repro claims --json` on the stored results, by claim id (run once per test process)."""
    import json
    import subprocess
    import sys

    if not (SHARED_DATA / "multi30k-en-de").is_dir():
        missing(f"real data {SHARED_DATA}/multi30k-en-de not present (the evaluation sets' references)")
    out = subprocess.run(
        [sys.executable, "-m", "repro", "claims", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "CANLIB_DATA_DIR": str(SHARED_DATA), "CANLIB_RESULTS_DIR": str(REPO / "book" / "results")},
        cwd=REPO,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return {row["id"]: row for row in json.loads(out.stdout)}


# -- the small model of the unit tests -------------------------------------------------------------------------------
def small_config(kind: str = "standard", *, dropout: float = 0.0, **changes: Any) -> ModelConfig:
    """d=32, 4 heads, FFN 64, one encoder and two decoder layers, 40 tokens: small enough that a test builds, runs
    and trains it in well under a second. ``dropout`` sets all three rates (none by default); ``changes`` any field."""
    base = dict(vocab_size=40, d_model=32, heads=4, ffn_dim=64, enc_layers=1, dec_layers=2, decoder_kind=kind)
    return ModelConfig(**{**base, "dropout": dropout, "attn_dropout": dropout, "relu_dropout": dropout, **changes})


def small_model(kind: str = "standard", *, seed: int | None = None, **changes: Any) -> Seq2Seq:
    """:func:`small_config`'s model in eval mode, its weights drawn after ``torch.manual_seed(seed)`` if a seed is
    given."""
    if seed is not None:
        torch.manual_seed(seed)
    return Seq2Seq(small_config(kind, **changes)).eval()


def ending_early(model: Seq2Seq, eos_bias: float) -> Seq2Seq:
    """The model with outputs that end at varied lengths, as a trained model's do: a random final-norm gain breaks the
    tied embeddings' "repeat the input" habit, and a final-norm bias that raises EOS's logit by ``eos_bias`` ends
    sentences early."""
    with torch.no_grad():
        model.decoder_norm.weight.copy_(torch.randn(model.cfg.d_model) * 3.0)
        eos = model.embed.weight[EOS_ID]
        model.decoder_norm.bias.add_(eos_bias * eos / eos.norm() ** 2)
    return model


# -- a toy parallel corpus of plain files ----------------------------------------------------------------------------
TOY_NOUNS = [
    ("cat", "Katze"),
    ("dog", "Hund"),
    ("house", "Haus"),
    ("tree", "Baum"),
    ("car", "Auto"),
    ("bird", "Vogel"),
    ("child", "Kind"),
    ("man", "Mann"),
    ("woman", "Frau"),
    ("ball", "Ball"),
]
TOY_VERBS = [("sees", "sieht"), ("has", "hat"), ("likes", "mag"), ("finds", "findet")]


def write_toy_corpus(folder: Path, lines: dict[str, int], src: str = "en", tgt: str = "de") -> Path:
    """Plain parallel files ``<split>.<src>``/``<split>.<tgt>`` of made-up sentences ("the cat sees the dog ." ->
    "die Katze sieht die Hund ."), ``lines[split]`` pairs each, the same for the same counts."""
    import random

    rng = random.Random(0)
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in lines.items():
        pairs = [(rng.choice(TOY_NOUNS), rng.choice(TOY_VERBS), rng.choice(TOY_NOUNS)) for _ in range(count)]
        (folder / f"{split}.{src}").write_text("".join(f"the {a[0]} {v[0]} the {b[0]} .\n" for a, v, b in pairs))
        (folder / f"{split}.{tgt}").write_text("".join(f"die {a[1]} {v[1]} die {b[1]} .\n" for a, v, b in pairs))
    return folder


def prepare_toy_corpus(root: Path, lines: dict[str, int], canlib: Callable[..., subprocess.CompletedProcess]) -> Path:
    """:func:`write_toy_corpus` in ``root/files`` prepared by ``canlib data prepare`` (a 60-piece vocabulary) into
    ``root/prepared``, run with ``canlib(*args, cache=...)``: the caller's way of running the command."""
    write_toy_corpus(root / "files", lines)
    done = canlib("data", "prepare", "toy", "--files", str(root / "files"), "--src", "en", "--tgt", "de",
                  "--vocab-size", "60", "--out", str(root / "prepared"), cache=root / "cache")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return root / "prepared"


# -- a tiny translator saved as a checkpoint, for the commands that read one -----------------------------------------
TINY_LINES = ["a dog runs in the park", "the cat sits on the mat", "zwei hunde spielen"]


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    """A randomly initialised tiny model saved as a checkpoint, its vocabulary (trained on :data:`TINY_LINES`) one
    folder up."""
    from canlib.data.vocab import Vocabulary
    from canlib.model.checkpoint import save_model

    vocab = Vocabulary.train(TINY_LINES * 30, vocab_size=40)
    vocab.save(tmp_path / "vocab.model")
    torch.manual_seed(0)
    model = small_model(vocab_size=vocab.size, dec_layers=1, max_len=64)
    (tmp_path / "run").mkdir()
    save_model(model, tmp_path / "run" / "model.pt", vocab_id=vocab.id)
    return tmp_path / "run" / "model.pt"
