"""``python -m canlib <command>`` (also the ``canlib`` console script).

Each command lives in the module that does the work; this file only lists them.
A command module provides ``add_arguments(parser)`` and ``run(args) -> int``. Whatever goes wrong is one line
on stderr naming the command, and the exit status says what happened: 0 done, 2 refused (bad input), 130 or 143
stopped by SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import sys
import warnings

from canlib.io import MissingDependency

# command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("canlib.info", "list the model presets with their parameter counts"),
    "data": ("canlib.data.cli", "list the corpora or prepare one (vocabulary + binarized splits)"),
    "bleu": ("canlib.bleu", "score detokenized hypotheses: sacreBLEU and the paper's tokenized BLEU"),
    "train": ("canlib.training.cli", "train a model preset on a prepared corpus (resumable; CPU or CUDA)"),
    "translate": ("canlib.decoding.translate", "translate raw sentences with a checkpoint (beam search)"),
    "export": ("canlib.decoding.export", "export a trained model to another engine (CTranslate2)"),
}


class Parser(argparse.ArgumentParser):
    """argparse, with a bad option or value said in one line (what and why; ``--help`` shows the usage)."""

    def error(self, message: str) -> None:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def one_line(text: object) -> str:
    """A message on one line (an error from a library may span several)."""
    return " ".join(str(text).split())


def reader_gone() -> int:
    """The reader of stdout closed it (``canlib ... | head``): stop quietly, without a traceback, exit status 1, with
    stdout pointed at /dev/null so that Python's flush at exit finds no pipe to fail on (the recipe of Python's
    ``signal`` documentation)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1


def main(
    argv: list[str] | None = None,
    commands: dict[str, tuple[str, str]] = COMMANDS,
    prog: str = "canlib",
    description: str = "Compressed Attention Network toolkit",
) -> int:
    """Run one command of ``commands``; another package's command line passes its own ``commands`` and ``prog``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = Parser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    module = None
    for command, (module_name, help_text) in commands.items():
        command_parser = sub.add_parser(command, help=help_text, description=help_text)
        if command == chosen:  # only the command that runs is imported (`canlib bleu` loads no experiment engine)
            module = importlib.import_module(module_name)
            module.add_arguments(command_parser)
    args = parser.parse_args(argv)
    args.command_line = " ".join([prog, *map(shlex.quote, argv)])  # as typed: what a stored result's provenance keeps
    name = f"{prog} {args.command}"

    def warn(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        print(f"{name}: warning: {one_line(message)}", file=sys.stderr)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # each warning once, as one line (whatever filters the caller set)
            warnings.showwarning = warn
            code = int(module.run(args) or 0)
            sys.stdout.flush()  # a reader gone (`| head`) is found here, not at exit
            return code
    except BrokenPipeError:
        return reader_gone()
    except (ValueError, FileNotFoundError, RuntimeError, MissingDependency) as exc:
        print(f"{name}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
