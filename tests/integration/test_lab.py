"""The lab itself: the harness works end to end, the simulators follow live state,
and every fault helper undoes what it did (twice is harmless)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import lab_faults as faults

HEALTH = "tests/integration/playbooks/lab_health.yml"
REPO = Path(__file__).resolve().parents[2]
LINK1, LINK2 = "enp1s0f1np1", "enP2p1s0f1np1"
SYSFS = "/opt/glm53-lab/sys/class/infiniband"


def sh(node, script, **kw):
    return faults.sh(node, script, **kw).stdout


def eventually(fn, timeout=3.0):
    """The sysfs simulator polls every 0.5 s: allow it a few rounds."""
    deadline = time.time() + timeout
    while True:
        value = fn()
        if value or time.time() > deadline:
            return value
        time.sleep(0.2)


# ---------------------------------------------------------------- harness, e2e


def test_health_playbook_is_green_and_idempotent(assert_idempotent):
    first, second = assert_idempotent(HEALTH)
    assert first.changed_total == 0 and second.changed_total == 0
    systemd = first.task_results("Systemd finished booting with no failed unit")
    assert {h: r["stdout"] for h, r in systemd.items()} == {"spark-head": "running", "spark-worker": "running"}
    pings = first.task_results("Jumbo frames pass unfragmented to the peer on both links")
    assert set(pings) == {"spark-head", "spark-worker"}
    assert all(len(r["results"]) == 2 for r in pings.values())
    assert "spark-head" in first.task_results("BatchMode SSH to the worker by name and by both link addresses")
    assert (first.artifact_dir / "job_events").is_dir()


def test_run_playbook_reports_failures(run_playbook):
    with faults.break_worker_ssh():
        result = run_playbook(HEALTH, tags="ssh", expect_success=False)
    assert result.status == "failed" and result.rc != 0
    failed = result.failed_tasks()
    assert [(f["host"], f["task"]) for f in failed] == [
        ("spark-head", "BatchMode SSH to the worker by name and by both link addresses")
    ]
    with pytest.raises(AssertionError, match="playbook run failed"):
        result.assert_success()
    # undone: the same run passes again
    run_playbook(HEALTH, tags="ssh")


def test_run_playbook_limit_tags_and_extravars(run_playbook):
    result = run_playbook(HEALTH, limit="spark-worker", tags="basics", extravars={"path": "vllm"})
    assert set(result.stats["ok"]) == {"spark-worker"}
    command = json.loads((result.artifact_dir / "command").read_text())["command"]
    assert "--limit" in command and "--tags" in command and "basics" in command
    # runner/env/extravars first, then the run's own values on top
    assert command[command.index("-e") + 1].endswith("/env/extravars")
    assert '{"path":"vllm"}' in command


def test_operator_runner_layout_from_the_cli(lab, tmp_path):
    """What operators do: copy runner/, point inventory at their site, then
    `ansible-runner run <dir> -p <playbook>` from the CLI (which also writes
    env/cmdline into the dir it is given, hence the copy)."""
    private = tmp_path / "runner"
    shutil.copytree(REPO / "runner" / "env", private / "env")
    (private / "project").symlink_to(REPO)
    (private / "inventory").symlink_to(lab.inventory)
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-runner"), "run", str(private),
         "-p", HEALTH, "--ident", "cli", "--limit", "spark-worker", "-q"],
        capture_output=True, text=True, timeout=300, check=False,
        env=dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"),
    )  # fmt: skip
    artifacts = private / "artifacts" / "cli"
    assert proc.returncode == 0, proc.stdout + proc.stderr + (artifacts / "stdout").read_text()
    assert (artifacts / "status").read_text() == "successful"
    assert (artifacts / "rc").read_text() == "0"


# ----------------------------------------------------------------- simulators


@pytest.mark.parametrize("node", faults.NODES)
def test_ibdev2netdev_and_sysfs_follow_link_state(lab, node):
    out = sh(node, "ibdev2netdev")
    assert "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)" in out.splitlines()
    assert "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)" in out.splitlines()
    assert "rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)" in out.splitlines()  # uncabled function
    state = f"cat {SYSFS}/rocep1s0f1/ports/1/state"
    assert sh(node, state) == "4: ACTIVE\n"
    with faults.link_down(node, LINK1):
        assert "rocep1s0f1 port 1 ==> enp1s0f1np1 (Down)" in sh(node, "ibdev2netdev").splitlines()
        assert eventually(lambda: sh(node, state) == "1: DOWN\n")
        assert sh(node, f"cat {SYSFS}/rocep1s0f1/ports/1/phys_state") == "3: Disabled\n"
        # the other function is untouched
        assert "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)" in sh(node, "ibdev2netdev").splitlines()
    assert "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)" in sh(node, "ibdev2netdev").splitlines()
    assert eventually(lambda: sh(node, state) == "4: ACTIVE\n")


def test_sysfs_gids_embed_the_link_ipv4_and_follow_it(lab):
    port = f"{SYSFS}/rocep1s0f1/ports/1"

    def gid(n):
        return sh("spark-head", f"cat {port}/gids/{n} {port}/gid_attrs/types/{n}").splitlines()

    assert gid(0)[0].startswith("fe80:0000:0000:0000:") and gid(0)[1] == "IB/RoCE v1"
    assert gid(1)[1] == "RoCE v2"
    # 198.18.1.10 = c6.12.01.0a
    assert gid(2) == ["0000:0000:0000:0000:0000:ffff:c612:010a", "IB/RoCE v1"]
    assert gid(3) == ["0000:0000:0000:0000:0000:ffff:c612:010a", "RoCE v2"]
    assert gid(4) == ["0000:0000:0000:0000:0000:0000:0000:0000"]  # unused entry, empty type
    assert sh("spark-head", f"readlink {SYSFS}/rocep1s0f1/device/net/{LINK1}").strip() == f"/sys/class/net/{LINK1}"
    # worker's link2 GID embeds 198.18.2.11
    assert sh("spark-worker", f"cat {SYSFS}/roceP2p1s0f1/ports/1/gids/3").strip().endswith("ffff:c612:020b")
    with faults.remove_link_address("spark-head", LINK1):
        assert eventually(lambda: gid(3)[0] == "0000:0000:0000:0000:0000:0000:0000:0000")
    assert eventually(lambda: gid(3) == ["0000:0000:0000:0000:0000:ffff:c612:010a", "RoCE v2"])


def test_nvidia_smi_answers_the_kit_queries(lab):
    q_gpu = "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader"
    q_apps = "nvidia-smi --query-compute-apps=pid,name --format=csv,noheader"
    for node in faults.NODES:
        assert sh(node, q_gpu, user="spark") == "NVIDIA GB10, 580.95.05\n"
        assert sh(node, q_apps, user="spark") == ""
    assert sh("spark-head", "nvidia-smi -L").startswith("GPU 0: NVIDIA GB10 (UUID: GPU-")
    assert "No running processes found" in sh("spark-head", "nvidia-smi")
    bad = faults.sh("spark-head", "nvidia-smi --query-gpu=nonsense --format=csv", check=False)
    assert bad.returncode == 2 and "not a valid field" in bad.stderr
    with faults.foreign_cuda_process("spark-worker", pid=31337, name="vllm"):
        with faults.gpu_driver("spark-worker", "590.44.01"):
            assert sh("spark-worker", q_gpu) == "NVIDIA GB10, 590.44.01\n"
            assert sh("spark-worker", q_apps) == "31337, vllm\n"
            assert sh("spark-head", q_apps) == ""  # per node
        assert sh("spark-worker", q_gpu) == "NVIDIA GB10, 580.95.05\n"
        assert sh("spark-worker", q_apps) == "31337, vllm\n"
    assert sh("spark-worker", q_apps) == ""


def test_nvidia_ctk_merges_the_runtime_like_the_real_one(lab):
    node = "spark-head"
    # Nodes start without the nvidia runtime: the Docker runtime role has work to do.
    assert "nvidia" not in json.loads(sh(node, "cat /etc/docker/daemon.json")).get("runtimes", {})
    denied = faults.sh(node, "nvidia-ctk runtime configure --runtime=docker", user="spark", check=False)
    assert denied.returncode == 1 and "permission denied" in denied.stderr
    sh(node, "cp /etc/docker/daemon.json /tmp/ctk.json")
    sh(node, "nvidia-ctk runtime configure --runtime=docker --set-as-default --config=/tmp/ctk.json")
    merged = json.loads(sh(node, "cat /tmp/ctk.json"))
    original = json.loads(sh(node, "cat /etc/docker/daemon.json"))
    assert merged["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime"}
    assert merged["default-runtime"] == "nvidia"
    assert {k: merged[k] for k in original} == original  # other keys kept
    sh(node, "rm -f /tmp/ctk.json")


# -------------------------------------------------------------- fault helpers


def _undo_twice(fault):
    fault.undo()
    fault.undo()


def test_set_mtu_and_undo(lab):
    mtu = f"cat /sys/class/net/{LINK2}/mtu"
    fault = faults.set_mtu("spark-worker", LINK2, 1500)
    with fault:
        assert sh("spark-worker", mtu) == "1500\n"
        big = faults.sh("spark-head", f"ping -M do -s 8972 -c 1 -W 2 -I {LINK2} 198.18.2.11", check=False)
        assert big.returncode != 0
    _undo_twice(fault)
    assert sh("spark-worker", mtu) == "9000\n"


def test_move_link_address_and_undo(lab):
    addrs = f"ip -4 -o addr show dev {LINK1}"
    with faults.move_link_address("spark-head", LINK1) as fault:
        assert "198.18.1.10" not in sh("spark-head", addrs)
        assert "198.18.1.10/32" in sh("spark-head", "ip -4 -o addr show dev lo")
    _undo_twice(fault)
    assert "198.18.1.10/24" in sh("spark-head", addrs)
    assert "198.18.1.10" not in sh("spark-head", "ip -4 -o addr show dev lo")
    faults.sh("spark-head", "ping -c 1 -W 2 198.18.1.11")


def test_stop_dockerd_and_undo(lab):
    info = "docker info >/dev/null 2>&1 && echo up || echo down"
    with faults.stop_dockerd("spark-worker") as fault:
        assert sh("spark-worker", info, user="spark") == "down\n"
    _undo_twice(fault)
    assert sh("spark-worker", info, user="spark") == "up\n"


def test_break_worker_ssh_and_undo(lab):
    ssh = "ssh -o BatchMode=yes -o ConnectTimeout=5 spark-worker true"
    keys = sh("spark-worker", "cat /home/spark/.ssh/authorized_keys")
    with faults.break_worker_ssh() as fault:
        assert faults.sh("spark-head", ssh, user="spark", check=False).returncode != 0
    _undo_twice(fault)
    faults.sh("spark-head", ssh, user="spark")
    assert sh("spark-worker", "cat /home/spark/.ssh/authorized_keys") == keys


def test_small_disk_and_undo(lab):
    path = "/home/spark/.cache/huggingface"
    free = f"df -B1 --output=avail {path} | tail -1"
    with faults.small_disk("spark-head", path, 1 << 20) as fault:
        assert int(sh("spark-head", free)) <= 1 << 20
        faults.sh("spark-head", f"touch {path}/writable && rm {path}/writable", user="spark")
    _undo_twice(fault)
    assert sh("spark-head", f"mountpoint -q {path} && echo mounted || echo plain") == "plain\n"


def test_kill_container_and_undo(lab):
    node = "spark-worker"
    sh(node, "docker rm -f glm53-lab-victim >/dev/null 2>&1; docker run -d --name glm53-lab-victim glm53-lab/busybox sleep 600")
    running = "docker inspect -f '{{.State.Running}}' glm53-lab-victim"
    try:
        with faults.kill_container(node, "glm53-lab-victim") as fault:
            assert sh(node, running) == "false\n"
        _undo_twice(fault)
        assert sh(node, running) == "true\n"
    finally:
        sh(node, "docker rm -f glm53-lab-victim >/dev/null")
