"""``canlib train``: a model preset on a prepared corpus (resumable; CPU or CUDA; torchrun for several GPUs).

Every training option is a field of :class:`~canlib.training.config.TrainConfig`, and the command line is derived
from the fields (help, rule, group, default), so each default has one source. The run folder is the source of
truth: ``canlib train --out RUN --resume`` alone continues the run stored there (its model, corpus and every option,
from ``RUN/config.json``). An option given on resume must equal the stored one: only the stopping point
(``--max-steps``, ``--max-epochs``) may move, and what does not change the recipe: what is shown, how often the
newest state is saved and where it runs (``--no-progress``, ``--log-every``, ``--save-every``, ``--device``,
``--threads``). SIGINT (Ctrl-C) and SIGTERM stop a run after its current update with its
state saved, and the command says how to continue.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import signal
import sys
import warnings
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from canlib.data import load_prepared
from canlib.io import add_threads_option, device_option, option_type, use_threads
from canlib.model.checkpoint import safe_load
from canlib.model.config import ModelConfig, preset
from canlib.training.config import TrainConfig, resume_kind
from canlib.training.run_folder import check_run_dir
from canlib.training.trainer import LongWarmupWarning, Trainer
from canlib.training.watch import TrainingInterrupted

# TrainConfig's groups -> their titles in --help (None: the main list)
GROUPS = {
    "optimisation": None,
    "batches": "batches",
    "stopping": "stopping (a resume may move --max-steps and --max-epochs)",
    "checkpoints": "checkpoints",
    "device": "device and speed (a resume may change --device, --log-every, --threads and --progress)",
    "throughput": "throughput (each changes the last bits of the numbers, not the recipe)",
}
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
DROPOUTS = ("dropout", "attn_dropout", "relu_dropout")
SIZES = ("enc_layers", "dec_layers", "d_model", "heads", "ffn_dim")  # ModelConfig fields, the size options' dests


def flag(name: str) -> str:
    """The command-line option of TrainConfig field ``name`` (``max_steps`` -> ``--max-steps``)."""
    return "--" + name.replace("_", "-")


def shown(value: Any) -> str:
    """A value as the command line writes it."""
    if isinstance(value, (tuple, list)):
        return " ".join(map(shown, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preset", help="model preset, e.g. tiny-can, can, balanced (see `canlib info`); on resume: the run's"
    )
    parser.add_argument("--data", help="prepared corpus folder (`canlib data prepare`); on resume: the run's")
    parser.add_argument("--out", required=True, help="the run folder (it holds every option of the run)")
    parser.add_argument(
        "--dropout", type=option_type(float, "fraction"), help="override the preset's dropout (all three rates)"
    )
    sizes = parser.add_argument_group("model size (each overrides the preset's; on resume: the run's)")
    sizes.add_argument("--layers", type=layer_pair, metavar="ENC,DEC", help="encoder and decoder layers, e.g. 6,6")
    sizes.add_argument("--encoder-layers", type=option_type(int, "at least 1"), metavar="N", dest="enc_layers")
    sizes.add_argument("--decoder-layers", type=option_type(int, "at least 1"), metavar="N", dest="dec_layers")
    sizes.add_argument("--d-model", type=option_type(int, "at least 1"), metavar="D", help="model width")
    sizes.add_argument("--heads", type=option_type(int, "at least 1"), metavar="H", help="attention heads")
    sizes.add_argument(
        "--ffn", type=option_type(int, "at least 1"), metavar="F", help="feed-forward width", dest="ffn_dim"
    )
    parser.add_argument(
        "--init-from",
        metavar="CKPT",
        help="start a new run from this checkpoint's weights only (a fresh optimizer, schedule and step count; "
        "fine-tuning); the model is the checkpoint's unless --preset says, and its vocabulary must be the corpus's",
    )
    groups: dict[str, Any] = {}
    for f in fields(TrainConfig):
        meta = f.metadata
        title = GROUPS[meta["group"]]
        group = groups.setdefault(meta["group"], parser if title is None else parser.add_argument_group(title))
        default = "bf16 on cuda, fp32 on cpu" if f.name == "precision" else shown(f.default)
        options: dict[str, Any] = {"default": None, "help": f"{meta['help']} (default {default})"}
        if isinstance(f.default, bool):
            options["action"] = argparse.BooleanOptionalAction
        elif meta["choices"]:
            options["choices"] = meta["choices"]
        elif f.name == "device":
            options["type"] = device_option
        elif isinstance(f.default, tuple):
            options.update(nargs=len(f.default), type=option_type(float, meta["rule"]), metavar="B")
        elif not isinstance(f.default, str):
            options["type"] = option_type(type(f.default), meta["rule"])
        group.add_argument(flag(f.name), **options)
    add_threads_option(groups["device"])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out with its own model, corpus and options (it may change only the stops, "
        "--device, --threads, --log-every, --save-every and --progress)",
    )
    mode.add_argument("--overwrite", action="store_true", help="delete the run in --out and start over")


def layer_pair(text: str) -> tuple[int, int]:
    """``--layers ENC,DEC``: two positive integers."""
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) >= 1 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give encoder and decoder layers as ENC,DEC (e.g. 6,6)")
    return int(parts[0]), int(parts[1])


def model_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ModelConfig fields the size options set (``--layers`` and ``--encoder-layers`` may not both set one)."""
    out: dict[str, Any] = {}
    if args.layers is not None:
        if args.enc_layers is not None or args.dec_layers is not None:
            raise ValueError("--layers ENC,DEC or --encoder-layers/--decoder-layers, not both")
        out["enc_layers"], out["dec_layers"] = args.layers
    out.update({name: getattr(args, name) for name in SIZES if getattr(args, name) is not None})
    if args.dropout is not None:
        out.update(dict.fromkeys(DROPOUTS, args.dropout))
    return out


