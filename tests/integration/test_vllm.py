"""Path vllm end to end on the lab: site.yml -e path=vllm clones the simulated recipe (lab/sim/recipe,
recipe.git), builds glm53-sm121:local on the head from the stand-in of the pinned base (pinned by
image ID), ships it to the worker with docker save | ssh docker load, checks the checkpoint on every
node, and starts one rank per node with community.docker.docker_container: the simulated vLLM
(lab/sim/vllm) with vLLM's argument parser, its mp rendezvous over the link, its load-time memory check
against the node's own MemFree, and rank 0's OpenAI API. Real git, Docker engines, ssh and page cache.
Asserted: what an operator sees - the play's outcome and messages, the containers (ids, start times,
commands, labels, environment), the images on each node, the API's answers and the kept logs.

The watchdog and the operations playbooks on this path (TestWatchdog) run on the same deployment:
ranks made from the plan the deploy recorded (docker run of each rank's container parameters),
workers first, and a heal that reads each node's GID table again, since a link event moves the
RoCE v2 GID index NCCL must use.

Cost: a cold deploy of path vllm (image build on the head, shipped to the worker), then one
recreate or failed start per behaviour, three heals or starts under the watchdog, and a switch to
tensorfold and back. The watchdog's tests were a module of their own, which deployed path vllm
again on the same lab (about 50 s of CPU): they run on this module's deployment instead."""

from __future__ import annotations

import contextlib
import json
import shlex
import threading
import time

from pathlib import Path

import pytest

import lab_faults as faults
from lab_faults import HEAD, WORKER, sh

SITE = "playbooks/site.yml"
STOP = "playbooks/stop.yml"
VLLM = {"path": "vllm"}
# A run that changes only what vllm_nvfp4 reads: hf_weights publishes glm53_weights, which it needs.
ROLES = ["hf_weights", "vllm_nvfp4"]
NAME = "glm53-vllm"
IMAGE = "glm53-sm121:local"
SERVED = "glm-5.3-flash-nvfp4-sm121"
API = "http://127.0.0.1:8000"
SNAPSHOT = ("/home/spark/.cache/huggingface/hub/models--LibertAIDAI--GLM-5.3-Flash-NVFP4/snapshots/"
            "9e0d74e3cef17f634e84fb8e2223707e02616290")


def spark(node, script, check=True):
    return sh(node, script, user="spark", check=check)


def rank(node):
    """The node's rank container as docker inspect shows it, or None."""
    run = spark(node, f"docker container inspect {NAME}", check=False)
    if run.returncode != 0:
        return None
    facts = json.loads(run.stdout)[0]
    facts["env"] = dict(item.split("=", 1) for item in facts["Config"]["Env"] if "=" in item)
    return facts


def ranks():
    return {node: rank(node) for node in (HEAD, WORKER)}


def ids_and_starts():
    return {node: (facts["Id"], facts["State"]["StartedAt"]) if facts else None for node, facts in ranks().items()}


def engines(node):
    """Names of the engine containers (either path) running on the node."""
    out = spark(node, "docker ps --format '{{.Names}}'").stdout.split()
    return sorted(name for name in out if name.startswith(("glm53-tf-r", "glm53-vllm")))


def image_id(node):
    run = spark(node, f"docker image inspect -f '{{{{.Id}}}}' {IMAGE}", check=False)
    return run.stdout.strip() if run.returncode == 0 else ""


def api(path, payload=None):
    data = "" if payload is None else f"-H 'Content-Type: application/json' -d {shlex.quote(json.dumps(payload))}"
    return json.loads(spark(HEAD, f"curl -sf -m 60 {data} {API}{path}").stdout)


def task_hosts(run, task):
    """The hosts on which `task` ran (not skipped) in a run."""
    return sorted(ev["event_data"]["host"] for ev in run.events
                  if ev.get("event") == "runner_on_ok" and ev.get("event_data", {}).get("task") == task)


SHIP = "Ship the image to each worker whose image ID differs (docker save | ssh docker load)"


def shipped_to(run):
    """The workers the head shipped the image to in a run (the ship loop's items)."""
    return sorted(ev["event_data"]["res"]["item"] for ev in run.events
                  if ev.get("event") == "runner_item_on_ok" and ev.get("event_data", {}).get("task") == SHIP)


def link_address(node):
    return spark(node, "ip -4 -o addr show enp1s0f1np1 | awk '{print $4}' | cut -d/ -f1").stdout.strip()


