"""The catalogue (:mod:`canlib.catalogue`) is the one place each system and scale is written: the models build their
presets from it, the corpora take their vocabulary from it, the reproduction its budgets and speed settings.

Three kinds of check: the catalogue's facts against the paper's numbers (written here, not read from the code); no
module writes one of those facts again (read from the source); and every reader follows the catalogue when it
changes (in a fresh interpreter whose catalogue is edited before anything reads it)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

from canlib.catalogue import (
    ABLATION_SYSTEMS,
    ALL_SYSTEMS,
    DEPTH_SYSTEMS,
    LABELS,
    PAPER_SYSTEMS,
    SCALES,
    SYSTEMS,
    preset_scale,
    scale_spec,
    scaled_preset,
)

REPO = Path(__file__).resolve().parents[2]
CATALOGUE = REPO / "canlib" / "catalogue.py"
WIDTHS = ("vocab_size", "d_model", "heads", "ffn_dim")  # the numbers a scale gives its presets and corpora


def test_the_full_scale_and_the_systems_are_the_papers():
    """The paper: d=512, 8 heads, FFN 2048, a 32k joint vocabulary, WMT14 En-De, beam 4; Baseline 6/6, the other
    Table 2 systems 12/2 with their decoder kinds; Figure 4's depths 9/4 and 14/1."""
    full = scale_spec("full")
    assert (full.d_model, full.heads, full.ffn_dim, full.vocab_size) == (512, 8, 2048, 32000)
    assert (full.corpus, full.beam) == ("wmt14-en-de", 4)
    depths = {name: (s.enc_layers, s.dec_layers, s.decoder_kind) for name, s in SYSTEMS.items()}
    assert depths["baseline"] == (6, 6, "standard") and depths["balanced"] == (12, 2, "standard")
    assert [depths[s] for s in ("san", "aan", "can")] == [(12, 2, "san"), (12, 2, "aan"), (12, 2, "can")]
    assert [depths[s][:2] for s in DEPTH_SYSTEMS] == [(6, 6), (9, 4), (12, 2), (14, 1)]
    assert [LABELS[s] for s in PAPER_SYSTEMS] == ["Baseline", "Balanced", "SAN", "AAN", "CAN"]
    assert ABLATION_SYSTEMS == ("balanced", "can_attn", "can_ffn", "can") and len(ALL_SYSTEMS) == 9


def test_the_book_scales_keep_their_widths_and_vocabularies():
    assert SCALES == ("tiny", "small", "full")
    tiny, small = scale_spec("tiny"), scale_spec("small")
    assert (tiny.d_model, tiny.heads, tiny.ffn_dim, tiny.vocab_size) == (64, 4, 256, 2000)
    assert (small.d_model, small.heads, small.ffn_dim, small.vocab_size) == (256, 4, 1024, 8000)


def test_a_preset_name_carries_its_scale():
    assert [scaled_preset("can", s) for s in SCALES] == ["tiny-can", "small-can", "can"]
    assert scaled_preset("tiny-can", "small") == "tiny-can"
    assert [preset_scale(n) for n in ("tiny-can", "small-depth-9-4", "can", "can-6-6")] == [
        "tiny",
        "small",
        "full",
        "full",
    ]


def _restatements(path: Path) -> list[str]:
    """Where ``path`` writes a fact of the catalogue again: a scale's width or vocabulary as a number for a field of
    that name, a table of numbers keyed by the scale names, a system's pair of depths, or a copy of its labels."""
    widths = {f: {getattr(scale_spec(s), f) for s in SCALES} for f in WIDTHS}
    depths = {(s.enc_layers, s.dec_layers) for s in SYSTEMS.values()}
    found = []

    def number(node: ast.AST | None) -> int | None:
        ok = isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool)
        return node.value if ok else None

    def fields(node: ast.AST) -> dict[str, ast.AST]:
        if isinstance(node, ast.Call):
            return {k.arg: k.value for k in node.keywords if k.arg}
        if isinstance(node, ast.Dict):
            return {k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)}
        return {}

    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        named = fields(node)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            named = {node.target.id: node.value}
        if isinstance(node, ast.arguments):
            args = node.posonlyargs + node.args
            named = dict(zip([a.arg for a in args[len(args) - len(node.defaults) :]], node.defaults))
            named |= {a.arg: d for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None}
        where = f"{str(path).removeprefix(f'{REPO}/')}:{getattr(node, 'lineno', '?')}"
        for name, value in named.items():
            if name in widths and number(value) in widths[name]:
                found.append(f"{where}: {name}={number(value)}")
        if (number(named.get("enc_layers")), number(named.get("dec_layers"))) in depths:
            found.append(f"{where}: the depths of a system")
        if isinstance(node, ast.Dict) and len(named) >= 2 and len(named) == len(node.keys):
            if set(named) <= set(SCALES) and all(number(v) is not None for v in named.values()):
                found.append(f"{where}: a table of numbers by scale")
            if set(named) <= set(SYSTEMS) and all(
                isinstance(v, ast.Constant) and v.value == LABELS[k] for k, v in named.items()
            ):
                found.append(f"{where}: a copy of the systems' labels")
    return found


