"""dgx_spark.glm53.page_cache_evict run as a real module by ``ansible`` (ad hoc, local).

Each test warms real files on a disk file system, runs the module through
ansible-core, and checks the result, what the user reads, and the page cache as
util-linux fincore sees it (page_cache_oracle).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
import yaml

from ansible_collections.dgx_spark.glm53.plugins.modules import page_cache_evict
from ansible_collections.dgx_spark.glm53.tests.unit.plugins import ansiballz
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.page_cache_oracle import (
    MIB,
    Look,
    Reclaim,
    evictable_base,
    expect_warm,
    resident,
    resident_total,
    warm,
    write_file,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN = os.path.dirname(sys.executable)
# Run the module with the system Python a target would use, when there is one.
TARGET_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MODULE = "dgx_spark.glm53.page_cache_evict"
# Keys ansible-core adds to every module result; not the module's to document.
ANSIBLE_KEYS = {"_ansible_no_log", "action", "invocation", "changed", "failed", "warnings", "deprecations"}


@pytest.fixture(scope="module")
def scratch_base():
    return evictable_base()


@pytest.fixture
def scratch(scratch_base):
    path = tempfile.mkdtemp(prefix="pce-module-", dir=scratch_base)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _env(extra=None):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env.update(extra or {})
    return env


def run_module(args, check=False, env=None):
    """Run the module through ansible with the JSON callback; return (exit code, the host's result)."""
    command = [os.path.join(BIN, "ansible"), "localhost", "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON,
               "-m", MODULE, "-a", json.dumps(args)]
    if check:
        command.append("--check")
    env = _env(dict({"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"}, **(env or {})))
    proc = ansiballz.run(command, cwd=REPO, env=env, timeout=300)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail("ansible printed no JSON (rc %d): %s %s" % (proc.returncode, proc.stdout, proc.stderr))
    return proc.returncode, report["plays"][0]["tasks"][0]["hosts"]["localhost"]


def returned_always():
    return {name for name, spec in yaml.safe_load(page_cache_evict.RETURN).items() if spec["returned"] == "always"}


def check_figures(result, look, files):
    """The module's residency figures against fincore's look just before it ran, and after."""
    look.expect(result["resident_bytes_before"], "resident_bytes_before")
    assert result["resident_bytes_after"] == 0 == resident_total(files), result
    assert result["evicted_bytes"] == result["resident_bytes_before"], result
    assert result["changed"] is (result["resident_bytes_before"] > 0), result


def test_evicts_and_returns_the_documented_keys(scratch):
    files = [write_file(os.path.join(scratch, "m", "f%d" % i), 2 * MIB) for i in range(3)]
    warm(*files)
    look = Look(files)
    rc, result = run_module({"paths": [os.path.join(scratch, "m")]})
    assert rc == 0, result
    assert returned_always() <= set(result), result
    assert set(result) - ANSIBLE_KEYS <= set(yaml.safe_load(page_cache_evict.RETURN)), result
    assert result["file_count"] == 3 and result["file_bytes"] == 6 * MIB, result
    check_figures(result, look, files)

    rc, again = run_module({"paths": [os.path.join(scratch, "m")]})
    assert rc == 0 and again["changed"] is False, again


def _memory_cgroup(name):
    """Create a memory cgroup; return (its directory, cgroup version) or skip."""
    if os.geteuid() != 0:
        pytest.skip("creating a memory cgroup needs root")
    unified = "/sys/fs/cgroup"
    if os.path.exists(os.path.join(unified, "cgroup.controllers")):
        with open(os.path.join(unified, "cgroup.subtree_control")) as handle:
            if "memory" in handle.read().split():
                path = os.path.join(unified, name)
                os.mkdir(path)
                return path, 2
    legacy = "/sys/fs/cgroup/memory"
    if os.path.exists(os.path.join(legacy, "memory.limit_in_bytes")):
        path = os.path.join(legacy, name)
        os.mkdir(path)
        return path, 1
    pytest.skip("no memory cgroup controller to put pressure on the page cache with")
    return None


def _write(path, value):
    with open(path, "w") as handle:
        handle.write(value)


def test_figures_hold_when_the_kernel_reclaims_between_warming_and_the_run(scratch):
    """The fresh-clone flake: memory pressure took a warmed file before the module measured.

    The files are read from inside a memory cgroup, so their pages are charged to it;
    after fincore's look the cgroup is made to give back 4 MiB, which the kernel takes
    mostly from those files, as reclaim would on a busy machine. The module must report what
    was resident when it ran, not what the test once warmed.
    """
    files = [write_file(os.path.join(scratch, "m", "f%d" % i), 2 * MIB) for i in range(3)]
    for path in files:  # written here, the pages are charged to this process's cgroup: drop them
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    group, version = _memory_cgroup("pce-test-%d" % os.getpid())
    try:
        procs = os.path.join(group, "cgroup.procs")
        since = Reclaim()
        subprocess.run([sys.executable, "-c", "import sys\nfor p in sys.argv[1:]: open(p, 'rb').read()"] + files,
                       preexec_fn=lambda: _write(procs, str(os.getpid())), check=True)
        look = expect_warm(since, files)  # the warm-up in the cgroup warmed the files
        if version == 2:
            _write(os.path.join(group, "memory.reclaim"), str(4 * MIB))
        else:
            with open(os.path.join(group, "memory.usage_in_bytes")) as handle:
                usage = int(handle.read())
            _write(os.path.join(group, "memory.limit_in_bytes"), str(usage - 4 * MIB))
        rc, result = run_module({"paths": [os.path.join(scratch, "m")]})
    finally:
        os.rmdir(group)
    assert rc == 0, result
    # What the old test expected (all 6 MiB warmed) is not what was resident: the flake, made certain.
    assert result["resident_bytes_before"] <= 5 * MIB, "too little was reclaimed: the test proves nothing"
    check_figures(result, look, files)


def test_check_mode_reports_and_keeps_the_cache(scratch):
    path = write_file(os.path.join(scratch, "f"), 4 * MIB)
    warm(path)
    look = Look([path])
    rc, result = run_module({"paths": [path]}, check=True)
    assert rc == 0, result
    look.expect(result["resident_bytes_before"], "resident_bytes_before")
    assert result["changed"] is (result["resident_bytes_before"] > 0)
    assert result["evicted_bytes"] == 0
    look.expect(resident(path), "what fincore sees after check mode")


def test_tilde_is_expanded_on_the_target(scratch):
    path = write_file(os.path.join(scratch, "home", "models", "w"), 2 * MIB)
    warm(path)
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
    path = write_file(os.path.join(scratch, "f"), MIB)
    warm(path)
    gone = os.path.join(scratch, "not-there")
    rc, result = run_module({"paths": [path, gone], "missing": "ignore"})
    assert rc == 0, result
    assert "skipped" not in result
    assert result["skipped_paths"] == [{"path": gone, "reason": "missing"}]
    assert resident(path) == 0


def test_a_link_to_the_root_in_the_cache_is_not_walked(scratch):
    cache = os.path.join(scratch, "cache")
    path = write_file(os.path.join(cache, "w"), MIB)
    os.symlink("/", os.path.join(cache, "slash"))
    rc, result = run_module({"paths": [cache]})
    assert rc == 0, result
    assert result["file_count"] == 1
    assert result["skipped_paths"] == [{"path": os.path.join(cache, "slash"),
                                        "reason": "symlink to a directory outside paths: /"}]
    assert resident(path) == 0


# User errors: each names the option, what it must be and what it got.
USER_ERRORS = [
    ({"method": "fadvise"}, "method is fadvise but all of the following are missing: paths"),
    ({"method": "balloon", "keep_gib": 0.01}, "keep_gib=0.01 is below the "),
    ({"method": "balloon", "free_target_gib": -1}, "free_target_gib must be a positive finite number of GiB"),
    ({"method": "balloon", "keep_gib": "inf"}, "keep_gib must be a finite number of GiB, got inf"),
    ({"method": "balloon", "keep_gib": "nan"}, "keep_gib must be a finite number of GiB, got nan"),
    ({"paths": ["/"], "keep_gib": "-inf"}, "keep_gib must be a finite number of GiB, got -inf"),
    ({"paths": ["/"], "min_size": -1}, "min_size must be 0 or more bytes, got -1"),
    ({"paths": ["/"], "min_size": "1GiB"}, "argument 'min_size' is of type str"),
    ({"paths": ["/"], "method": "vmtouch"}, "value of method must be one of"),
    ({"paths": ["/nonexistent/glm53-weights"]}, "path(s) not found: /nonexistent/glm53-weights"),
]


def _error_play(path):
    """One playbook with a task per user error (each its own result: ignore_errors), so the
    module's answer to every case costs one ansible-playbook run, not one each."""
    tasks = [{"name": "Case %d" % index, MODULE: args, "ignore_errors": True}
             for index, (args, _message) in enumerate(USER_ERRORS)]
    path.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    return str(path)


def _playbook(playbook, env=None):
    return subprocess.run(
        [os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local",
         "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON, playbook],
        cwd=REPO, env=_env(env), capture_output=True, text=True, timeout=300, check=False)


def test_bad_input_fails_clearly(tmp_path):
    proc = _playbook(_error_play(tmp_path / "play.yml"),
                     {"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json"})
    tasks = json.loads(proc.stdout)["plays"][0]["tasks"]
    assert len(tasks) == len(USER_ERRORS), proc.stdout
    for task, (args, message) in zip(tasks, USER_ERRORS):
        result = task["hosts"]["localhost"]
        assert result.get("failed") is True and message in result["msg"], (args, result)


def _user_sees_only(output, message):
    assert message in output, output
    assert "An exception occurred" not in output and "traceback" not in output.lower(), output


def test_user_errors_read_as_the_message_alone_in_a_playbook(tmp_path):
    """What a user sees in a playbook with the default callbacks: each message, no traceback."""
    proc = _playbook(_error_play(tmp_path / "play.yml"))
    output = proc.stdout + proc.stderr
    assert "failed=0" in output and "ignored=%d" % len(USER_ERRORS) in output, output
    for _args, message in USER_ERRORS:
        _user_sees_only(output, message)


# Ad hoc (the minimal callback, and a failing exit code): one error the argument spec raises and
# one the module raises itself; the playbook test above has every case.
@pytest.mark.parametrize("args, message", [USER_ERRORS[7], USER_ERRORS[-1]])
def test_user_errors_read_as_the_message_alone_ad_hoc(args, message):
    adhoc = subprocess.run(
        [os.path.join(BIN, "ansible"), "localhost", "-i", "localhost,", "-c", "local",
         "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON, "-m", MODULE, "-a", json.dumps(args)],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300, check=False)
    assert adhoc.returncode != 0
    _user_sees_only(adhoc.stdout + adhoc.stderr, message)


def test_documentation_matches_the_argument_spec():
    doc = subprocess.run([os.path.join(BIN, "ansible-doc"), "--json", MODULE], cwd=REPO, env=_env(),
                         check=True, capture_output=True, text=True).stdout
    info = json.loads(doc)[MODULE]
    options = info["doc"]["options"]
    spec = page_cache_evict.ARGUMENT_SPEC
    assert sorted(options) == sorted(spec)
    for name, arg in spec.items():
        documented = options[name]
        assert documented["type"] == arg["type"], name
        assert documented.get("elements") == arg.get("elements"), name
        assert documented.get("default") == arg.get("default"), name
        assert documented.get("required", False) == arg.get("required", False), name
        assert sorted(documented.get("choices") or []) == sorted(arg.get("choices") or []), name
    assert info["doc"]["attributes"]["check_mode"]["support"] == "full"
    assert info["doc"]["attributes"]["diff_mode"]["support"] == "none"
    assert "%s:" % MODULE in page_cache_evict.EXAMPLES