def initial_weights(path: str, model: ModelConfig | None, vocab_id: str | None) -> tuple[ModelConfig, dict]:
    """The model and weights a run starts from with --init-from: the checkpoint's, whose shape must be ``model``'s
    where one is given (dropout may differ) and whose vocabulary must be the corpus's."""
    ckpt = safe_load(path)
    if "config" not in ckpt or "model" not in ckpt:
        raise ValueError(f"--init-from {path}: not a canlib model checkpoint (no config or weights)")
    found = ModelConfig.from_dict(ckpt["config"])
    if model is not None:
        differ = {k: v for k, v in found.to_dict().items() if k not in DROPOUTS and getattr(model, k) != v}
        if differ:
            name, was = next(iter(differ.items()))
            now = getattr(model, name)
            raise ValueError(f"--init-from {path}: its model has {name}={was}, this run's {now}; leave --preset out "
                             "to train the checkpoint's model")  # fmt: skip
        found = model
    if vocab_id is not None and ckpt.get("vocab_id") not in (None, vocab_id):
        raise ValueError(
            f"--init-from {path}: trained with vocabulary {ckpt.get('vocab_id')}, the corpus has {vocab_id}: "
            "its embeddings would mean other pieces"
        )
    return found, ckpt["model"]


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainConfig fields the command line sets (the options it does not give are None)."""
    given = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if getattr(args, f.name, None) is not None}
    if "betas" in given:
        given["betas"] = tuple(given["betas"])
    return given


def train_config(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig of a new run: the defaults and the options given (bf16 on CUDA and fp32 on CPU unless
    --precision says)."""
    given = given_options(args)
    device = given.get("device", TrainConfig.device)
    given.setdefault("precision", "bf16" if device.startswith("cuda") else "fp32")
    return TrainConfig(**given)


def differs(given: str, stored: Any, config_file: Path, advice: str) -> ValueError:
    """The error for an option given on resume that is not the stored run's: what to do instead."""
    return ValueError(f"{given} differs from the run's {stored} ({config_file}): {advice}")


def resumed_config(stored: dict[str, Any], given: dict[str, Any], config_file: Path) -> TrainConfig:
    """The stored run's TrainConfig with the options given on resume, each of which must equal the stored one
    unless it only says when to stop, what to show or how often to save."""
    base = TrainConfig.from_dict(stored.get("train", {}))
    for name, value in given.items():
        old = getattr(base, name)
        if value != old and resume_kind(name) not in ("stop", "free"):
            advice = "a resumed run keeps its options; leave {} out to continue it, or start over with --overwrite"
            raise differs(f"{flag(name)} {shown(value)}", shown(old), config_file, advice.format(flag(name)))
    return replace(base, **given)


def stored_run(out: Path) -> dict[str, Any] | None:
    """``RUN/config.json``, or None when the folder holds no run."""
    path = out / "config.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a run's configuration ({exc})") from None


def stored_corpus(args: argparse.Namespace, stored: dict[str, Any], config_file: Path) -> str:
    """The corpus folder a resumed run reads: the stored one; --data only where it names the same folder, or
    where the stored one is gone (the run's vocabulary is checked against it)."""
    path = stored.get("data")
    if args.data is None:
        if not path:
            raise ValueError(f"{config_file} names no corpus folder: give --data")
        return path
    given = str(Path(args.data).resolve())
    if path and given != path and Path(path).exists():
        raise differs(f"--data {args.data}", path, config_file, "leave --data out to continue the run")
    return given