@pytest.fixture(scope="module")
def deployed(lab):
    """One cold deploy of path vllm for the module (weights from the lab hub, the image built)."""
    from conftest import PlaybookRunner  # pylint: disable=import-outside-toplevel
    runner = PlaybookRunner(Path(lab.inventory), "vllm-cold")
    # The lab's nodes start without the nvidia runtime (docker_runtime adds it with become as admin).
    runner("playbooks/docker_runtime.yml", extravars={"ansible_user": "admin", "docker_runtime_user": "spark"},
           cmdline="-b")
    started = time.monotonic()
    cold = runner(SITE, extravars=VLLM)
    return {"run": cold, "seconds": time.monotonic() - started, "runner": runner}


def test_cold_deploy_serves_tp2_and_a_rerun_changes_and_restarts_nothing(deployed, run_playbook):
    found = ranks()
    assert found[HEAD] and found[WORKER], found
    assert all(facts["State"]["Running"] for facts in found.values())
    head, worker = found[HEAD], found[WORKER]
    # The recipe's flags: TP = node count, mp multi-node, rank 0 on the head's link address.
    for node, facts, node_rank in ((HEAD, head, "0"), (WORKER, worker, "1")):
        cmd = facts["Config"]["Cmd"]
        assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2"
        assert cmd[cmd.index("--nnodes") + 1] == "2" and cmd[cmd.index("--node-rank") + 1] == node_rank
        assert cmd[cmd.index("--master-addr") + 1] == link_address(HEAD)
        assert cmd[cmd.index("--distributed-executor-backend") + 1] == "mp"
        assert ("--headless" in cmd) == (node_rank != "0"), cmd
        assert facts["Config"]["Labels"]["dgx_spark.glm53.engine"] == "vllm"
        assert facts["Config"]["Labels"]["dgx_spark.glm53.vllm.rank"] == node_rank
        # Per node from the contract: its own address, its netdev, a GID index.
        assert facts["env"]["VLLM_HOST_IP"] == link_address(node)
        assert facts["env"]["NCCL_SOCKET_IFNAME"] == facts["env"]["GLOO_SOCKET_IFNAME"] == "enp1s0f1np1"
        assert facts["env"]["NCCL_IB_GID_INDEX"].isdigit()
        assert facts["HostConfig"]["NetworkMode"] == "host" and facts["HostConfig"]["IpcMode"] == "host"
        assert facts["HostConfig"]["RestartPolicy"]["Name"] in ("no", "")
        assert any(m["Destination"] == "/root/.cache/huggingface" and not m["RW"] for m in facts["Mounts"])
    # One plan for every rank; the API on the head's loopback only.
    assert head["Config"]["Labels"]["dgx_spark.glm53.vllm.plan"] == worker["Config"]["Labels"]["dgx_spark.glm53.vllm.plan"]
    assert head["Config"]["Cmd"][head["Config"]["Cmd"].index("--host") + 1] == "127.0.0.1"
    # Every node runs the same image, built from the recipe's commit.
    assert image_id(HEAD) and image_id(HEAD) == image_id(WORKER)
    labels = json.loads(spark(HEAD, f"docker image inspect -f '{{{{json .Config.Labels}}}}' {IMAGE}").stdout)
    assert len(labels["dgx_spark.glm53.recipe"]) == 40 and labels["io.glm53-gb10.tp-local-heads"] == "32,64"
    # The API: the served name, and an answer with logprobs.
    assert [m["id"] for m in api("/v1/models")["data"]] == [SERVED]
    answer = api("/v1/chat/completions", {"model": SERVED, "messages": [{"role": "user", "content": "hi"}],
                                          "max_tokens": 4, "logprobs": True, "top_logprobs": 2})
    assert answer["choices"][0]["logprobs"]["content"], answer
    assert "READY: 2 rank(s)" in deployed["run"].stdout
    # The lab's nvidia-smi lists each node's rank as a GPU process (a vLLM rank: 100 GiB).
    for node in (HEAD, WORKER):
        assert "102400MiB" in spark(node, "nvidia-smi").stdout, node
    # The rerun: nothing changed, no rank restarted.
    before = ids_and_starts()
    rerun = run_playbook(SITE, extravars=VLLM)
    assert rerun.changed_total == 0, rerun.stdout[-3000:]
    assert ids_and_starts() == before
    assert "left alone" in rerun.stdout


