"""docker_runtime end to end on the Spark lab, through ansible-runner as an operator runs
playbooks/docker_runtime.yml.

Each test sets the node state it starts from with lab_faults (root inside the node,
never through the role), so the order of tests and what ran on the lab before do not
matter, and every fault is undone. What users see is read on the node with plain
commands as `spark`: daemon.json with `cat`, `docker info`, `docker run`, `id -nG`.

Cost: each case is a docker_runtime run against a node state a fault made; a fixed runtime costs
a Docker restart on each node."""

from __future__ import annotations

import contextlib
import json

import lab_faults
from lab_faults import HEAD, NODES, WORKER

PLAYBOOK = "playbooks/docker_runtime.yml"
UBUNTU = "tests/integration/docker_runtime/ubuntu_facts.yml"
# An operator with sudo fixing the node for the deploy user.
ADMIN = {"ansible_user": "admin", "docker_runtime_user": "spark"}
DEFAULT_COMMAND_TIMEOUT = 30  # docker_runtime_command_timeout's default
PLAN = "Decide what is missing and whether the play may fix it"
USER_PLAN = "Decide from what the deploy user sees"
SAY = "Say what is missing and what the role does about it"
PUBLISH = "Publish the node's Docker state"
BUSYBOX = "glm53-lab/busybox:latest"  # the lab inventory's docker_runtime_test_image, in every node's engine
RUNTIME = {"args": [], "path": "nvidia-container-runtime"}


def as_spark(node: str, script: str, check: bool = True):
    return lab_faults.sh(node, script, user="spark", check=check)


def daemon_json(node: str) -> dict:
    return json.loads(as_spark(node, "cat /etc/docker/daemon.json").stdout)


def docker_info(node: str) -> dict:
    return json.loads(as_spark(node, "docker info --format '{{json .}}'").stdout)


def dockerd_pid(node: str) -> str:
    return lab_faults.sh(node, "pidof dockerd").stdout.strip()


def configured(node: str, **extra) -> dict:
    """The lab's daemon.json for `node` with the nvidia runtime, as the role leaves it."""
    config = json.loads(lab_faults.lab_daemon_json(node))
    config["runtimes"] = {"nvidia": dict(RUNTIME)}
    config.update(extra)
    return config


def become_lines(result) -> list[str]:
    """Lines of the -vvv output where a task would have become another user."""
    lines = []
    for event in result.events:
        for line in (event.get("stdout") or "").splitlines():
            if "BECOME-SUCCESS" in line or "sudo -H" in line or "sudo -u" in line:
                lines.append(line)
    return lines


def failure(result, task: str, node: str) -> str:
    msgs = [f["msg"] for f in result.failed_tasks() if f["task"] == task and f["host"] == node]
    assert msgs, f"{task} did not fail on {node}: {result.failed_tasks()}"
    return msgs[0]


def test_ready_node_as_spark_is_ok_without_become(run_playbook):
    with contextlib.ExitStack() as stack:
        for node in NODES:
            stack.enter_context(lab_faults.daemon_json(node, configured(node)))
        pids = {node: dockerd_pid(node) for node in NODES}
        result = run_playbook(PLAYBOOK, verbosity=3)
        assert result.changed_total == 0, result.stats
        assert set(result.stats["ok"]) == set(NODES)
        plans = result.task_results(PLAN)
        facts = result.task_results(PUBLISH)
        for node in NODES:
            assert plans[node]["summary"][0] == (f"{node}: Docker and the nvidia runtime are ready for spark: a "
                                                 f"`docker run --gpus all` container of {BUSYBOX} ran")
            assert plans[node]["status"] == "ready" and plans[node]["gpu_image"] == BUSYBOX
            assert plans[node]["become"] is False and plans[node]["verify"] is False
            assert facts[node]["ansible_facts"]["glm53_docker_runtime"]["status"] == "ready"
        # The container check ran as spark, on each node.
        probes = result.task_results("Read Docker and the NVIDIA runtime as the connection user")
        assert {n: (r["user"]["name"], r["test_run"]["ok"]) for n, r in probes.items()} == {
            HEAD: ("spark", True), WORKER: ("spark", True)}
        assert become_lines(result) == []
        assert any("SSH: EXEC" in (e.get("stdout") or "") for e in result.events), "no -vvv output to judge"
        # Nothing restarted.
        assert {node: dockerd_pid(node) for node in NODES} == pids


