"""The repository's three packages and their layers, read from the folder tree.

``canlib/`` is the library a user installs (the catalogue of systems and scales, data, model, decoding with its
instrumentation, training, analysis, bleu, io and the command line); ``repro/`` is the reproduction beside it (the
results schema, the bench, the experiment engine, the readers and ingest), and ``book/_code/`` the pages' glue. The
library imports neither of the others and the reproduction never imports the pages' glue. Inside each package a part
imports only the parts below it: ``catalogue < io < bleu < data < model < decoding < training < analysis < {cli,
info}`` in the library and ``results < bench < {studies, experiments} < ingest < cli`` in the reproduction, where the
engine (experiments) and the readers (studies) are siblings: neither imports the other, so loading a result can never
reach training. A layer list appears below only for the order of the parts; which part belongs to which package is
the tree's.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"canlib": ROOT / "canlib", "repro": ROOT / "repro", "_code": ROOT / "book" / "_code"}
CORE_ORDER = ["catalogue", "io", "bleu", "data", "model", "decoding", "training", "analysis", "cli", "info", "__main__"]
REPRO_ORDER = ["results", "bench", "studies", "experiments", "ingest", "cli", "__main__"]
SIBLINGS = ("studies", "experiments")  # one layer: neither imports the other
# modules whose canlib and repro imports all stand at their top, LOCAL_IMPORTS the exceptions: the schema, the engine,
# every reader, the CPU measurements, ingest, the data pipeline and the analyses
TOP_IMPORTS = [
    "repro/results",
    "repro/experiments",
    "repro/studies",
    "repro/ingest",
    "repro/bench/cpu.py",
    "canlib/data",
    "canlib/analysis",
]
MAX_LINES = 600


def package_of(module: str) -> str:
    return module.split(".")[0]


def in_repro(module: str) -> bool:
    return package_of(module) == "repro"


def part(module: str) -> str:
    """The part of a dotted module name in its package: ``canlib.model.layers`` -> ``model``,
    ``repro.studies.claims`` -> ``studies``."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def layer(module: str) -> int:
    order = REPRO_ORDER if in_repro(module) else CORE_ORDER
    return order.index(part(module))


