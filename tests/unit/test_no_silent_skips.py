"""The skip policy of tests/conftest.py, run for real: a throwaway suite with that conftest,
under CI=true and without, in a child pytest."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

SUITE = """
import pytest

def test_passes():
    pass

def test_skips():
    pytest.skip("no frobnicator here")

@pytest.mark.parametrize("n", [1, 2])
def test_skips_with_params(n):
    pytest.skip("kernel feature this machine lacks")
"""


def run(tmp_path, ci, allowlist=None):
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    shutil.copy(CONFTEST, suite / "conftest.py")
    (suite / "test_suite.py").write_text(SUITE)
    if allowlist is not None:
        (suite / "skip_allowlist.txt").write_text(allowlist)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull,
                           "--rootdir", str(suite), str(suite)],
                          capture_output=True, text=True, env=env, cwd=suite, timeout=60, check=False)


def test_a_skip_fails_the_run_under_ci_and_is_named(tmp_path):
    proc = run(tmp_path, ci=True)
    assert proc.returncode == 1, proc.stdout
    assert "skips: 3 (0 on skip_allowlist.txt)" in proc.stdout
    assert ("skipped, not allow-listed, FAILS THE RUN (CI=true): test_suite.py::test_skips: no frobnicator here"
            in proc.stdout), proc.stdout


def test_without_ci_a_skip_is_counted_and_flagged_but_passes(tmp_path):
    proc = run(tmp_path, ci=False)
    assert proc.returncode == 0, proc.stdout
    assert "skips: 3 (0 on skip_allowlist.txt)" in proc.stdout
    assert "would fail under CI=true: test_suite.py::test_skips" in proc.stdout


def test_allow_listed_skips_with_a_reason_pass_under_ci(tmp_path):
    allow = ("# comment\n\ntest_suite.py::test_skips  # needs a frobnicator (hardware)\n"
             "test_suite.py::test_skips_with_params  # a kernel feature\n")
    proc = run(tmp_path, ci=True, allowlist=allow)
    assert proc.returncode == 0, proc.stdout
    assert "skips: 3 (3 on skip_allowlist.txt)" in proc.stdout


def test_an_entry_without_a_reason_is_refused(tmp_path):
    proc = run(tmp_path, ci=True, allowlist="test_suite.py::test_skips\n")
    assert proc.returncode != 0
    assert "skip_allowlist.txt:1: expected `node-id  # reason`" in proc.stdout + proc.stderr


@pytest.mark.parametrize("ci", [True, False])
def test_no_skip_no_complaint(tmp_path, ci):
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(CONFTEST, suite / "conftest.py")
    (suite / "test_suite.py").write_text("def test_passes():\n    pass\n")
    env = dict(os.environ, CI="true" if ci else "")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull,
                           "--rootdir", str(suite), str(suite)],
                          capture_output=True, text=True, env=env, cwd=suite, timeout=60, check=False)
    assert proc.returncode == 0 and "skips: 0 (0 on skip_allowlist.txt)" in proc.stdout, proc.stdout
