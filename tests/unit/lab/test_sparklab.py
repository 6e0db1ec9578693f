"""lab/sparklab/, the Spark lab as a package, and lab/spark_lab.py, its command line and
import facade: every module imports on its own, the facade hands out the package's own
objects, each lab file stays small, and the pid-file helpers of the background servers."""

import importlib
import os
import pkgutil
import signal
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
LAB = REPO / "lab"
sys.path.insert(0, str(LAB))

import spark_lab  # noqa: E402  pylint: disable=wrong-import-position
import sparklab  # noqa: E402  pylint: disable=wrong-import-position
from sparklab import daemons  # noqa: E402  pylint: disable=wrong-import-position
from sparklab.commands import LabError  # noqa: E402  pylint: disable=wrong-import-position

# A file does one job; one this long is doing several (house rule).
MAX_LINES = 500


def package_modules() -> list[types.ModuleType]:
    return [importlib.import_module(f"sparklab.{info.name}") for info in pkgutil.iter_modules(sparklab.__path__)]


def test_every_module_of_the_package_imports():
    names = sorted(module.__name__ for module in package_modules())
    assert "sparklab.cli" in names and "sparklab.lifecycle" in names
    assert len(names) == len(list((LAB / "sparklab").glob("*.py"))) - 1  # all but __init__


def test_each_lab_file_is_under_the_size_limit():
    files = sorted(LAB.glob("*.py")) + sorted((LAB / "sparklab").glob("*.py"))
    too_long = {str(f.relative_to(REPO)): n for f in files if (n := len(f.read_text().splitlines())) >= MAX_LINES}
    assert not too_long


def test_the_facade_hands_out_the_package_objects():
    """A name on spark_lab is the object its sparklab module defines (patch it there)."""
    owners = {}
    for module in package_modules():
        for name, value in vars(module).items():
            if getattr(value, "__module__", None) == module.__name__:
                owners[name] = value
    public = {n: v for n, v in vars(spark_lab).items() if callable(v) and getattr(v, "__module__", "").startswith("sparklab.")}
    assert {"up", "down", "reset", "status", "node_exec", "make_node", "ensure_git_repos", "Lab", "main"} <= set(public)
    assert all(owners[name] is value for name, value in public.items())
    assert spark_lab.GIT_ROOT is sys.modules["sparklab.labgit"].GIT_ROOT


def test_process_argv_reads_a_live_command_line_and_nothing_else():
    assert daemons.process_argv(os.getpid()) == Path("/proc/self/cmdline").read_bytes().split(b"\0")
    assert daemons.process_argv(str(os.getpid()))[0]  # a pid read back from a JSON answer
    assert daemons.process_argv(1 << 30) == []
    assert daemons.process_argv(None) == []
    assert daemons.process_argv("x") == []


def test_pid_in_takes_a_pid_only_while_it_is_ours(tmp_path):
    pid_file = tmp_path / "x.pid"
    assert daemons.pid_in(pid_file, lambda pid: True) is None  # no file
    pid_file.write_text("garbage\n")
    assert daemons.pid_in(pid_file, lambda pid: True) is None
    pid_file.write_text("4242\n")
    assert daemons.pid_in(pid_file, lambda pid: pid == 4242) == 4242
    assert daemons.pid_in(pid_file, lambda pid: False) is None


def test_stop_pid_file_stops_our_process_and_drops_the_file(tmp_path):
    pid_file = tmp_path / "x.pid"
    assert daemons.stop_pid_file(pid_file, lambda pid: True) is False  # nothing ran
    with subprocess.Popen(["sleep", "30"]) as child:
        # Reaped as soon as it dies: terminate() waits for /proc/<pid> to go, which a zombie keeps.
        reaper = threading.Thread(target=child.wait)
        reaper.start()
        pid_file.write_text(f"{child.pid}\n")
        assert daemons.stop_pid_file(pid_file, lambda pid: False) is False  # not ours: left alone
        assert child.poll() is None and not pid_file.exists()
        pid_file.write_text(f"{child.pid}\n")
        assert daemons.stop_pid_file(pid_file, lambda pid: pid == child.pid) is True
        reaper.join(timeout=15)
        assert child.returncode == -signal.SIGTERM and not pid_file.exists()


def test_start_server_logs_and_records_its_pid_and_wait_ready_polls_until_it_serves(tmp_path):
    log, pid_file = tmp_path / "x.log", tmp_path / "x.pid"
    proc = daemons.start_server(["sh", "-c", "echo started; exec sleep 30"], log, pid_file)
    try:
        assert pid_file.read_text() == f"{proc.pid}\n"
        calls = []
        assert daemons.wait_ready(proc, lambda: calls.append(1) or len(calls) == 3, 15, 0.01, "x", log, 5) is True
        assert len(calls) == 3
        assert daemons.wait_ready(proc, lambda: False, 0.05, 0.01, "x", log, 5) is False  # timed out
    finally:
        proc.kill()
        proc.wait(timeout=15)
    assert log.read_text() == "started\n"


def test_wait_ready_says_how_a_server_that_exits_ended(tmp_path):
    log, pid_file = tmp_path / "x.log", tmp_path / "x.pid"
    log.write_text("an earlier run\n")  # appended to, not replaced
    proc = daemons.start_server(["sh", "-c", "echo one; echo two >&2; exit 3"], log, pid_file)
    with pytest.raises(LabError) as err:
        daemons.wait_ready(proc, lambda: False, 15, 0.01, "the x server", log, 2)
    assert str(err.value) == f"the x server exited 3; last lines of {log}:\none\ntwo"


def test_a_node_is_recreated_for_another_image_memory_limit_or_device_rules():
    from sparklab import nodes  # pylint: disable=import-outside-toplevel
    limit = spark_lab.NODE_MEMORY
    rules = ["c 10:58 rwm", "c 231:* rwm"]
    info = {"Config": {"Labels": {"glm53-lab.image": "glm53-lab/node:abc"}},
            "HostConfig": {"Memory": limit, "MemorySwap": limit, "DeviceCgroupRules": rules}}
    assert nodes.recreate_reason(info, "glm53-lab/node:abc") is None
    # A node made before it could be given /dev/infiniband's devices.
    info["HostConfig"]["DeviceCgroupRules"] = None
    assert nodes.recreate_reason(info, "glm53-lab/node:abc") == "device rules changed"
    assert nodes.recreate_reason(info, "glm53-lab/node:def") == "image changed"
    # A node made before the limit existed (0: unlimited), or with swap beyond it (docker's
    # default for --memory alone is twice the limit).
    for memory, swap in ((0, 0), (limit, 2 * limit), (limit // 2, limit // 2)):
        info["HostConfig"] = {"Memory": memory, "MemorySwap": swap, "DeviceCgroupRules": rules}
        reason = nodes.recreate_reason(info, "glm53-lab/node:abc")
        assert reason and reason.startswith("memory limit") and str(limit) in reason
    # A kernel without swap accounting: dockerd keeps the limit and drops the swap limit (-1).
    info["HostConfig"] = {"Memory": limit, "MemorySwap": -1, "DeviceCgroupRules": rules}
    assert nodes.recreate_reason(info, "glm53-lab/node:abc") is None
    assert nodes.recreate_reason({"Config": {"Labels": None}, "HostConfig": {}}, "x") == "image changed"