def stored_model(args: argparse.Namespace, stored: dict[str, Any], config_file: Path) -> ModelConfig:
    """The resumed run's model; --preset and --dropout, where given, must describe it."""
    model = ModelConfig.from_dict(stored["model"])
    name = stored.get("preset")
    if args.preset is not None and name is not None and args.preset != name:
        raise differs(f"--preset {args.preset}", name, config_file, "leave --preset out to continue it")
    if args.preset is not None and name is None:
        rates = {k: getattr(model, k) for k in DROPOUTS}
        if preset(args.preset, vocab_size=model.vocab_size, **{**rates, **model_overrides(args)}) != model:
            raise ValueError(f"--preset {args.preset} is not the model of the run ({config_file})")
    for name, value in model_overrides(args).items():
        if name not in DROPOUTS and getattr(model, name) != value:
            advice = "a resumed run keeps its model; leave the size options out to continue it"
            raise differs(f"{name}={value}", getattr(model, name), config_file, advice)
    if args.dropout is not None and args.dropout != model.dropout:
        advice = "leave --dropout out to continue it"
        raise differs(f"--dropout {shown(args.dropout)}", shown(model.dropout), config_file, advice)
    return model


def new_run(args: argparse.Namespace, out: Path) -> tuple[ModelConfig, TrainConfig, Any, str]:
    """The model, options, corpus and corpus folder of a new run (and, with --init-from, its first weights in
    ``args.init_weights``)."""
    if not ((args.preset or args.init_from) and args.data):
        where = f" ({out} holds no run to resume)" if args.resume else ""
        raise ValueError(f"--preset (or --init-from) and --data are needed to start a run{where}")
    if args.resume:
        print(f"{out}: no run to resume there (no config.json): starting a new one", file=sys.stderr)
    cfg = train_config(args)
    overrides = model_overrides(args)
    corpus = load_prepared(args.data)
    model = preset(args.preset, vocab_size=corpus.vocab.size, **overrides) if args.preset else None
    if args.init_from:
        model, args.init_weights = initial_weights(args.init_from, model, corpus.vocab.id)
        if overrides and not args.preset:
            model = replace(model, **overrides)
            if any(k not in DROPOUTS for k in overrides):
                raise ValueError("--init-from: the model sizes are the checkpoint's; give only --dropout")
    return model, cfg, corpus, str(Path(args.data).resolve())


Settings = tuple[ModelConfig, TrainConfig, Any, str, bool]  # model, options, corpus, its folder, a new run


def run_settings(args: argparse.Namespace) -> Settings:
    """What the command trains: a new run, or the run stored in --out with the options given checked against it."""
    out = Path(args.out)
    check_run_dir(out)  # before the corpus is loaded: a wrong --out fails at once
    stored = stored_run(out) if args.resume else None
    if stored is None:
        return (*new_run(args, out), True)
    config_file = out / "config.json"
    if args.init_from:
        raise ValueError(f"--init-from: {out} holds a run to resume, which continues from its own weights")
    cfg = resumed_config(stored, given_options(args), config_file)
    data = stored_corpus(args, stored, config_file)
    model_cfg = stored_model(args, stored, config_file)
    return model_cfg, cfg, load_prepared(data), data, False


def validation_bleu(corpus: Any, sentences: int, beam: int) -> Callable[[Any], float]:
    """The --eval-bleu hook: sacreBLEU (13a) of the model's translations of the first ``sentences`` validation
    sentences (beam ``beam``; 1 = greedy), detokenized, against their references."""
    from canlib.bleu import _bleu
    from canlib.decoding.translate import evaluation_batch_size, translate_lines

    valid = corpus.split("valid")
    sources, references = valid.src_text[:sentences], valid.tgt_text[:sentences]
    metric = _bleu()

    def score(model: Any) -> float:
        device = model.embed.weight.device
        hyps = translate_lines(model, corpus.vocab, sources, beam=beam, batch_size=evaluation_batch_size(device))
        return metric.corpus_score(hyps, [references]).score

    return score


def build_trainer(args: argparse.Namespace, settings: Settings) -> Trainer:
    """The Trainer of ``settings`` (:func:`run_settings`); the default warm-up longer than the run is an error."""
    model_cfg, cfg, corpus, data, new = settings
    out = Path(args.out)
    if not new and not any((out / "checkpoints").glob("*.pt")):
        print(f"{out}: no checkpoint saved yet: starting the stored run from its first update", file=sys.stderr)
    valid_bleu = validation_bleu(corpus, cfg.eval_bleu_sentences, cfg.eval_bleu_beam) if cfg.eval_bleu else None
    with warnings.catch_warnings():
        if args.warmup is None:  # the default warm-up (the paper's) that does not fit this run is an error
            warnings.simplefilter("error", LongWarmupWarning)
        try:
            return Trainer(
                model_cfg,
                cfg,
                corpus.split("train"),
                corpus.split("valid"),
                out,
                vocab=corpus.vocab,
                valid_bleu=valid_bleu,
                data_path=data,
                resume=args.resume,
                overwrite=args.overwrite,
                console=True,
                stop_signals=STOP_SIGNALS,
                init_weights=getattr(args, "init_weights", None) if new else None,
                run_info=run_info(args) if new else None,
            )
        except LongWarmupWarning as exc:
            raise ValueError(f"{exc} (the default warm-up is the paper's, for runs of 100,000s of updates)") from None


