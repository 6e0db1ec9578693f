"""The watchdog and the operations playbooks on path vllm: ranks made from the plan the deploy
recorded (docker run of each rank's container parameters), workers first, and a heal that reads
each node's GID table again, since a link event moves the RoCE v2 GID index NCCL must use.

Cost: one deployment of path vllm and the watchdog's timer; each heal restarts the ranks."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lab_faults import HEAD, WORKER, sh

SITE = "playbooks/site.yml"
WATCHDOG = "playbooks/watchdog.yml"
STATE = "/home/spark/.local/state/glm53-vllm"
INTERVAL = 5
SETTINGS = {"watchdog_interval": INTERVAL, "watchdog_canary_timeout": 5, "watchdog_grace_seconds": 600,
            "watchdog_heals_per_hour": 60}
HEAL_DEADLINE = 3 * INTERVAL + 150  # a bound on the wait on a loaded machine, not a measurement


def spark(node, script, check=True):
    return sh(node, f"export XDG_RUNTIME_DIR=/run/user/$(id -u); {script}", user="spark", check=check)


def rank(node):
    """``(started_at, running, env)`` of the node's vLLM rank, or None."""
    run = spark(node, "docker inspect -f '{{json .}}' glm53-vllm", check=False)
    if run.returncode != 0:
        return None
    facts = json.loads(run.stdout)
    env = dict(item.split("=", 1) for item in facts["Config"]["Env"] if "=" in item)
    return facts["State"]["StartedAt"], facts["State"]["Running"], env


def heals():
    return json.loads(spark(HEAD, f"cat {STATE}/heals.json 2>/dev/null || echo []").stdout or "[]")


def log_text():
    return spark(HEAD, f"cat {STATE}/ops.log 2>/dev/null || true").stdout


def wait_heal(count_before):
    deadline = time.monotonic() + HEAL_DEADLINE
    while time.monotonic() < deadline:
        done = [h for h in heals()[count_before:] if h.get("result") in ("ready", "failed")]
        if done:
            return done[0]
        time.sleep(1)
    raise AssertionError("no heal within %d s:\n%s" % (HEAL_DEADLINE, log_text()[-3000:]))


@pytest.fixture(scope="module")
def watched(lab):
    from conftest import PlaybookRunner  # pylint: disable=import-outside-toplevel
    runner = PlaybookRunner(Path(lab.inventory), "watchdog-vllm-module")
    runner("playbooks/docker_runtime.yml", extravars={"ansible_user": "admin", "docker_runtime_user": "spark"},
           cmdline="-b")
    runner(SITE, extravars={"path": "vllm"})
    sh(HEAD, "loginctl enable-linger spark")
    runner(WATCHDOG, extravars=SETTINGS)
    yield runner
    runner(WATCHDOG, extravars={"watchdog_state": "absent"})


def test_a_killed_worker_rank_is_healed_workers_first_from_the_recorded_plan(watched):
    before, count = (rank(HEAD), rank(WORKER)), len(heals())
    spark(WORKER, "docker kill glm53-vllm >/dev/null")
    heal = wait_heal(count)
    assert heal["result"] == "ready", heal
    after = rank(HEAD), rank(WORKER)
    assert all(r and r[1] for r in after), after
    assert after[0][0] != before[0][0] and after[1][0] != before[1][0]
    # Workers first: the worker's rank started before the head's.
    assert after[1][0] < after[0][0], after
    # The same containers the deploy made: a rerun of the deploy changes nothing.
    rerun = watched(SITE, extravars={"path": "vllm"}, tags=["hf_weights", "vllm_nvfp4"])
    assert not {h: n for h, n in rerun._stat("changed").items() if n}, rerun.stdout[-3000:]


def test_a_heal_after_a_link_event_starts_the_worker_with_its_new_gid_index(watched):
    was = rank(WORKER)[2]["NCCL_IB_GID_INDEX"]
    # A link event: another address comes first on both of the worker's links, so the RoCE v2
    # GID of its link address moves two entries on (sysfs follows the addresses).
    for netdev, address, other in (("enp1s0f1np1", "198.18.1.11", "198.18.1.111"),
                                   ("enP2p1s0f1np1", "198.18.2.11", "198.18.2.111")):
        sh(WORKER, f"ip addr del {address}/24 dev {netdev} && ip addr add {other}/24 dev {netdev} && "
                   f"ip addr add {address}/24 dev {netdev}")
    time.sleep(2)  # the RDMA sysfs tree follows every 0.5 s
    count = len(heals())
    spark(WORKER, "docker kill glm53-vllm >/dev/null")
    heal = wait_heal(count)
    assert heal["result"] == "ready", (heal, log_text()[-3000:])
    now = rank(WORKER)[2]["NCCL_IB_GID_INDEX"]
    assert int(now) == int(was) + 2, (was, now)
    assert rank(HEAD)[2]["NCCL_IB_GID_INDEX"] == was
    assert f"NCCL_IB_GID_INDEX moved from {was} to {now}" in log_text()
    nodes = json.loads(spark(HEAD, f"cat {heal['evidence']}/nodes.json").stdout)
    assert nodes["spark-worker"]["gid_index"]["rocep1s0f1"] == int(now)


def test_stop_yml_then_start_yml_on_vllm(watched):
    # (-e path is optional; given, it must be the path in force. The runner's env passes tensorfold.)
    stop = watched("playbooks/stop.yml", extravars={"path": "vllm"})
    assert "no vllm rank remains" in stop.stdout
    assert rank(HEAD) is None and rank(WORKER) is None
    assert spark(HEAD, f"test -e {STATE}/DISABLED && echo yes").stdout.strip() == "yes"
    start = watched("playbooks/start.yml", extravars={"path": "vllm"})
    assert "READY" in start.stdout
    assert rank(HEAD)[1] and rank(WORKER)[1]
    assert spark(HEAD, f"test -e {STATE}/DISABLED && echo yes || echo no").stdout.strip() == "no"
