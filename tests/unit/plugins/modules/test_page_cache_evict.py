"""dgx_spark.glm53.page_cache_evict run as a real module by ``ansible`` (ad hoc, local).

Each test warms real files on a disk file system, runs the module through
ansible-core with the JSON callback, and checks the result and the page cache.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _page_cache as pc
from ansible_collections.dgx_spark.glm53.plugins.modules import page_cache_evict

MIB = 1 << 20
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")
# Run the module with the system Python a target would use, when there is one.
TARGET_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
FINCORE = shutil.which("fincore")
MODULE = "dgx_spark.glm53.page_cache_evict"


def resident(path):
    """Page-cache bytes of ``path``: util-linux fincore when present (independent code)."""
    if FINCORE:
        out = subprocess.run([FINCORE, "--bytes", "--noheadings", "--raw", "--output", "RES", path],
                             check=True, capture_output=True, text=True).stdout
        return int(out.split()[0])
    return pc.resident_bytes(path)


def make_warm_file(path, size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(os.urandom(size))
        handle.flush()
        os.fsync(handle.fileno())
    with open(path, "rb") as handle:
        while handle.read(4 * MIB):
            pass
    assert resident(path) == size
    return path


@pytest.fixture
def scratch():
    for base in (tempfile.gettempdir(), os.path.join(REPO, "tests", "output", "tmp")):
        os.makedirs(base, exist_ok=True)
        path = tempfile.mkdtemp(prefix="pce-module-", dir=base)
        probe = make_warm_file(os.path.join(path, "probe"), MIB)
        fd = os.open(probe, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        evictable = resident(probe) == 0  # false on tmpfs: its pages are the files
        os.unlink(probe)
        if evictable:
            break
        shutil.rmtree(path)
    else:
        pytest.fail("no directory on an evictable (disk) file system")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run_module(args, check=False, env=None):
    """Run the module through ansible; return (exit code, the host's result)."""
    command = [ANSIBLE, "localhost", "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON,
               "-m", MODULE, "-a", json.dumps(args)]
    if check:
        command.append("--check")
    full_env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
                    ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json",
                    ANSIBLE_NOCOLOR="1")
    full_env.update(env or {})
    proc = subprocess.run(command, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=300,
                          check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail("ansible printed no JSON (rc %d): %s %s" % (proc.returncode, proc.stdout, proc.stderr))
    return proc.returncode, report["plays"][0]["tasks"][0]["hosts"]["localhost"]


RETURNED_ALWAYS = {
    "changed", "method", "file_count", "file_bytes", "resident_bytes_before", "resident_bytes_after",
    "evicted_bytes", "unmeasured", "measured_with", "memory_before", "memory_after", "skipped_paths", "duplicates",
    "below_min_size", "elapsed",
}


def test_evicts_and_returns_the_documented_keys(scratch):
    files = [make_warm_file(os.path.join(scratch, "m", "f%d" % i), 2 * MIB) for i in range(3)]
    rc, result = run_module({"paths": [os.path.join(scratch, "m")]})
    assert rc == 0, result
    assert RETURNED_ALWAYS <= set(result), result
    assert result["changed"] is True, result
    assert result["file_count"] == 3 and result["evicted_bytes"] == 6 * MIB, result
    assert result["resident_bytes_after"] == 0, result
    assert [resident(f) for f in files] == [0, 0, 0]

    rc, again = run_module({"paths": [os.path.join(scratch, "m")]})
    assert rc == 0 and again["changed"] is False, again


def test_check_mode_reports_and_keeps_the_cache(scratch):
    path = make_warm_file(os.path.join(scratch, "f"), 4 * MIB)
    rc, result = run_module({"paths": [path]}, check=True)
    assert rc == 0, result
    assert result["changed"] is True
    assert result["resident_bytes_before"] == 4 * MIB and result["evicted_bytes"] == 0
    assert resident(path) == 4 * MIB


def test_tilde_is_expanded_on_the_target(scratch):
    path = make_warm_file(os.path.join(scratch, "home", "models", "w"), 2 * MIB)
    rc, result = run_module({"paths": ["~/models"]}, env={"HOME": os.path.join(scratch, "home")})
    assert rc == 0, result
    assert result["file_count"] == 1 and resident(path) == 0


def test_missing_path_fails_with_its_name(scratch):
    gone = os.path.join(scratch, "not-there")
    rc, result = run_module({"paths": [gone]})
    assert rc != 0
    assert result["failed"] is True and gone in result["msg"]


def test_missing_ignored_is_listed_and_the_task_is_not_marked_skipped(scratch):
    # A result key named "skipped" would make ansible show the task as skipped.
    path = make_warm_file(os.path.join(scratch, "f"), MIB)
    gone = os.path.join(scratch, "not-there")
    rc, result = run_module({"paths": [path, gone], "missing": "ignore"})
    assert rc == 0, result
    assert "skipped" not in result
    assert result["skipped_paths"] == [{"path": gone, "reason": "missing"}]
    assert resident(path) == 0


@pytest.mark.parametrize("args, message", [
    ({"method": "fadvise"}, "method is fadvise but all of the following are missing: paths"),
    ({"method": "balloon", "keep_gib": 1}, "below the 2.0 GiB floor"),
    ({"paths": ["/"], "method": "vmtouch"}, "value of method must be one of"),
])
def test_bad_input_fails_clearly(args, message):
    rc, result = run_module(args)
    assert rc != 0 and message in result["msg"]


def test_documentation_matches_the_argument_spec():
    doc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "--json", MODULE],
                         cwd=REPO, env=dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg")),
                         check=True, capture_output=True, text=True).stdout
    info = json.loads(doc)[MODULE]
    assert set(info["doc"]["options"]) == {"paths", "follow_symlinks", "min_size", "method", "keep_gib", "missing"}
    assert RETURNED_ALWAYS - {"changed"} <= set(info["return"])
    assert info["doc"]["attributes"]["check_mode"]["support"] == "full"
    assert info["doc"]["attributes"]["diff_mode"]["support"] == "none"
    assert set(info["doc"]["options"]["method"]["choices"]) == set(pc.METHODS)
    assert "dgx_spark.glm53.page_cache_evict" in page_cache_evict.EXAMPLES
