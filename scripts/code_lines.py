"""Code lines of the library, the reproduction and the pages' glue: the lines that hold code, not blank, not a
docstring, not a comment alone.

    python scripts/code_lines.py              # canlib, repro and book/_code, and repro's share of canlib
    python scripts/code_lines.py canlib/model # any folders or files

A line counts once whatever it holds; a string that spans lines counts each line it spans, unless it is a docstring
(the first statement of a module, class or function).
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = ("canlib", "repro", "book/_code")
NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def docstring_lines(tree: ast.Module) -> set[int]:
    """The lines of every docstring in ``tree``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines |= set(range(first.lineno, first.end_lineno + 1))
    return lines


def code_lines(source: str) -> int:
    """How many lines of ``source`` hold code (a token other than a comment, outside a docstring)."""
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in NOT_CODE and token.type != tokenize.ENCODING:
            lines |= set(range(token.start[0], token.end[0] + 1))
    return len(lines - docstring_lines(ast.parse(source)))


def count(path: Path) -> int:
    """Code lines of a Python file, or of every Python file under a folder."""
    files = [path] if path.is_file() else sorted(path.rglob("*.py"))
    return sum(code_lines(f.read_text(encoding="utf-8")) for f in files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=list(DEFAULT), help="folders or files (default: %(default)s)")
    args = parser.parse_args(argv)
    counts = {}
    for name in args.paths:
        path = Path(name) if Path(name).is_absolute() else REPO / name
        if not path.exists():
            print(f"code_lines: {name}: no such file or folder", file=sys.stderr)
            return 2
        counts[name] = count(path)
        print(f"{name:<24} {counts[name]:>7,}")
    if counts.get("canlib") and "repro" in counts:
        print(f"repro / canlib           {counts['repro'] / counts['canlib']:>7.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