def test_the_qualified_profile_refuses_a_change_before_anything_changes(deployed, run_playbook):
    before = ids_and_starts()
    run = run_playbook(SITE, tags=ROLES, extravars=dict(VLLM, vllm_nvfp4_max_num_seqs=16), expect_success=False)
    run.assert_failed()
    assert "vllm_nvfp4_max_num_seqs is 16" in run.stdout and "vllm_nvfp4_profile: experimental" in run.stdout
    assert ids_and_starts() == before
    # A container option docker would only refuse after the ranks were stopped: refused first.
    run = run_playbook(SITE, tags=ROLES, extravars=dict(VLLM, vllm_nvfp4_ulimits=["memlock=1"]), expect_success=False)
    run.assert_failed()
    assert "vllm_nvfp4_ulimits must be a list of name:soft:hard" in run.stdout
    assert ids_and_starts() == before


def test_a_worker_with_another_image_gets_the_heads_and_keeps_its_rank(deployed, run_playbook):
    before = ids_and_starts()
    head_id = image_id(HEAD)
    # Another image under the same tag on the worker (a stale or hand-built one).
    spark(WORKER, f"docker tag glm53-lab/busybox:latest {IMAGE}")
    assert image_id(WORKER) != head_id
    run = run_playbook(SITE, tags=ROLES, extravars=VLLM)
    assert shipped_to(run) == [WORKER]  # from the head, once
    assert image_id(WORKER) == head_id
    # The running rank already ran the head's image: it is left alone.
    assert ids_and_starts() == before


def test_a_missing_shard_on_a_worker_is_refused_before_any_start(deployed, run_playbook):
    before = ids_and_starts()
    # hf_weights would fetch the shard again (that is its job); run vllm_nvfp4 alone with the
    # weights facts an earlier hf_weights run published, as a shard lost after the weights check,
    # and a changed rank environment, so the ranks must restart: the checkpoint is checked before
    # anything is stopped (healthy ranks left alone load nothing, so a rerun does not check it).
    facts = deployed["run"].task_results("Publish glm53_weights")
    glm53_weights = facts[HEAD]["ansible_facts"]["glm53_weights"]
    shard = f"{SNAPSHOT}/model-00002-of-00002.safetensors"
    spark(WORKER, f"mv {shard} {shard}.away")
    try:
        run = run_playbook(SITE, tags=["vllm_nvfp4"], expect_success=False, extravars=dict(
            VLLM, glm53_weights=glm53_weights, vllm_nvfp4_extra_env={"GLM53_REFUSED_START": "1"}))
    finally:
        spark(WORKER, f"mv {shard}.away {shard}")
    run.assert_failed()
    assert f"spark-worker: checkpoint {SNAPSHOT} is incomplete: missing model-00002-of-00002.safetensors" in run.stdout
    assert task_hosts(run, "Stop every engine on every node (the TensorFold ranks and the previous vLLM ranks)") == []
    assert ids_and_starts() == before, "a refused start touched a rank"


def test_a_changed_flag_recreates_every_rank_and_nothing_else(deployed, run_playbook):
    before = ids_and_starts()
    images = (image_id(HEAD), image_id(WORKER))
    run = run_playbook(SITE, tags=ROLES, extravars=dict(VLLM, vllm_nvfp4_profile="experimental",
                                                        vllm_nvfp4_max_num_seqs=8))
    after = ranks()
    for node in (HEAD, WORKER):
        assert after[node]["Id"] != before[node][0], f"{node}: rank not recreated"
        cmd = after[node]["Config"]["Cmd"]
        assert cmd[cmd.index("--max-num-seqs") + 1] == "8"
    # Nothing else: no build, no ship, the same image everywhere.
    assert task_hosts(run, "Build the image on the head") == []
    assert shipped_to(run) == []
    assert (image_id(HEAD), image_id(WORKER)) == images
    assert "max_num_seqs" in run.stdout and "experimental" in run.stdout
    # (The next test starts from these ranks: its changed environment restarts every rank again.)


def test_a_worker_rank_that_cannot_start_fails_the_start_before_the_head_starts(deployed, run_playbook):
    # The worker's verbs devices gone (a driver unloaded): docker cannot start its rank.
    sh(WORKER, "mv /dev/infiniband /dev/infiniband.away")
    try:
        run = run_playbook(SITE, tags=ROLES, extravars=dict(VLLM, vllm_nvfp4_extra_env={"VLLM_SIM_LOAD_SECONDS": "3"}),
                           expect_success=False)
    finally:
        sh(WORKER, "mv /dev/infiniband.away /dev/infiniband")
    run.assert_failed()
    assert "[vllm_nvfp4.start] spark-worker: rank 1 did not start" in run.stdout and "/dev/infiniband" in run.stdout
    # The head was never started (no rank waits for a peer that cannot come); nothing runs.
    assert rank(HEAD) is None
    assert engines(HEAD) == [] and engines(WORKER) == []


