"""wait_for_slots on the lab: rank containers that die make the wait fail at once.

Rank 0 (glm53-tf-r0 on spark-head) and rank 1 (glm53-tf-r1 on spark-worker) are tiny
busybox containers started as `spark`, each printing two boot lines and sleeping; the
module runs on the head as `spark` and reaches the worker with BatchMode ssh, as the kit
does. The lab has no engine, so the HTTP side never gets ready: what is proven is the
fast failure, its message and the last log lines. Wall times are measured here.
"""

from __future__ import annotations

import threading
import time

import lab_faults
from lab_faults import HEAD, WORKER

PLAYBOOK = "tests/integration/playbooks/wait_for_slots.yml"
TASK = "Wait for 8 request slots on both ranks"
IMAGE = "glm53-lab/busybox:latest"
TIMEOUT = 120
# One poll (docker inspect here and over ssh, two HTTP calls to a closed port) is well under
# this; waiting for the 120 s timeout is far over it.
OVERDUE_POLL = TIMEOUT / 4


def start_rank(node: str, rank: int) -> None:
    name = f"glm53-tf-r{rank}"
    boot = f"echo '[boot] r{rank} +0.1s container started'; echo 'rank {rank} waiting for the master'; exec sleep 600"
    lab_faults.sh(node, f"docker rm -f {name} >/dev/null 2>&1; docker run -d --name {name} {IMAGE} sh -c \"{boot}\"",
                  user="spark")


def remove_ranks() -> None:
    lab_faults.sh(HEAD, "docker rm -f glm53-tf-r0 >/dev/null 2>&1; true", user="spark")
    lab_faults.sh(WORKER, "docker rm -f glm53-tf-r1 >/dev/null 2>&1; true", user="spark")


def kill_later(node: str, name: str, delay: float) -> threading.Thread:
    def kill():
        time.sleep(delay)
        lab_faults.sh(node, f"docker kill {name} >/dev/null", user="spark")

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


def run_wait(run_playbook, ident):
    """(the module's result, how long its task ran as Ansible timed it)."""
    result = run_playbook(PLAYBOOK, extravars={"wfs_timeout": TIMEOUT}, ident=ident, expect_success=False)
    result.assert_failed()
    return result.task_results(TASK)[HEAD], result.task_seconds(TASK, HEAD)


def test_killed_worker_rank_fails_the_wait_fast_with_its_last_lines(run_playbook):
    try:
        start_rank(HEAD, 0)
        start_rank(WORKER, 1)
        killer = kill_later(WORKER, "glm53-tf-r1", delay=8)
        res, seconds = run_wait(run_playbook, "wait_for_slots-kill-r1")
        killer.join()
    finally:
        remove_ranks()
    msg = res["msg"]
    assert msg.startswith("rank 1 (glm53-tf-r1 on spark-worker) exited with code 137 (OOMKilled: false): last lines: "
                          "[boot] r1 +0.1s container started | rank 1 waiting for the master"), msg
    # Workers are checked at most every 10 s: the kill at ~8 s ends the wait, not its timeout.
    assert seconds < TIMEOUT, seconds
    head, worker = res["ranks"]
    assert (head["rank"], head["node"], head["container"], head["state"]) == (0, HEAD, "glm53-tf-r0", "running")
    assert (worker["rank"], worker["node"], worker["state"], worker["exit_code"], worker["oom_killed"]) == (
        1, WORKER, "exited", 137, False)
    assert worker["log_tail"] == ["[boot] r1 +0.1s container started", "rank 1 waiting for the master"]
    assert res["ready"] is False and res["canary"] is None and res["changed"] is False


def test_killed_head_rank_fails_at_the_next_poll(run_playbook):
    try:
        start_rank(HEAD, 0)
        start_rank(WORKER, 1)
        lab_faults.sh(HEAD, "docker kill glm53-tf-r0 >/dev/null", user="spark")
        res, seconds = run_wait(run_playbook, "wait_for_slots-kill-r0")
    finally:
        remove_ranks()
    assert res["msg"].startswith("rank 0 (glm53-tf-r0 on spark-head) exited with code 137 (OOMKilled: false): "
                                 "last lines: [boot] r0 +0.1s container started"), res["msg"]
    assert seconds < TIMEOUT, seconds


def test_missing_containers_are_waited_for_and_named_at_the_timeout(run_playbook):
    remove_ranks()
    result = run_playbook(PLAYBOOK, extravars={"wfs_timeout": 3}, ident="wait_for_slots-absent", expect_success=False)
    result.assert_failed()
    res = result.task_results(TASK)[HEAD]
    assert res["msg"] == ("not ready after 3 s: rank 0 (glm53-tf-r0 on spark-head) does not exist: start the ranks "
                          "first, or name the container that runs them"), res["msg"]
    assert [rank["state"] for rank in res["ranks"]] == ["absent", "absent"], res["ranks"]
    # It waited its own 3 s, not the usual timeout.
    assert 3 <= result.task_seconds(TASK, HEAD) < TIMEOUT


def test_missing_containers_fail_at_once_when_no_start_is_under_way(run_playbook):
    # As the tensorfold role probes before deciding to start: nothing is starting, so a
    # missing rank will not appear by waiting (the timeout is the usual 120 s).
    remove_ranks()
    result = run_playbook(PLAYBOOK, extravars={"wfs_timeout": TIMEOUT, "wfs_start_finished": True},
                          ident="wait_for_slots-absent-finished", expect_success=False)
    result.assert_failed()
    res = result.task_results(TASK)[HEAD]
    assert res["msg"] == ("not ready: rank 0 (glm53-tf-r0 on spark-head) does not exist: start the ranks "
                          "first, or name the container that runs them"), res["msg"]
    assert [rank["state"] for rank in res["ranks"]] == ["absent", "absent"], res["ranks"]
    assert res["elapsed"] < OVERDUE_POLL, res["elapsed"]  # the first poll, not the timeout