def startup_summary(trainer: Trainer, settings: Settings, threads: int, init_from: str | None) -> str:
    """What a run trains, on what and where, as the first lines of its console (a log file's header)."""
    model_cfg, cfg, corpus, data, new = settings
    pairs, valid = len(trainer.train_split), len(trainer.valid_split) if trainer.valid_split is not None else 0
    per_epoch = math.ceil(len(trainer.sampler) / cfg.update_freq)
    planned = trainer.planned_updates()
    where = trainer.device.type + (f", {threads} thread(s)" if trainer.device.type == "cpu" else "")
    start = f"from step {trainer.step}" if trainer.step else "a new run" if new else "from its first update"
    if new and init_from:
        start += f", from the weights of {init_from} (weights only: a fresh optimizer, schedule and step count)"
    lines = [
        f"train | {trainer.run_dir}: {start}",
        f"train | model: {trainer.model.num_parameters():,} parameters ({model_cfg.decoder_kind}, "
        f"{model_cfg.enc_layers}/{model_cfg.dec_layers} layers, d {model_cfg.d_model}, {model_cfg.heads} heads, "
        f"ffn {model_cfg.ffn_dim}, vocabulary {model_cfg.vocab_size:,})",
        f"train | data {data}: {pairs:,} training pairs, {valid:,} validation pairs; {per_epoch:,} updates per "
        f"epoch of up to {cfg.max_tokens:,} tokens x {cfg.update_freq}",
    ]
    if cfg.eval_bleu:
        lines.append(
            f"train | validation BLEU: sacreBLEU of the first {cfg.eval_bleu_sentences} validation sentences, "
            f"beam {cfg.eval_bleu_beam}; best.pt and patience follow it"
        )
    stops = f"{planned:,} updates" if planned else f"patience {cfg.patience}"
    lines.append(f"train | device {where}, {cfg.precision}; stops at {stops}; a row every {cfg.log_every} updates")
    return "\n".join(lines)


def run_info(args: argparse.Namespace) -> dict[str, Any]:
    """What config.json records of how a new run's model came about: its preset (None when resized or taken from
    a checkpoint, whose config.json holds the model anyway) and the checkpoint it started from."""
    resized = any(k not in DROPOUTS for k in model_overrides(args))
    info: dict[str, Any] = {"preset": None if resized else args.preset}
    if args.init_from:
        info["init_from"] = str(Path(args.init_from).resolve())
    return info


def finished(out: Path, args: argparse.Namespace) -> str | None:
    """Why the run in ``out`` is finished, when it is and the command moves none of its stops: a resume of it has
    nothing to train."""
    result = out / "result.json"
    if not (args.resume and result.is_file()) or any(resume_kind(n) == "stop" for n in given_options(args)):
        return None
    try:
        done = json.loads(result.read_text(encoding="utf-8"))
        return f"{done['stop_reason']} at step {done['step']}"
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError):
        return None  # a result cut short: resuming writes it again


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    settings = run_settings(args)  # every option checked against a stored run first
    done = finished(out, args)
    if done is None:
        threads, busy = use_threads(args.threads)  # before the trainer: a resume compares them with the run's
        trainer = build_trainer(args, settings)
        stop = trainer.stop_reason() if args.resume and (out / "result.json").is_file() else None
        done = f"{stop} at step {trainer.step}" if stop else None
    if done is not None:
        print(
            f"{out}: the run is finished ({done}): nothing to train; raise --max-steps or --max-epochs to train "
            "it longer",
            file=sys.stderr,
        )
        return 0
    if trainer.is_main:
        print(startup_summary(trainer, settings, threads, args.init_from), flush=True)
        if busy and trainer.device.type == "cpu":
            print(f"canlib train: {busy}", file=sys.stderr)
    try:
        result = trainer.fit()
    except TrainingInterrupted as stop:
        if trainer.is_main:
            print(f"canlib train: stopped by {stop}", file=sys.stderr)
            print(f"continue with: canlib train --out {shlex.quote(str(out))} --resume", file=sys.stderr)
        return stop.exit_code
    if trainer.is_main:
        done = {k: result[k] for k in ("stop_reason", "step", "best", "last_valid")}
        print(json.dumps({**done, "epoch": trainer.epoch_of_last_update()}))  # numbered as the rows number it
    return 0
