"""The lab's simulated kit and profile repositories (lab/sparklab/labgit.py, "TensorFold path"):
commits that depend only on the content, a real submodule, two profile commits that
differ only in the overlay. Checked with git itself, through clones."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "lab"))

# Patched and called where the lab looks these names up: the spark_lab facade only re-exports them.
from sparklab import labgit  # noqa: E402  pylint: disable=wrong-import-position

OVERLAY = "tensorfold/patches/overlay/"


def sh(*cmd, cwd=None):
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(name="git_root")
def fixture_git_root(tmp_path, monkeypatch):
    root = tmp_path / "git"
    monkeypatch.setattr(labgit, "GIT_ROOT", root)
    monkeypatch.setattr(labgit, "GIT_COMMITS", root / "commits.json")
    return root


@pytest.fixture(name="sim_copy")
def fixture_sim_copy(tmp_path, monkeypatch):
    """A copy of lab/sim the test may edit."""
    copy = tmp_path / "sim"
    shutil.copytree(labgit.SIM, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(labgit, "SIM", copy)
    return copy


def materialize():
    """(commits, changes) of one ensure_git_repos run."""
    changes = []
    commits = labgit.ensure_git_repos(changes)
    return commits, changes


def commits_of():
    return materialize()[0]


def test_same_content_gives_the_same_commits_and_a_rerun_changes_nothing(git_root, tmp_path, monkeypatch):
    first, changes = materialize()
    made = {c.split()[1] for c in changes if c.startswith("git:")}
    assert made == {"TensorFold.git", "kit.git", "profile.git", "recipe.git"}
    again, changes = materialize()
    assert again == first and changes == []
    assert json.loads((git_root / "commits.json").read_text()) == first

    other = tmp_path / "elsewhere"
    monkeypatch.setattr(labgit, "GIT_ROOT", other)
    monkeypatch.setattr(labgit, "GIT_COMMITS", other / "commits.json")
    fresh = commits_of()
    assert fresh["kit"]["commit"] == first["kit"]["commit"]
    assert fresh["profile"]["commits"] == first["profile"]["commits"]
    assert fresh["recipe"]["commit"] == first["recipe"]["commit"]


def test_a_changed_file_changes_the_commits_that_hold_it(git_root, sim_copy):
    before = commits_of()
    serve = sim_copy / "kit" / "scripts" / "serve.sh"
    serve.write_text(serve.read_text() + "# edited\n")
    after, changes = materialize()
    assert after["kit"]["commit"] != before["kit"]["commit"]
    assert after["tensorfold"]["commit"] == before["tensorfold"]["commit"]
    assert after["profile"]["commit"] == before["profile"]["commit"]
    assert changes == [f"git: kit.git main at {after['kit']['commit'][:12]}", f"wrote {git_root / 'commits.json'}"]


def test_the_kit_clones_with_its_engine_submodule(git_root, tmp_path):
    commits = commits_of()
    clone = tmp_path / "kit"
    # The submodule URL is relative (../TensorFold.git), so it resolves next to the kit here too.
    sh("git", "-c", "protocol.file.allow=always", "clone", "-q", "--recurse-submodules",
       f"file://{git_root}/kit.git", str(clone))
    assert sh("git", "rev-parse", "HEAD", cwd=clone) == commits["kit"]["commit"]
    assert sh("git", "rev-parse", "HEAD", cwd=clone / "vendor" / "TensorFold") == commits["tensorfold"]["commit"]
    assert (clone / "vendor" / "TensorFold" / "pyproject.toml").is_file()
    tree = sh("git", "ls-tree", "-r", "HEAD", cwd=clone).splitlines()
    modes = {line.split("\t")[1]: line.split()[0] for line in tree}
    assert modes["vendor/TensorFold"] == "160000"
    assert modes["scripts/serve.sh"] == modes["docker/entrypoint.sh"] == "100755"
    assert modes["config/prod.env.example"] == "100644"
    assert not [p for p in modes if "__pycache__" in p or p.endswith(".pyc")]
    author = sh("git", "log", "-1", "--format=%an <%ae> %aI %cn %cI", cwd=clone)
    assert author == "glm53 lab <lab@glm53-lab.invalid> 2026-09-30T12:00:00+00:00 glm53 lab 2026-09-30T12:00:00+00:00"


def test_the_second_profile_commit_changes_only_the_overlay(git_root, tmp_path):
    commits = commits_of()
    first, second = commits["profile"]["commits"]
    assert commits["profile"]["commit"] == second
    clone = tmp_path / "profile"
    sh("git", "clone", "-q", f"file://{git_root}/profile.git", str(clone))
    assert sh("git", "rev-list", "HEAD", cwd=clone).split() == [second, first]
    changed = sh("git", "diff", "--name-only", first, second, cwd=clone).split()
    assert len(changed) == 1 and changed[0].startswith(OVERLAY) and changed[0].endswith(".py")
    assert (clone / "tensorfold/config/prod-c8.env.example").is_file()
    assert (clone / "tensorfold/patches/Dockerfile.logprobs").is_file()


def test_python_caches_in_the_sources_stay_out(git_root, sim_copy):
    before = commits_of()
    cache = sim_copy / "kit" / "scripts" / "__pycache__"
    cache.mkdir()
    (cache / "x.cpython-311.pyc").write_bytes(b"\0")
    after, changes = materialize()
    assert after == before and changes == []