def test_without_a_test_image_a_known_image_proves_gpu_access_else_it_is_not_proven(run_playbook):
    absent = "glm53-lab/absent:none"  # never in any node's engine
    with lab_faults.daemon_json(WORKER, configured(WORKER)):
        # No docker_runtime_test_image: the first of the collection's images the node has is run.
        known = run_playbook(PLAYBOOK, limit=WORKER, extravars={
            "docker_runtime_test_image": "", "docker_runtime_known_images": [absent, BUSYBOX]})
        plan = known.task_results(PLAN)[WORKER]
        assert (plan["status"], plan["gpu_image"]) == ("ready", BUSYBOX)
        # None of them on the node: said once, never "ready", and the play goes on.
        none = run_playbook(PLAYBOOK, limit=WORKER, extravars={
            "docker_runtime_test_image": "", "docker_runtime_known_images": [absent]})
        assert none.changed_total == 0 and none.failed_tasks() == []
        plan = none.task_results(PLAN)[WORKER]
        assert plan["status"] == "gpu_not_proven" and plan["failures"] == []
        line = (f"{WORKER}: GPU access not proven for spark: Docker and the nvidia runtime are set up (`docker info` "
                "lists it), but no `docker run --gpus all` container ran, because docker_runtime_test_image is empty "
                f"and none of {absent} is on the node; expected a container to start with the GPU; fix: set "
                "docker_runtime_test_image to an image present on the node (it is never pulled) and rerun")
        assert none.task_results(SAY)[WORKER]["msg"] == [line]
        # Nothing was fixed, so nothing is verified or said again: the verify step is skipped whole.
        assert none.task_results("Verify as the deploy user")[WORKER]["_event"] == "runner_on_skipped"
        assert WORKER not in none.task_results("Say the node's state after the fixes")
        assert none.task_results(PUBLISH)[WORKER]["ansible_facts"]["glm53_docker_runtime"] == {
            "status": "gpu_not_proven", "gpu_image": None, "user": "spark", "summary": [line]}


def test_missing_runtime_as_spark_without_become_fails_and_changes_nothing(run_playbook):
    with lab_faults.daemon_json(WORKER, lab_faults.lab_daemon_json(WORKER)):
        before, pid = as_spark(WORKER, "cat /etc/docker/daemon.json").stdout, dockerd_pid(WORKER)
        result = run_playbook(PLAYBOOK, limit=WORKER, expect_success=False)
        result.assert_failed()
        msg = failure(result, PLAN, WORKER)
        assert msg.startswith("[docker_runtime.runtime] the nvidia runtime is missing on spark-worker and become is "
                              "off: configure it (sudo nvidia-ctk runtime configure --runtime=docker, then sudo "
                              "systemctl restart docker) or rerun with become"), msg
        assert "Found: runtimes in `docker info`: io.containerd.runc.v2, io.containerd.runtime.v1.linux, runc;" in msg
        assert msg.endswith("Nothing was changed.")
        assert result.changed_total == 0
        # Check mode reports what would change instead, and still asks for no become.
        dry = run_playbook(PLAYBOOK, limit=WORKER, cmdline="--check", verbosity=3)
        plan = dry.task_results(PLAN)[WORKER]
        assert plan["changed"] is True and plan["failures"] == []
        assert plan["summary"][0] == ("spark-worker: the nvidia runtime is missing; a real run would: register the "
                                      "runtime with nvidia-ctk and restart Docker")
        assert any(n.startswith("[docker_runtime.runtime] the nvidia runtime is missing on spark-worker and become is "
                                "off") for n in plan["notes"])
        assert become_lines(dry) == []
        assert as_spark(WORKER, "cat /etc/docker/daemon.json").stdout == before
        assert dockerd_pid(WORKER) == pid
        assert "nvidia" not in docker_info(WORKER)["Runtimes"]


