"""_deadline.run_with_timeout on real processes. Wall times are measured here, around
the calls, never taken from the results under test."""

import os
import threading
import time

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import OVERDUE, alive, gone_within, timed
from ansible_collections.dgx_spark.glm53.plugins.module_utils import _deadline as dl


def test_run_with_timeout_returns_output_and_exit_status():
    result = dl.run_with_timeout(["sh", "-c", "echo out; echo err >&2; exit 3"], 5)
    assert result == {"rc": 3, "stdout": "out\n", "stderr": "err\n", "timed_out": False,
                      "command": "sh -c 'echo out; echo err >&2; exit 3'", "timeout": 5, "error": None}


def test_run_with_timeout_kills_a_wedged_command_and_names_it():
    result, wall = timed(dl.run_with_timeout, ["sleep", "30"], 1)
    assert 1 <= wall < OVERDUE * 1, wall
    assert result["timed_out"] is True
    assert result["rc"] == -15
    assert result["command"] == "sleep 30"
    assert "`sleep 30` did not finish within 1s" in result["error"]


def test_run_with_timeout_kills_children_that_ignore_sigterm(tmp_path):
    pidfile = tmp_path / "pid"
    script = "trap '' TERM; sleep 30 & echo $! > %s; echo started; wait; wait" % pidfile
    result, wall = timed(dl.run_with_timeout, ["sh", "-c", script], 1)
    # The deadline, then SIGTERM (ignored) and KILL_GRACE before SIGKILL.
    assert 1 + dl.KILL_GRACE <= wall < OVERDUE * (1 + dl.KILL_GRACE), wall
    assert result["timed_out"] is True and result["rc"] == -9, result
    assert result["stdout"] == "started\n"
    grandchild = int(pidfile.read_text())
    # Killed, it is gone once the kernel ran its exit; half its own 30 s is still proof.
    assert gone_within(lambda: [grandchild] if alive(grandchild) else [], 15) == []


def test_run_with_timeout_is_not_held_by_a_descendant_that_left_the_group():
    # The escaped sleep keeps stdout open; a pipe reader would wait for it.
    result, wall = timed(dl.run_with_timeout, ["sh", "-c", "setsid sleep 30 & echo $!"], 5)
    try:
        assert wall < 5, "held until the deadline by the escaped sleep: %.1fs" % wall
        assert result["rc"] == 0 and result["timed_out"] is False
    finally:
        os.kill(int(result["stdout"]), 9)


def test_run_with_timeout_reports_a_missing_command():
    result = dl.run_with_timeout(["/nonexistent/tool", "-x"], 1)
    assert result["rc"] is None and result["timed_out"] is False
    assert result["error"] == "cannot run /nonexistent/tool: ENOENT (No such file or directory)"


def test_run_with_timeout_stdout_path_can_be_followed_while_the_command_runs(tmp_path):
    # The command prints its second line only after the watcher read the first from the
    # file: it can finish only if its output could be followed while it ran.
    out = tmp_path / "out"
    seen = tmp_path / "seen"
    timeout = 10
    script = "echo first; while [ ! -e %s ]; do sleep 0.02; done; echo second" % seen

    def follow():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if out.exists() and out.read_text() == "first\n":
                seen.touch()
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=follow)
    watcher.start()
    result = dl.run_with_timeout(["sh", "-c", script], timeout, stdout_path=str(out))
    watcher.join()
    assert result["timed_out"] is False and result["rc"] == 0, result
    assert result["stdout"] == "first\nsecond\n"
    assert out.read_text() == "first\nsecond\n"