def test_rank_1_killed_during_load_fails_fast_and_leaves_no_rank_running(deployed, run_playbook, tmp_path):
    before = ids_and_starts()
    killed = []

    def kill_new_worker_rank():
        # Kill a new rank 1 once it is loading the model (it joined rank 0 and logged so).
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            facts = rank(WORKER)
            if (facts and facts["Id"] != (before[WORKER] or ("",))[0] and facts["State"]["Running"]
                    and "Starting to load model" in spark(WORKER, f"docker logs {NAME} 2>&1", check=False).stdout):
                spark(WORKER, f"docker kill {NAME}", check=False)
                killed.append(facts["Id"])
                return
            time.sleep(0.3)

    killer = threading.Thread(target=kill_new_worker_rank, daemon=True)
    killer.start()
    started = time.monotonic()
    # A longer simulated load (a changed environment restarts every rank) gives the kill its window.
    run = run_playbook(SITE, tags=ROLES, expect_success=False, extravars=dict(
        VLLM, vllm_nvfp4_extra_env={"VLLM_SIM_LOAD_SECONDS": "12"}, vllm_nvfp4_start_timeout=600,
        vllm_nvfp4_failure_dir=str(tmp_path)))
    took = time.monotonic() - started
    killer.join(timeout=5)
    run.assert_failed()
    assert killed, "rank 1 never started"
    assert took < 300, took  # fails on the exit, not at the 600 s timeout
    assert "rank 1" in run.stdout and "spark-worker" in run.stdout
    assert "Every rank was stopped and left for inspection" in run.stdout
    # No rank running, both left (stopped) for inspection, their logs on the controller.
    assert engines(HEAD) == [] and engines(WORKER) == []
    found = ranks()
    assert found[HEAD] and found[WORKER] and not found[HEAD]["State"]["Running"]
    assert (tmp_path / f"{HEAD}.log").read_text().strip() and (tmp_path / f"{WORKER}.log").read_text().strip()
    # The next run removes the stopped ranks and starts again, back on the qualified profile.
    back = run_playbook(SITE, tags=ROLES, extravars=VLLM)
    assert engines(HEAD) == [NAME] and engines(WORKER) == [NAME]
    assert "READY: 2 rank(s)" in back.stdout


# --- The watchdog on path vllm, on the module's deployment as test_rank_1_killed_... left it
# (back on the qualified profile, READY). Its class-scoped fixture removes the watchdog before
# the switch to tensorfold below.
WATCHDOG = "playbooks/watchdog.yml"
STATE = "/home/spark/.local/state/glm53-vllm"
INTERVAL = 5
WATCHDOG_SETTINGS = {"watchdog_interval": INTERVAL, "watchdog_canary_timeout": 5, "watchdog_grace_seconds": 600,
                     "watchdog_heals_per_hour": 60}
HEAL_DEADLINE = 3 * INTERVAL + 150  # a bound on the wait on a loaded machine, not a measurement
# A link event on the worker: another address comes first on both of its links (hca, netdev,
# the worker's link address, the event's address).
LINK_EVENT = (("rocep1s0f1", "enp1s0f1np1", "198.18.1.11", "198.18.1.111/24"),
              ("roceP2p1s0f1", "enP2p1s0f1np1", "198.18.2.11", "198.18.2.111/24"))


def started_running(node):
    """``(started_at, running)`` of the node's rank, or None."""
    facts = rank(node)
    return facts and (facts["State"]["StartedAt"], facts["State"]["Running"])


def heals():
    return json.loads(spark(HEAD, f"cat {STATE}/heals.json 2>/dev/null || echo []").stdout or "[]")


def ops_log():
    return spark(HEAD, f"cat {STATE}/ops.log 2>/dev/null || true").stdout


def wait_heal(count_before):
    deadline = time.monotonic() + HEAL_DEADLINE
    while time.monotonic() < deadline:
        done = [h for h in heals()[count_before:] if h.get("result") in ("ready", "failed")]
        if done:
            return done[0]
        time.sleep(1)
    raise AssertionError("no heal within %d s:\n%s" % (HEAL_DEADLINE, ops_log()[-3000:]))


@pytest.fixture(scope="class")
def watched(deployed):
    runner = deployed["runner"]
    sh(HEAD, "loginctl enable-linger spark")
    runner(WATCHDOG, extravars=WATCHDOG_SETTINGS)
    yield runner
    runner(WATCHDOG, extravars={"watchdog_state": "absent"})