def test_custom_daemon_json_keys_survive_and_the_runtime_is_added(run_playbook):
    custom = json.loads(lab_faults.lab_daemon_json(WORKER))
    custom.update({
        "log-driver": "json-file",
        "log-opts": {"max-size": "10m", "max-file": "3"},
        "default-shm-size": "1G",
        "data-root": "/var/lib/docker",
        "live-restore": True,
        "runtimes": {"runc-debug": {"path": "runc", "runtimeArgs": ["--debug"]}},
    })
    # A DGX OS-like deploy user: has sudo, and (here) left the docker group, so the role
    # also adds it and reconnects before checking Docker as it in the same play.
    with lab_faults.daemon_json(WORKER, custom), lab_faults.grant_sudo(WORKER), lab_faults.leave_group(WORKER):
        assert "docker" not in as_spark(WORKER, "id -nG").stdout.split()
        result = run_playbook(PLAYBOOK, limit=WORKER, cmdline="-b", extravars={"docker_runtime_set_as_default": True})
        expected = json.loads(json.dumps(custom))
        expected["runtimes"]["nvidia"] = RUNTIME
        expected["default-runtime"] = "nvidia"
        assert daemon_json(WORKER) == expected
        info = docker_info(WORKER)
        assert "nvidia" in info["Runtimes"] and info["DefaultRuntime"] == "nvidia"
        assert info["LoggingDriver"] == "json-file"
        assert "docker" in as_spark(WORKER, "id -nG").stdout.split()
        assert result.task_results("Restart Docker")[WORKER]["changed"] is True
        final = result.task_results("Check Docker with the nvidia runtime now works for the deploy user")[WORKER]
        assert final["_event"] == "runner_on_ok" and final["failures"] == []
        rerun = run_playbook(PLAYBOOK, limit=WORKER, cmdline="-b", extravars={"docker_runtime_set_as_default": True})
        assert rerun.changed_total == 0, rerun.stats


def test_removed_docker_is_installed_from_debian_then_idempotent(run_playbook, assert_idempotent):
    with lab_faults.daemon_json(WORKER, lab_faults.lab_daemon_json(WORKER)), lab_faults.remove_docker(WORKER):
        assert as_spark(WORKER, "command -v docker", check=False).returncode != 0
        config_before = as_spark(WORKER, "cat /etc/docker/daemon.json").stdout
        # Check mode on the fresh node: reports what would change, changes nothing.
        dry = run_playbook(PLAYBOOK, limit=WORKER, cmdline="--check -b", extravars=ADMIN)
        assert dry.task_results(USER_PLAN)[WORKER]["changed"] is True
        assert dry.task_results("Say what a real run would install")[WORKER]["msg"] == "check mode: would install docker.io"
        assert as_spark(WORKER, "command -v docker", check=False).returncode != 0
        assert as_spark(WORKER, "cat /etc/docker/daemon.json").stdout == config_before

        first, second = assert_idempotent(PLAYBOOK, limit=WORKER, cmdline="-b", extravars=ADMIN)
        assert first.task_results("Install Docker")[WORKER]["changed"] is True
        assert second.changed_total == 0
        status = lab_faults.sh(WORKER, "dpkg-query -W -f='${Status}' docker.io").stdout
        assert status == "install ok installed"
        assert "nvidia" in docker_info(WORKER)["Runtimes"]
        as_spark(WORKER, "docker run --rm --gpus all --network none glm53-lab/busybox:latest true")
        after = daemon_json(WORKER)
        assert after == dict(json.loads(config_before), runtimes={"nvidia": RUNTIME})