def test_each_fact_of_the_catalogue_is_written_once():
    sources = [p for p in sorted((REPO / "canlib").rglob("*.py")) if p != CATALOGUE]
    sources += sorted((REPO / "repro").rglob("*.py")) + sorted((REPO / "book" / "_code").glob("*.py"))
    sources += sorted((REPO / "scripts").glob("*.py"))
    found = [line for path in sources for line in _restatements(path)]
    assert found == [], "write these in canlib/catalogue.py only, and read them from there:\n" + "\n".join(found)


def test_the_restatement_check_finds_each_kind(tmp_path):
    """The check above finds what it looks for (else its empty answer would prove nothing), and leaves a toy
    model's sizes and the paper's own row names alone."""
    module = tmp_path / "restated.py"
    module.write_text(
        textwrap.dedent(
            """
            VOCAB = {"tiny": 2000, "small": 8000, "full": 32000}
            SIZES = {"small": dict(d_model=256, heads=4, ffn_dim=1024)}
            BALANCED = dict(enc_layers=12, dec_layers=2)
            NAMES = {"can": "CAN", "san": "SAN"}
            TOY = dict(d_model=16, heads=2, ffn_dim=32, enc_layers=1, dec_layers=1, vocab_size=50)
            ROWS = {"can": "Compress All", "balanced": "Balanced"}
            def build(vocab_size: int = 32000, d_model=16, *, ffn_dim=2048): ...
            class Config:
                heads: int = 8
            """
        )
    )
    found = sorted(line.split(": ", 1)[1] for line in _restatements(module))
    assert found == sorted(
        [
            "a table of numbers by scale",
            "d_model=256",
            "heads=4",
            "ffn_dim=1024",
            "the depths of a system",
            "a copy of the systems' labels",
            "vocab_size=32000",
            "ffn_dim=2048",
            "heads=8",
        ]
    )


def test_models_corpora_and_the_reproduction_read_the_catalogue():
    """Edit the catalogue before anything reads it: the presets, ModelConfig's defaults, every corpus's vocabulary,
    a run's budget and the bench's defaults all follow."""
    code = textwrap.dedent(
        """
        import dataclasses
        import canlib.catalogue as c

        small, full = c.scale_spec("small"), c.scale_spec("full")
        c._SCALES["small"] = dataclasses.replace(
            small, d_model=384, heads=6, ffn_dim=1536, vocab_size=9000, train={**small.train, "max_steps": 7}
        )
        c._SCALES["full"] = dataclasses.replace(full, d_model=1024, heads=16, ffn_dim=4096, vocab_size=40000, beam=5)
        c.SYSTEMS["balanced"] = dataclasses.replace(c.SYSTEMS["balanced"], enc_layers=11, dec_layers=3)

        from canlib.data.corpora import REGISTRY
        from canlib.info import preset_table
        from canlib.model.config import ModelConfig, preset
        from repro.bench.settings import BenchSettings
        from repro.experiments.run import run
        from repro.results.layout import Where

        b = preset("small-balanced")
        print(b.d_model, b.heads, b.ffn_dim, b.enc_layers, b.dec_layers)
        d = ModelConfig()
        print(d.vocab_size, d.d_model, d.heads, d.ffn_dim)
        print(REGISTRY["multi30k-en-de"].scale("small").vocab_size, REGISTRY["wmt14-en-de"].scale("full").vocab_size)
        print(run("can", Where.of("small")).budget["max_steps"], BenchSettings().vocab_size, BenchSettings().beam)
        print(next(r["vocab_size"] for r in preset_table() if r["preset"] == "small-can"))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:5] == ["384 6 1536 11 3", "40000 1024 16 4096", "9000 40000", "7 40000 5", "9000"]
