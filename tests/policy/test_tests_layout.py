"""The tests sit in folders by what they test, and no test imports another: what two test files share lives in
tests/conftest.py or in a helper module beside them (a module not named ``test_*``)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

FOLDERS = {
    "core": "the library a user imports: canlib/",
    "repro": "the reproduction the book reads: repro/, its engine, stores, studies and the GPU scripts",
    "book": "the book: its build, its pages, their glue (book/_code), text and values, README's generated sections",
    "policy": "rules over the whole repository: style, layout, product words, environment and publishing",
}


def misplaced(tests: Path) -> list[str]:
    """What breaks the layout: a test file outside the four folders, a folder of another name (a folder's own data,
    such as core/fixtures/, is inside its folder), a conftest.py below the root (pytest would then import two modules
    named conftest), and two test files of one name (pytest imports each by its file name alone)."""
    found = [f"{p.name}: a test outside {', '.join(sorted(FOLDERS))}" for p in sorted(tests.glob("test_*.py"))]
    found += [
        f"{p.name}/: not one of the folders {', '.join(sorted(FOLDERS))}"
        for p in sorted(tests.iterdir())
        if p.is_dir() and p.name not in FOLDERS and p.name != "__pycache__"
    ]
    found += [f"{p.relative_to(tests)}: conftest.py only at the root" for p in sorted(tests.glob("*/**/conftest.py"))]
    seen: dict[str, Path] = {}
    for path in sorted(tests.rglob("test_*.py")):
        if path.name in seen:
            found.append(f"{path.relative_to(tests)}: the same name as {seen[path.name].relative_to(tests)}")
        seen.setdefault(path.name, path)
    return found


def imports_of_tests(tests: Path) -> list[str]:
    """Each import, in any file under ``tests``, of a test module (``test_*``), of the folder as a package
    (``tests.*``) or relative to its folder."""
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = ["." * node.level + (node.module or "")]
            else:
                continue
            found += [
                f"{path.relative_to(tests)}:{node.lineno} imports {name}"
                for name in names
                if name.startswith(".") or name.split(".")[0] == "tests" or name.split(".")[0].startswith("test_")
            ]
    return found


def test_the_tests_sit_in_their_four_folders():
    tests = REPO / "tests"
    assert misplaced(tests) == []
    for folder in FOLDERS:
        assert any((tests / folder).glob("test_*.py")), f"tests/{folder}/ holds no test"


def test_no_test_imports_another():
    assert imports_of_tests(REPO / "tests") == []


def test_the_checks_find_each_fault(tmp_path):
    for name in (*FOLDERS, "misc"):
        (tmp_path / name).mkdir()
    (tmp_path / "test_loose.py").write_text("")
    (tmp_path / "book" / "conftest.py").write_text("")
    (tmp_path / "core" / "test_twice.py").write_text("from test_other import helper\nimport tests.conftest\n")
    (tmp_path / "repro" / "test_twice.py").write_text("from conftest import REPO\nimport test_other as t\n")
    (tmp_path / "policy" / "helper.py").write_text("from . import test_other\nimport tests_of_its_own, testing\n")
    assert misplaced(tmp_path) == [
        "test_loose.py: a test outside book, core, policy, repro",
        "misc/: not one of the folders book, core, policy, repro",
        "book/conftest.py: conftest.py only at the root",
        "repro/test_twice.py: the same name as core/test_twice.py",
    ]
    assert imports_of_tests(tmp_path) == [
        "core/test_twice.py:1 imports test_other",
        "core/test_twice.py:2 imports tests.conftest",
        "policy/helper.py:1 imports .",
        "repro/test_twice.py:2 imports test_other",
    ]