def test_ubuntu_arm64_branch_renders_pinned_sources_in_check_mode(run_playbook):
    # Docker and the toolkit look absent (their commands are off PATH), on a node whose
    # facts say Ubuntu 24.04 aarch64: the role must plan Docker CE and NVIDIA's repository.
    with lab_faults.hide_command(WORKER, "docker"), lab_faults.hide_command(WORKER, "nvidia-ctk"):
        result = run_playbook(UBUNTU, limit=WORKER, cmdline="--check --diff -b",
                              extravars=dict(ADMIN, docker_runtime_engine_source="docker"))
        sources = result.task_results("Add the deb822 sources")[WORKER]["results"]
        rendered = {}
        for item in sources:
            diff = item["diff"][0] if isinstance(item["diff"], list) else item["diff"]
            rendered[item["item"]["source_path"]] = diff["after"]
        assert rendered == {
            "/etc/apt/sources.list.d/docker.sources":
                "# Managed by dgx_spark.glm53.docker_runtime; key pinned by fingerprint "
                "9DC858229FC7DD38854AE2D88D81803C0EBFCD88.\n"
                "Types: deb\nURIs: https://download.docker.com/linux/ubuntu\nSuites: noble\nComponents: stable\n"
                "Architectures: arm64\nSigned-By: /etc/apt/keyrings/docker.asc\n",
            "/etc/apt/sources.list.d/nvidia-container-toolkit.sources":
                "# Managed by dgx_spark.glm53.docker_runtime; key pinned by fingerprint "
                "C95B321B61E88C1809C4F759DDCAE044F796ECB0.\n"
                "Types: deb\nURIs: https://nvidia.github.io/libnvidia-container/stable/deb/arm64\nSuites: /\n"
                "Architectures: arm64\nSigned-By: /etc/apt/keyrings/nvidia-container-toolkit.asc\n",
        }
        keys = {r["item"]["name"]: r for r in result.task_results(
            "Install the repository signing keys, checked against their pinned fingerprints")[WORKER]["results"]}
        assert keys["docker"]["msg"] == ("would fetch https://download.docker.com/linux/ubuntu/gpg and install it at "
                                         "/etc/apt/keyrings/docker.asc if its fingerprint is "
                                         "9DC858229FC7DD38854AE2D88D81803C0EBFCD88")
        assert keys["nvidia-container-toolkit"]["fingerprint"] == "C95B321B61E88C1809C4F759DDCAE044F796ECB0"
        assert result.task_results("Say what a real run would install")[WORKER]["msg"] == (
            "check mode: would install docker-ce=5:28.5.2-1~ubuntu.24.04~noble, docker-ce-cli=5:28.5.2-1~ubuntu.24.04~noble, "
            "containerd.io=1.7.28-1~ubuntu.24.04~noble, nvidia-container-toolkit=1.18.1-1, "
            "nvidia-container-toolkit-base=1.18.1-1, libnvidia-container-tools=1.18.1-1, libnvidia-container1=1.18.1-1")
        # Check mode: nothing reached the node.
        left = lab_faults.sh(WORKER, "ls /etc/apt/keyrings /etc/apt/sources.list.d 2>/dev/null || true").stdout
        assert "docker" not in left and "nvidia" not in left


def test_wedged_engine_fails_naming_node_command_and_deadline(run_playbook):
    with lab_faults.freeze_dockerd(WORKER):
        result = run_playbook(PLAYBOOK, limit=WORKER, extravars={"docker_runtime_command_timeout": 3},
                              expect_success=False)
    msg = failure(result, PLAN, WORKER)
    assert msg.startswith("[docker_runtime.engine] spark-worker: `docker info --format '{{json .}}'` did not finish "
                          "within 3s (docker_runtime_command_timeout): the Docker engine is wedged"), msg
    # The given 3 s deadline ended it, not the 30 s default (nor no deadline at all).
    assert result.task_seconds(PLAN, WORKER) < DEFAULT_COMMAND_TIMEOUT


def test_wedged_nvidia_ctk_fails_naming_node_command_and_deadline(run_playbook):
    with lab_faults.daemon_json(WORKER, lab_faults.lab_daemon_json(WORKER)):
        before = as_spark(WORKER, "cat /etc/docker/daemon.json").stdout
        with lab_faults.hang_tool(WORKER, "nvidia-ctk"):
            # The deadline covers every command of the run, and the ones before nvidia-ctk (a
            # `docker run` among them) must finish within it on a loaded machine too: 15 s, not 3.
            result = run_playbook(PLAYBOOK, limit=WORKER, cmdline="-b", expect_success=False,
                                  extravars=dict(ADMIN, docker_runtime_command_timeout=15))
        msg = failure(result, "Stop with the node and the reason", WORKER)
        assert msg == ("[docker_runtime.runtime] spark-worker: `nvidia-ctk runtime configure --runtime=docker "
                       "--config=/etc/docker/daemon.json` did not finish within 15s (timeout) and was killed; "
                       "/etc/docker/daemon.json is as it was.")
        assert as_spark(WORKER, "cat /etc/docker/daemon.json").stdout == before
