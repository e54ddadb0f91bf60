"""Rewrite the ``provenance.source`` text of stored results and change nothing else.

    python scripts/rewrite_provenance_source.py PATTERN REPLACEMENT FILE...

``source`` is free text saying where a stored figure came from; the other provenance fields (commit, date,
device, configuration) are facts a chapter prints and a test checks, so this script never touches them.
PATTERN is a Python regular expression applied to each file's ``source`` (``re.sub`` with REPLACEMENT). A changed
file is written back through :func:`repro.results.files.save_result` (the layout every stored result has), then
read again: it must load, and its result and every other provenance field must equal what was there before.
Prints each file it changed; a file whose source does not match is left as it is.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: repro is used from it, not installed
from repro.results.files import load_result, save_result  # noqa: E402


def rewrite(path: Path, pattern: re.Pattern[str], replacement: str) -> bool:
    """Rewrite ``path``'s ``provenance.source``; True when it changed."""
    before = json.loads(path.read_text(encoding="utf-8"))
    source = before["provenance"].get("source")
    if not isinstance(source, str) or not pattern.search(source):
        return False
    prov = copy.deepcopy(before["provenance"])
    prov["source"] = pattern.sub(replacement, source)
    save_result(path, before["result"], prov)
    result, after = load_result(path)
    if result != before["result"] or {k: v for k, v in after.items() if k != "source"} != {
        k: v for k, v in before["provenance"].items() if k != "source"
    }:
        raise RuntimeError(f"{path}: more than provenance.source changed")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pattern", help="regular expression matched against provenance.source")
    parser.add_argument("replacement", help="its replacement (re.sub syntax: \\1 for a group)")
    parser.add_argument("files", nargs="+", type=Path, help="stored result files (JSON)")
    args = parser.parse_args(argv)
    pattern = re.compile(args.pattern)
    for path in args.files:
        if rewrite(path, pattern, args.replacement):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
