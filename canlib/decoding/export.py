"""``canlib export ctranslate2``: a trained checkpoint as a CTranslate2 model folder.

The folder holds CTranslate2's ``model.bin`` and vocabulary, the SentencePiece model (``vocab.model``) and
``canlib.json`` (the checkpoint it came from, its vocabulary id and model config). ``canlib translate --checkpoint
FOLDER`` translates with it, giving ``canlib translate``'s outputs; so does CTranslate2 itself, given the pieces of
each sentence (the model appends the source EOS). Models whose decoder CTranslate2 has no layer for (CAN and its
ablations, AAN, SAN) are refused in one line that says why.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from canlib.decoding.ctranslate import export_ctranslate2, export_refusal
from canlib.decoding.translate import load_translator, read_checkpoint
from canlib.io import require, umask

MANIFEST = "canlib.json"  # what makes a folder a canlib export


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="engine", required=True, metavar="ENGINE")
    p = sub.add_parser(
        "ctranslate2",
        help="a CTranslate2 model folder (standard decoders: baseline, balanced, depth-*)",
        description="Write a CTranslate2 model folder of a checkpoint with a standard decoder.",
    )
    p.add_argument("--checkpoint", required=True, help="model checkpoint (.pt), e.g. RUN/average.pt")
    p.add_argument("--out", required=True, type=Path, help="the folder to write")
    p.add_argument("--vocab", help="SentencePiece model (default: vocab.model beside the checkpoint or one folder up)")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier export in --out")


def check_out(out: Path, overwrite: bool) -> None:
    """--out is a new or empty folder, or (with overwrite) an earlier export: never another folder's files."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file, not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not (out / MANIFEST).is_file():
            raise ValueError(f"--out {out}: a folder with other files in it; give a new folder")
        if not overwrite:
            raise ValueError(f"--out {out}: holds an earlier export; pass --overwrite to replace it")
    if not out.parent.is_dir():
        raise ValueError(f"--out {out}: its folder {out.parent} does not exist")


def run(args: argparse.Namespace) -> int:
    check_out(args.out, args.overwrite)
    ckpt = read_checkpoint(args.checkpoint)
    kind = ckpt.get("config", {}).get("decoder_kind", "standard")
    refusal = export_refusal(kind)
    if refusal:
        raise ValueError(f"{args.checkpoint}: {refusal}")
    require("ctranslate2", "canlib export ctranslate2")
    model, vocab = load_translator(args.checkpoint, args.vocab, ckpt=ckpt)
    tmp = Path(tempfile.mkdtemp(prefix=f".{args.out.name}.", suffix=".tmp", dir=args.out.parent))
    try:
        export_ctranslate2(model, tmp, vocab)
        shutil.copyfile(vocab.source, tmp / "vocab.model")
        source = str(Path(args.checkpoint).resolve())
        manifest = {"checkpoint": source, "vocab_id": vocab.id, "model": model.cfg.to_dict()}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        tmp.chmod(0o777 & ~umask())
        if args.out.exists():
            shutil.rmtree(args.out)
        tmp.rename(args.out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    cfg = model.cfg
    print(
        f"exported {args.checkpoint} ({cfg.enc_layers}/{cfg.dec_layers} {cfg.decoder_kind}, d={cfg.d_model}) to "
        f"{args.out}; translate with: canlib translate --checkpoint {args.out} --input FILE"
    )
    return 0
