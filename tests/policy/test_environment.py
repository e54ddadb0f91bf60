"""environment.yml (the GPU machine's conda environment) cannot drift from pyproject.toml: the same Python
floor, the same packages with the same specifiers, canlib editable with every extra it declares."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parents[2]
CONDA_ONLY = {"python", "pip"}  # what conda itself installs; everything else is a Python package of pyproject's


def environment(path: Path = REPO / "environment.yml") -> dict:
    env = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(env, dict) or not isinstance(env.get("dependencies"), list):
        raise ValueError(f"{path}: no list of dependencies")
    return env


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def conda_requirements(env: dict) -> list[Requirement]:
    """The conda dependencies as PEP 508 requirements (conda's `name>=x,<y` is the same syntax; its `name=x`
    is not, and fails here with the offending line)."""
    out = []
    for item in env["dependencies"]:
        if isinstance(item, str):
            if re.search(r"(?<![<>=!~])=(?!=)", item):
                raise ValueError(f"environment.yml: {item!r} uses conda's `=`; write `>=`/`==` as pyproject.toml does")
            out.append(Requirement(item))
    return out


def pip_lines(env: dict) -> list[str]:
    sections = [item["pip"] for item in env["dependencies"] if isinstance(item, dict) and "pip" in item]
    assert len(sections) == 1, "environment.yml: expected one pip section"
    return [str(line).strip() for line in sections[0]]


def pyproject_requirements() -> dict[str, SpecifierSet]:
    """Every package that pyproject.toml names (dependencies and every extra) -> its specifier; a package named
    twice with two different specifiers would make the comparison ambiguous, so it fails here."""
    proj = project()
    found: dict[str, SpecifierSet] = {}
    for line in [*proj["dependencies"], *(r for extra in proj["optional-dependencies"].values() for r in extra)]:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        if name in found and found[name] != req.specifier:
            raise ValueError(f"pyproject.toml names {name} as {found[name]} and as {req.specifier}")
        found[name] = req.specifier
    return found


def floor(spec: SpecifierSet) -> str:
    lows = [s.version for s in spec if s.operator == ">="]
    assert len(lows) == 1, f"{spec}: expected one >= bound"
    return lows[0]


def test_environment_keeps_the_python_floor_of_pyproject():
    python = [r for r in conda_requirements(environment()) if r.name == "python"]
    assert len(python) == 1, "environment.yml names no python"
    assert floor(python[0].specifier) == floor(SpecifierSet(project()["requires-python"]))


def test_every_package_environment_pins_is_pinned_the_same_in_pyproject():
    env = environment()
    known = pyproject_requirements()
    named = [r for r in conda_requirements(env) if r.name not in CONDA_ONLY]
    named += [Requirement(line) for line in pip_lines(env) if not line.startswith("-")]
    assert any(canonicalize_name(r.name) == "torch" for r in named), "environment.yml must name torch (the CUDA build)"
    for req in named:
        name = canonicalize_name(req.name)
        assert name in known, f"environment.yml installs {name}, which pyproject.toml does not name"
        assert req.specifier == known[name], (
            f"{name}: environment.yml asks {req.specifier}, pyproject.toml {known[name]}"
        )


def test_canlib_is_installed_editable_with_every_extra_pyproject_declares():
    editable = [line for line in pip_lines(environment()) if line.startswith("-e")]
    assert len(editable) == 1, "environment.yml must install canlib once, editable (-e .[extras])"
    match = re.fullmatch(r"-e\s+\.\[([^\]]*)\]", editable[0])
    assert match, f"{editable[0]!r}: expected `-e .[extra,...]` (the repository, editable)"
    extras = {e.strip() for e in match.group(1).split(",") if e.strip()}
    assert extras == set(project()["optional-dependencies"])


def test_torch_does_not_come_from_the_retired_pytorch_conda_channels():
    env = environment()
    assert not {"pytorch", "nvidia"} & set(env.get("channels", [])), "the pytorch channel stops at 2.5"
    assert not [r for r in conda_requirements(env) if r.name in ("pytorch", "pytorch-cuda")]


def test_a_conda_style_pin_is_refused_with_its_line(tmp_path):
    path = tmp_path / "environment.yml"
    path.write_text("name: x\ndependencies:\n  - python=3.11\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'python=3.11'"):
        conda_requirements(environment(path))
