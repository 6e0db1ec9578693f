"""dgx_spark.glm53.hf_mirror killed or stalled mid-copy, run as a real module by ``ansible``
with the real rsync (local destination, or a worker reached through a stand-in ssh that runs
the remote command on this machine).

Processes are found and judged here from /proc (tests/unit/plugins/processes.py), the copy
from the bytes on disk; never from the module's own record of them.
"""

import os
import signal
import time

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.hf_cache import tree
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.modules import test_hf_mirror as _mirror_tests
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.modules.test_hf_mirror import (
    args_for, expected_tree, parse, run_module)
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import (
    alive, cmdline, descendants, parent, wait_until)

cache = _mirror_tests.cache  # the fixture (overrides pytest's own `cache`, as in test_hf_mirror)

# Slow enough that a copy of the ~9 MiB fixture is still running when the test acts on it.
BWLIMIT = 512  # KiB/s over all streams
IO_TIMEOUT = 30  # hf_mirror's io_timeout default: rsync --timeout of these runs


def streams_of(proc):
    """Pids of the blob streams under the ansible process ``proc`` (the rsyncs given --bwlimit),
    once at least one runs and has started writing."""
    return [pid for pid in descendants(proc.pid)
            if any(arg.startswith("--bwlimit=") for arg in cmdline(pid)) and "rsync" in os.path.basename(
                (cmdline(pid) or [""])[0])]


def finish(proc):
    stdout, stderr = proc.communicate(timeout=120)
    return parse(proc.returncode, stdout, stderr)


def kill_all(pids):
    """Clean up after a failing test: the processes it started, by pid."""
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)


def wait_for_streams(proc, worker):
    """The stream rsyncs of a running copy, once bytes reach the worker."""
    def started():
        found = streams_of(proc)
        blobs = [os.path.join(base, name) for base, _dirs, names in os.walk(str(worker)) for name in names
                 if "/blobs/" in os.path.join(base, name)]
        return found if found and any(os.path.getsize(b) > 0 for b in blobs) else None
    found = wait_until(started, 60)
    assert found, "no rsync stream started under ansible pid %d" % proc.pid
    return found


def test_a_killed_module_leaves_no_rsync_and_the_rerun_completes(cache):
    proc = run_module(args_for(cache, streams=2, bwlimit=BWLIMIT), background=True)
    streams = wait_for_streams(proc, cache["worker"])
    # What Ansible's async limit does: SIGKILL to the module (here to it alone, not its group).
    module = parent(streams[0])
    assert "AnsiballZ_hf_mirror" in " ".join(cmdline(module)), cmdline(module)
    first_run = sorted(set(streams + descendants(module)))
    try:
        os.kill(module, signal.SIGKILL)
        finish(proc)
        # The stream rsyncs die with the module (pdeathsig); the receiver each forks ends on the
        # closed pipe, at the latest by rsync's own --timeout (the module's io_timeout): on a
        # loaded machine that can take more than a few seconds.
        left = wait_until(lambda: not [pid for pid in first_run if alive(pid)], IO_TIMEOUT + 10)
        assert left, "rsync of the killed run still running: %s" % [cmdline(p) for p in first_run if alive(p)]
        rc, result = run_module(args_for(cache))
        assert rc == 0, result
        assert tree(cache["worker"] / "hub") == expected_tree(cache)
    finally:
        kill_all(first_run)


def test_a_rerun_ends_the_copy_a_killed_play_left_running(cache):
    proc = run_module(args_for(cache, streams=2, bwlimit=BWLIMIT), background=True)
    streams = wait_for_streams(proc, cache["worker"])
    module = parent(streams[0])
    first_run = sorted(set([module] + descendants(module)))
    try:
        # The play is gone (its controller killed); the module it started on the head copies on.
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        time.sleep(0.5)
        assert alive(module) and all(alive(pid) for pid in streams)
        rc, result = run_module(args_for(cache))
        assert rc == 0, result
        assert not [pid for pid in first_run if alive(pid)], [cmdline(p) for p in first_run if alive(p)]
        assert module in [writer["pid"] for writer in result["ended_writers"]], result["ended_writers"]
        assert any("ended" in warning and "earlier copy" in warning for warning in result["warnings"]), result
        assert tree(cache["worker"] / "hub") == expected_tree(cache)
    finally:
        kill_all(first_run)


def fake_ssh(tmp_path):
    """A directory holding an ``ssh`` that logs its pid and arguments, then runs the remote
    command here (the "worker" is this machine), as the process rsync talks to."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    log = tmp_path / "ssh.log"
    script = bin_dir / "ssh"
    script.write_text(
        '#!/bin/sh\n'
        'echo "$$ $*" >> %s\n'
        'while [ $# -gt 0 ]; do case "$1" in -o|-l|-p|-i) shift 2;; -*) shift;; *) break;; esac; done\n'
        'shift\n'
        'exec sh -c "exec $*"\n' % log)
    script.chmod(0o755)
    return str(bin_dir), log


def test_a_worker_that_stops_answering_fails_within_the_io_timeout_naming_it(cache, tmp_path):
    bin_dir, log = fake_ssh(tmp_path)
    args = args_for(cache, target="spark@198.18.1.11", node="spark-worker", dest=str(cache["worker"]),
                    streams=1, bwlimit=BWLIMIT, io_timeout=4)
    proc = run_module(args, background=True, path=bin_dir)
    stopped = []
    try:
        wait_for_streams(proc, cache["worker"])
        # The worker's rsync (the stand-in ssh became it) and the receiver it forked stop: no data, no
        # error, as behind a dead link.
        servers = [int(line.split()[0]) for line in log.read_text().splitlines() if "--server" in line]
        stopped = [pid for server in servers if alive(server) for pid in [server] + descendants(server)]
        assert stopped, log.read_text()
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        rc, result = finish(proc)
        took = time.monotonic() - started
    finally:
        kill_all(stopped)
    assert rc != 0 and result["failed"] is True
    assert took < 4 + 15, took
    msg = result["msg"]
    assert msg.startswith("copying to spark-worker (spark@198.18.1.11) failed (exit "), msg
    assert "no data moved for 4s: the link to 198.18.1.11 is down or the worker spark-worker (spark@198.18.1.11) " \
           "stopped answering: check the CX7 link" in msg, msg
    calls = log.read_text().splitlines()
    assert calls and all("-o ServerAliveInterval=2 -o ServerAliveCountMax=3" in line for line in calls), calls
    assert all("--timeout=4" in line for line in calls if "--server" in line), calls
