"""Real wheelhouses for the offline_venv tests, built on this controller with the same
``pip_download_argv`` the role uses (pip's configured index), cached under
tests/output/wheelhouse/ so reruns do not download again."""

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._wheelhouse import (
    locked_download_argv,
    pip_download_argv,
)

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CACHE = os.path.join(ROOT, "tests", "output", "wheelhouse")
ROLE_VARS = os.path.join(ROOT, "roles", "hf_weights", "vars", "main.yml")
ROLE_LOCK = os.path.join(ROOT, "roles", "hf_weights", "files", "requirements-node.txt")


def python_info(python):
    """(X.Y, can make a venv with pip) of an interpreter, or None when it does not run."""
    try:
        proc = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2]); import ensurepip, venv"],
                              capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return None
    if not proc.stdout.strip():
        return None
    return proc.stdout.strip(), proc.returncode == 0


def venv_python():
    """(path, X.Y) of a real Python 3.10+ with ensurepip on this controller: Debian's, else
    the one under the test venv; None when there is none."""
    base = getattr(sys, "_base_executable", sys.executable)
    for python in ("/usr/bin/python3", os.path.realpath(base)):
        info = python_info(python)
        if info and info[1] and tuple(int(part) for part in info[0].split(".")) >= (3, 10):
            return python, info[0]
    return None


def hf_requirements():
    """(requirements, pip version) the hf_weights role pins."""
    with open(ROLE_VARS) as handle:
        data = yaml.safe_load(handle)
    return list(data["_hf_weights_requirements"]), str(data["_hf_weights_pip_version"])


def build(arch, python_version, requirements, pip_version):
    """The wheelhouse directory for this platform and set, downloaded once."""
    key = hashlib.sha256(repr((sorted(requirements), pip_version)).encode()).hexdigest()[:12]
    return _download(arch, python_version, key, lambda partial: pip_download_argv(
        arch, python_version, requirements, partial, pip_version, pip_command=(sys.executable, "-m", "pip")))


def build_locked(arch, python_version, lock=ROLE_LOCK):
    """The wheelhouse for this platform from a hash lock, as the role downloads it (pip checks
    every file against the lock), downloaded once per lock content."""
    with open(lock, "rb") as handle:
        key = "lock-" + hashlib.sha256(handle.read()).hexdigest()[:12]
    return _download(arch, python_version, key, lambda partial: locked_download_argv(
        arch, python_version, lock, partial, pip_command=(sys.executable, "-m", "pip")))


def _download(arch, python_version, key, argv_for):
    """Download once into CACHE/<arch>-py<X.Y>-<key>, under a lock: the unit tests (two
    workers) and the lab tests (test_offline_venv) run side by side in `make test` and ask for
    the same wheelhouse. A finished one is never removed or rewritten while another reads it."""
    dest = os.path.join(CACHE, "%s-py%s-%s" % (arch, python_version, key))
    if os.path.exists(os.path.join(dest, ".complete")):
        return dest
    os.makedirs(CACHE, exist_ok=True)
    with open(dest + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(dest, ".complete")):  # another process made it meanwhile
            return dest
        partial = tempfile.mkdtemp(prefix=os.path.basename(dest) + ".partial-", dir=CACHE)
        try:
            argv = argv_for(partial)
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
            assert proc.returncode == 0, "pip download failed:\n%s\n%s" % (proc.stdout[-3000:], proc.stderr[-3000:])
            with open(os.path.join(partial, ".complete"), "w") as handle:
                handle.write(" ".join(argv) + "\n")
            shutil.rmtree(dest, ignore_errors=True)  # an unfinished one of a killed run, never a complete one
            os.rename(partial, dest)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return dest