class TestWatchdog:
    """The heal, stop.yml and start.yml, then the heal after a link event."""

    def test_a_killed_worker_rank_is_healed_workers_first_from_the_recorded_plan(self, watched):
        before, count = (started_running(HEAD), started_running(WORKER)), len(heals())
        spark(WORKER, f"docker kill {NAME} >/dev/null")
        heal = wait_heal(count)
        assert heal["result"] == "ready", heal
        after = started_running(HEAD), started_running(WORKER)
        assert all(r and r[1] for r in after), after
        assert after[0][0] != before[0][0] and after[1][0] != before[1][0]
        # Workers first: the worker's rank started before the head's.
        assert after[1][0] < after[0][0], after
        # The same containers the deploy made: a rerun of the deploy changes nothing.
        rerun = watched(SITE, extravars=VLLM, tags=ROLES)
        assert not {h: n for h, n in rerun._stat("changed").items() if n}, rerun.stdout[-3000:]

    def test_stop_yml_then_start_yml_on_vllm(self, watched):
        # (-e path is optional; given, it must be the path in force. The runner's env passes tensorfold.)
        stop = watched(STOP, extravars=VLLM)
        assert "no vllm rank remains" in stop.stdout
        assert rank(HEAD) is None and rank(WORKER) is None
        assert spark(HEAD, f"test -e {STATE}/DISABLED && echo yes").stdout.strip() == "yes"
        start = watched("playbooks/start.yml", extravars=VLLM)
        assert "READY" in start.stdout
        assert rank(HEAD)["State"]["Running"] and rank(WORKER)["State"]["Running"]
        assert spark(HEAD, f"test -e {STATE}/DISABLED && echo yes || echo no").stdout.strip() == "no"

    def test_a_heal_after_a_link_event_starts_the_worker_with_its_new_gid_index(self, watched):
        was = rank(WORKER)["env"]["NCCL_IB_GID_INDEX"]
        with contextlib.ExitStack() as event:
            for _hca, netdev, _address, other in LINK_EVENT:
                event.enter_context(faults.address_first(WORKER, netdev, other))
            # The RoCE v2 GID of the worker's link address moved two entries on: waited for in
            # sysfs (the simulator follows the kernel's address events), read with shell tools.
            moved = {faults.gid_index_in_sysfs(WORKER, hca, address) for hca, _netdev, address, _other in LINK_EVENT}
            assert moved == {str(int(was) + 2)}, (was, moved)
            count = len(heals())
            spark(WORKER, f"docker kill {NAME} >/dev/null")
            heal = wait_heal(count)
            assert heal["result"] == "ready", (heal, ops_log()[-3000:])
            now = rank(WORKER)["env"]["NCCL_IB_GID_INDEX"]
            assert int(now) == int(was) + 2, (was, now)
            assert rank(HEAD)["env"]["NCCL_IB_GID_INDEX"] == was
            assert f"NCCL_IB_GID_INDEX moved from {was} to {now}" in ops_log()
            nodes = json.loads(spark(HEAD, f"cat {heal['evidence']}/nodes.json").stdout)
            assert nodes["spark-worker"]["gid_index"]["rocep1s0f1"] == int(now)


def test_tensorfold_and_vllm_replace_each_other_and_stop_yml_stops_the_ranks(deployed, run_playbook):
    # vllm (the module's deploy) -> tensorfold: the vLLM ranks go, the kit's come.
    run_playbook(SITE, extravars={"path": "tensorfold"})
    assert engines(HEAD) == ["glm53-tf-r0"] and engines(WORKER) == ["glm53-tf-r1"]
    assert rank(HEAD) is None and rank(WORKER) is None
    # -> vllm: the kit's ranks are removed, not only stopped. (stop.yml -e path=tensorfold is
    # test_tensorfold's.)
    run_playbook(SITE, extravars=VLLM)
    assert engines(HEAD) == [NAME] and engines(WORKER) == [NAME]
    assert spark(HEAD, "docker ps -aq --filter name=glm53-tf-r").stdout.split() == []
    assert spark(WORKER, "docker ps -aq --filter name=glm53-tf-r").stdout.split() == []
    # stop.yml -e path=vllm: no rank remains on any node; images and weights stay; again changes nothing.
    run = run_playbook(STOP, extravars=VLLM)
    assert ranks() == {HEAD: None, WORKER: None}
    assert "no vllm rank remains (glm53-vllm removed (was running))" in run.stdout
    assert image_id(HEAD) and image_id(WORKER) == image_id(HEAD)
    assert spark(WORKER, f"test -L {SNAPSHOT}/config.json && echo kept").stdout.strip() == "kept"
    assert run_playbook(STOP, extravars=VLLM).changed_total == 0
