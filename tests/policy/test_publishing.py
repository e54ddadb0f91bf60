"""Publishing: the workflow that builds the book and deploys it to GitHub Pages is a valid GitHub Actions workflow
(checked against SchemaStore's workflow schema, which check-jsonschema ships, so no network is needed), it builds
with README's book command and deploys what that command writes, and the book names the repository that
CITATION.cff names, so that every page links its source and the issue tracker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "book.yml"


def schema_errors(path: Path, schema: str) -> str:
    """check-jsonschema's report on ``path`` against one of its bundled schemas; empty when the file is valid."""
    out = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return "" if out.returncode == 0 else out.stdout + out.stderr


def workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def steps_using(job: dict, action: str) -> list[dict]:
    return [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]


def test_the_book_workflow_is_a_valid_github_workflow():
    assert schema_errors(WORKFLOW, "vendor.github-workflows") == ""


def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    broken = tmp_path / "book.yml"
    broken.write_text(WORKFLOW.read_text(encoding="utf-8").replace("runs-on:", "runs_on:", 1), encoding="utf-8")
    assert "runs_on" in schema_errors(broken, "vendor.github-workflows")


def test_the_workflow_builds_with_the_readme_command_and_deploys_its_output():
    flow = workflow()
    build, deploy = flow["jobs"]["build"], flow["jobs"]["deploy"]
    assert "bash scripts/book.sh" in [s.get("run", "").strip() for s in build["steps"]]
    assert "bash scripts/book.sh" in (REPO / "README.md").read_text(encoding="utf-8")
    book_sh = (REPO / "scripts" / "book.sh").read_text(encoding="utf-8")
    (upload,) = steps_using(build, "actions/upload-pages-artifact")
    assert f"{upload['with']['path']}/index.html" in book_sh  # the folder the book command writes
    assert deploy["needs"] == "build" and steps_using(deploy, "actions/deploy-pages")
    assert deploy["environment"]["name"] == "github-pages"
    assert {"pages": "write", "id-token": "write"}.items() <= flow["permissions"].items()
    branch = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf-8"))["repository"]["branch"]
    assert flow["on"]["push"]["branches"] == [branch]  # the branch the pages' source links point at


def test_the_book_links_the_repository_that_citation_cff_names():
    config = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf-8"))
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    assert config["repository"]["url"] == citation["repository-code"]
    assert config["repository"]["url"].startswith("https://github.com/")
    assert all(config["html"][f"use_{button}_button"] is True for button in ("repository", "issues", "edit_page"))


def test_citation_cff_is_valid_citation_file_format():
    assert schema_errors(REPO / "CITATION.cff", "vendor.citation-file-format") == ""


def test_the_workflow_points_the_pages_at_the_repository_it_builds_from(tmp_path):
    """The published pages link the repository the workflow runs in, not the URL committed in _config.yml."""
    (step,) = [s for s in workflow()["jobs"]["build"]["steps"] if s.get("name") == "Point the pages at this repository"]
    command = step["run"].replace(
        "${{ github.server_url }}/${{ github.repository }}", "https://github.com/someone/fork"
    )
    (tmp_path / "_config.yml").write_text((REPO / "_config.yml").read_text(encoding="utf-8"), encoding="utf-8")
    subprocess.run(command, shell=True, cwd=tmp_path, check=True, timeout=60)
    before = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf-8"))
    after = yaml.safe_load((tmp_path / "_config.yml").read_text(encoding="utf-8"))
    assert after["repository"]["url"] == "https://github.com/someone/fork"
    after["repository"]["url"] = before["repository"]["url"]
    assert after == before  # nothing else changed
