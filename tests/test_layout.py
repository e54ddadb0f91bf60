"""The package's layering, as the folder tree states it: each part imports only the parts below it.

io < bleu < data < model < decoding < training < bench < results < analysis < {studies, experiments} < ingest < the
command
line (cli, info, __main__). The results schema (results) and the computations on models (analysis) sit below both
the book's readers (studies) and the experiment engine (experiments), which are siblings: neither imports the other,
so loading a result can never reach training and the engine never depends on how a chapter reads.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "canlib"
LAYERS = [
    "io",
    "bleu",
    "data",
    "model",
    "decoding",
    "training",
    "bench",
    "results",
    "analysis",
    "studies",
    "experiments",
    "ingest",
    "cli",
    "info",
    "__main__",
]
SIBLINGS = ("studies", "experiments")  # one layer: neither imports the other
# modules whose canlib imports all stand at their top (a cycle or an optional dependency would be the only excuse)
TOP_IMPORTS = [
    "experiments",
    "data",
    "studies",
    "results",
    "analysis",
    "ingest",
]  # the schema, the engine and every reader
MAX_LINES = 600


def part(module: str) -> str:
    """The layer of a dotted canlib module name (``canlib.model.layers`` -> ``model``)."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def canlib_imports(path: Path, nested_only: bool = False) -> set[str]:
    """Every canlib module ``path`` imports, at module level or inside functions (``nested_only``: inside functions
    or classes only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    nodes = ast.walk(tree)
    if nested_only:
        nodes = (
            n for top in tree.body if not isinstance(top, (ast.Import, ast.ImportFrom, ast.If)) for n in ast.walk(top)
        )
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "canlib"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] == "canlib":
                found.add(base)
    return found


def all_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_part_imports_a_part_above_it():
    upward = []
    for path in all_modules():
        source = part(module_name(path))
        if source == "__init__":
            continue  # the package root re-exports the public API lazily
        for target in canlib_imports(path):
            dest = part(target)
            if dest == "__init__":
                upward.append(f"{module_name(path)} imports the package root (import the part itself)")
            elif LAYERS.index(dest) > LAYERS.index(source):
                upward.append(f"{module_name(path)} ({source}) imports {target} ({dest}), a part above it")
    assert not upward, "\n".join(upward)


def test_the_engine_and_the_readers_do_not_import_each_other():
    crossing = []
    for path in all_modules():
        source = part(module_name(path))
        if source not in SIBLINGS:
            continue
        for target in canlib_imports(path):
            if part(target) in SIBLINGS and part(target) != source:
                crossing.append(f"{module_name(path)} ({source}) imports {target}")
    assert not crossing, "\n".join(crossing)


def test_the_module_import_graph_has_no_cycles():
    names = {module_name(p): p for p in all_modules()}
    graph = {}
    for name, path in names.items():
        targets = set()
        for target in canlib_imports(path):
            while target and target not in names:  # `from canlib.x import y` where y is a name, not a module
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            # a package imports its own modules and they import it back by design only via __init__ re-exports
            if nxt.startswith(node + ".") or node.startswith(nxt + "."):
                continue
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]) if nxt in stack else f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "\n".join(cycles)


@pytest.mark.parametrize("module", ["canlib.io", "canlib.data", "canlib.bleu"])
def test_importing_a_lower_part_does_not_load_the_models(module):
    code = (
        f"import sys, {module}; loaded = sorted(m for m in sys.modules if m.startswith(('canlib.model', 'torch')));"
        "print(' '.join(loaded))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PACKAGE.parent
    ).stdout.split()
    assert not [m for m in out if m.startswith("canlib.model")], out


def owned(prefixes: list[str]) -> list[Path]:
    return [p for p in all_modules() if any(p.relative_to(PACKAGE).as_posix().startswith(x) for x in prefixes)]


# the imports that stay inside a function, each for a reason: reading stored results never prepares data or runs the
# bench, so a reader imports those only where it computes (a verdict's references, a measurement)
LOCAL_IMPORTS = {
    "canlib.experiments.run": ["canlib.training.state"],  # a run's last checkpoint, read to evaluate it
    "canlib.studies.store": ["canlib.data.preparation"],
    "canlib.analysis.speed": ["canlib.bench", "canlib.decoding.ctranslate"],
}


def test_the_engine_and_the_readers_import_canlib_at_their_top():
    nested = {module_name(p): sorted(canlib_imports(p, nested_only=True)) for p in owned(TOP_IMPORTS)}
    assert {m: i for m, i in nested.items() if i} == LOCAL_IMPORTS


def test_the_engine_and_the_readers_stay_under_600_lines():
    long = {
        module_name(p): n
        for p in owned(TOP_IMPORTS)
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_layer_list_names_every_part():
    parts = {part(module_name(p)) for p in all_modules()} - {"__init__"}
    assert parts <= set(LAYERS), parts - set(LAYERS)