def module_name(path: Path) -> str:
    name, root = next((n, r) for n, r in PACKAGES.items() if path.is_relative_to(r))
    parts = [name, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def canlib_imports(path: Path, nested_only: bool = False) -> set[str]:
    """Every module of the three packages ``path`` imports, at module level or inside functions (``nested_only``:
    inside functions or classes only)."""
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
            found |= {a.name for a in node.names if package_of(a.name) in PACKAGES}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if package_of(base) in PACKAGES:
                found.add(base)
    return found


def all_modules(packages: tuple[str, ...] = ("canlib", "repro")) -> list[Path]:
    return sorted(p for name in packages for p in PACKAGES[name].rglob("*.py"))


# what each package may import of the three: the library none of the others, the reproduction not the pages' glue
MAY_IMPORT = {"canlib": {"canlib"}, "repro": {"canlib", "repro"}, "_code": {"canlib", "repro", "_code"}}


def test_the_library_imports_neither_the_reproduction_nor_the_pages_glue():
    crossing = [
        f"{module_name(path)} imports {target}"
        for path in all_modules(tuple(PACKAGES))
        for target in canlib_imports(path)
        if package_of(target) not in MAY_IMPORT[package_of(module_name(path))]
    ]
    assert not crossing, "\n".join(crossing)


def test_no_part_imports_a_part_above_it_in_its_half():
    upward = []
    for path in all_modules():
        source = module_name(path)
        if part(source) == "__init__":
            continue  # a package root re-exports its parts
        for target in canlib_imports(path):
            if part(target) == "__init__" and target in ("canlib", "repro"):
                upward.append(f"{source} imports the package root {target} (import the part itself)")
            elif package_of(target) == package_of(source) and layer(target) > layer(source):
                upward.append(f"{source} ({part(source)}) imports {target} ({part(target)}), a part above it")
    assert not upward, "\n".join(upward)


def test_the_engine_and_the_readers_do_not_import_each_other():
    crossing = []
    for path in all_modules():
        source = module_name(path)
        if not in_repro(source) or part(source) not in SIBLINGS:
            continue
        for target in canlib_imports(path):
            if in_repro(target) and part(target) in SIBLINGS and part(target) != part(source):
                crossing.append(f"{source} ({part(source)}) imports {target}")
    assert not crossing, "\n".join(crossing)


@pytest.mark.parametrize("call", ["import canlib", "main(['--help'])", "main(['bleu', '--help'])"])
def test_the_library_loads_nothing_of_the_reproduction_the_pages_or_scipy(call):
    """``import canlib``, ``canlib --help`` and ``canlib bleu --help`` load the library alone: no module of
    ``repro``, of the pages' ``_code`` or the book, and no scipy (the reproduction's dependency)."""
    code = (
        f"import sys\nfrom canlib.cli import main\ntry:\n    {call}\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sys.modules), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = out.stderr.split()
    foreign = [m for m in loaded if package_of(m) in ("repro", "_code", "book", "scipy")]
    assert "canlib.cli" in loaded and not foreign, foreign
    if "bleu" in call:
        assert "canlib.bleu" in loaded


def test_every_part_stands_in_its_packages_order():
    parts = {(in_repro(module_name(p)), part(module_name(p))) for p in all_modules()} - {
        (False, "__init__"),
        (True, "__init__"),
    }
    unknown = {f"{'repro' if r else 'canlib'}.{x}" for r, x in parts if x not in (REPRO_ORDER if r else CORE_ORDER)}
    assert not unknown, f"parts of no layer (add them to the order): {sorted(unknown)}"


def test_the_module_import_graph_has_no_cycles():
    names = {module_name(p): p for p in all_modules(tuple(PACKAGES))}
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


@pytest.mark.parametrize("module", ["canlib.catalogue", "canlib.io", "canlib.data", "canlib.bleu"])
def test_importing_a_lower_part_does_not_load_the_models(module):
    code = (
        f"import sys, {module}; loaded = sorted(m for m in sys.modules if m.startswith(('canlib.model', 'torch')));"
        "print(' '.join(loaded))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    assert not [m for m in out if m.startswith("canlib.model")], out


def owned(prefixes: list[str]) -> list[Path]:
    return [p for p in all_modules() if any(p.relative_to(ROOT).as_posix().startswith(x) for x in prefixes)]


# the imports that stay inside a function, each for a reason: reading stored results never prepares data or runs the
# bench, so a reader imports those only where it computes (a verdict's references, a measurement)
LOCAL_IMPORTS = {
    "repro.experiments.run": ["canlib.training.state"],  # a run's last checkpoint, read to evaluate it
    "repro.studies.store": ["canlib.data.preparation"],
    "repro.bench.cpu": ["canlib.decoding.ctranslate", "repro.bench.speed"],
}


def test_the_reproduction_imports_canlib_at_its_top():
    nested = {module_name(p): sorted(canlib_imports(p, nested_only=True)) for p in owned(TOP_IMPORTS)}
    assert {m: i for m, i in nested.items() if i} == LOCAL_IMPORTS


def test_every_module_stays_under_600_lines():
    long = {
        module_name(p): n
        for p in all_modules(tuple(PACKAGES))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


MAX_FUNCTION_LINES = 80


def test_no_function_is_over_80_lines():
    """A function reads at one sitting: every function and method of the three packages and of the scripts, from
    its ``def`` to its last line."""
    long = {}
    for path in all_modules(tuple(PACKAGES)) + sorted((ROOT / "scripts").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}: {node.name} (line {node.lineno})"] = lines
    assert long == {}


def built_wheel(tmp_path: Path) -> list[str]:
    """The file names of the wheel pip builds from pyproject.toml, in a copy of the checkout's packages (the
    reproduction and the pages' glue beside the library, as in the repository)."""
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    for name, folder in PACKAGES.items():
        for path in folder.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                target = tmp_path / path.relative_to(ROOT)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(path.read_bytes())
    out = tmp_path / "dist"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), "."]
    subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=True, timeout=300)
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_holds_the_library_alone(tmp_path):
    """A user's install is ``canlib`` and its metadata: every module of the library, nothing of the reproduction
    or of the pages' glue."""
    names = built_wheel(tmp_path)
    tops = {name.split("/")[0] for name in names}
    assert tops == {"canlib", "canlib-0.1.0.dist-info"}, sorted(tops)
    library = {p.relative_to(ROOT).as_posix() for p in all_modules(("canlib",))}
    assert {n for n in names if n.endswith(".py")} == library
