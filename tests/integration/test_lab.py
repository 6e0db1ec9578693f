"""The lab itself: the harness works end to end, the simulators follow live state,
and every fault helper undoes what it did (twice is harmless).

Cost: every fault helper is applied and undone on the running lab (the simulators' live state)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

import lab_faults as faults
from lab_faults import spark_lab

HEALTH = "tests/integration/playbooks/lab_health.yml"
REPO = Path(__file__).resolve().parents[2]
LINK1, LINK2 = "enp1s0f1np1", "enP2p1s0f1np1"
SYSFS = "/opt/glm53-lab/sys/class/infiniband"


def sh(node, script, **kw):
    return faults.sh(node, script, **kw).stdout


def eventually(fn, timeout=3.0):
    """The sysfs simulator follows link events, and refreshes every 2 s regardless: allow it that."""
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
    denied = faults.sh(node, "nvidia-ctk runtime configure --runtime=docker", user="spark", check=False)
    assert denied.returncode == 1 and "permission denied" in denied.stderr
    # A copy of the node's daemon.json as `lab-up` writes it, without the runtime (an earlier
    # docker_runtime run on this lab may have added it to the live file).
    original = {k: v for k, v in json.loads(sh(node, "cat /etc/docker/daemon.json")).items()
                if k not in ("runtimes", "default-runtime")}
    faults.sh(node, "cat > /tmp/ctk.json", input=json.dumps(original))
    sh(node, "nvidia-ctk runtime configure --runtime=docker --set-as-default --config=/tmp/ctk.json")
    merged = json.loads(sh(node, "cat /tmp/ctk.json"))
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


def test_daemon_json_restarts_docker_with_it_and_undo(lab):
    node = "spark-worker"
    original = sh(node, "cat /etc/docker/daemon.json")
    assert json.loads(faults.lab_daemon_json(node))["bip"] == "198.19.1.1/24"
    runtimes = "docker info 2>/dev/null | grep '^ *Runtimes:'"
    config = dict(json.loads(faults.lab_daemon_json(node)), runtimes={"glm53-test": {"path": "runc"}})
    with faults.daemon_json(node, config) as fault:
        assert json.loads(sh(node, "cat /etc/docker/daemon.json", user="spark")) == config
        assert "glm53-test" in sh(node, runtimes, user="spark")
    _undo_twice(fault)
    assert sh(node, "cat /etc/docker/daemon.json") == original
    assert "glm53-test" not in sh(node, runtimes, user="spark")


def test_hide_command_and_undo(lab):
    node = "spark-head"
    with faults.hide_command(node, "nvidia-ctk") as fault:
        assert faults.sh(node, "command -v nvidia-ctk", user="spark", check=False).returncode != 0
        assert "nvidia-ctk" not in _ssh_spark(node, "command -v nvidia-ctk || true")
    _undo_twice(fault)
    assert sh(node, "command -v nvidia-ctk", user="spark") == "/usr/local/bin/nvidia-ctk\n"


def test_leave_group_and_grant_sudo_and_undo(lab):
    node = "spark-worker"
    with faults.leave_group(node) as left, faults.grant_sudo(node) as sudo:
        assert "docker" not in _ssh_spark(node, "id -nG").split()
        assert _ssh_spark(node, "sudo -n id -u") == "0\n"
    _undo_twice(left)
    _undo_twice(sudo)
    assert "docker" in _ssh_spark(node, "id -nG").split()
    assert faults.sh(node, "sudo -n true", user="spark", check=False).returncode != 0


def test_remove_docker_and_undo_reinstalls(lab):
    node = "spark-worker"
    with faults.remove_docker(node) as fault:
        assert faults.sh(node, "command -v docker", user="spark", check=False).returncode != 0
        assert sh(node, "systemctl show -p LoadState docker.service") == "LoadState=not-found\n"
    _undo_twice(fault)
    faults.sh(node, "docker run --rm --gpus all glm53-lab/busybox true", user="spark")

# ------------------------------------------------- ibdev2netdev follows carrier


def test_ibdev2netdev_decides_up_down_from_carrier_not_operstate(lab):
    """As the real script: Up when /sys/class/net/<dev>/carrier reads 1, whatever
    operstate says; Down without carrier, and when the read fails (admin down)."""
    node, uncabled = "spark-worker", "enp1s0f0np0"

    def line(hca):
        return next(x for x in sh(node, "ibdev2netdev", user="spark").splitlines() if x.startswith(hca + " "))

    peer = sh(node, f"ip -j link show dev {uncabled}")
    peer = json.loads(peer)[0]["link"]  # the veth's other end, e.g. glm53peer0
    try:
        # Link mode dormant: operstate DORMANT, carrier still 1 -> Up.
        sh(node, f"ip link set dev {LINK2} mode dormant && ip link set {LINK2} down && ip link set {LINK2} up")
        assert sh(node, f"cat /sys/class/net/{LINK2}/operstate /sys/class/net/{LINK2}/carrier") == "dormant\n1\n"
        assert line("roceP2p1s0f1") == f"roceP2p1s0f1 port 1 ==> {LINK2} (Up)"
        # Admin up but the far end down: no carrier -> Down; far end up -> Up.
        sh(node, f"ip link set {uncabled} up")
        assert sh(node, f"cat /sys/class/net/{uncabled}/carrier") == "0\n"
        assert line("rocep1s0f0") == f"rocep1s0f0 port 1 ==> {uncabled} (Down)"
        sh(node, f"ip link set {peer} up")
        assert line("rocep1s0f0") == f"rocep1s0f0 port 1 ==> {uncabled} (Up)"
        assert "port 1 (ACTIVE) ==> enp1s0f0np0 (Up)" in sh(node, "ibdev2netdev -v")
    finally:
        sh(node, f"ip link set {peer} down; ip link set {uncabled} down; "
                 f"ip link set dev {LINK2} mode default && ip link set {LINK2} down && ip link set {LINK2} up")
    # Admin down: reading carrier fails with EINVAL -> Down.
    assert faults.sh(node, f"cat /sys/class/net/{uncabled}/carrier", check=False).returncode != 0
    assert line("rocep1s0f0") == f"rocep1s0f0 port 1 ==> {uncabled} (Down)"
    assert line("roceP2p1s0f1") == f"roceP2p1s0f1 port 1 ==> {LINK2} (Up)"
    faults.sh("spark-head", f"ping -M do -s 8972 -c 1 -W 2 -I {LINK2} 198.18.2.11")


# ------------------------------------------------------- more fault helpers


HANG_CALLS = {
    "nvidia-smi": "nvidia-smi --query-gpu=name --format=csv,noheader",
    "ibdev2netdev": "ibdev2netdev",
    "nvidia-ctk": "nvidia-ctk --version",
}


@pytest.mark.parametrize("tool", faults.HANGABLE)
def test_hang_tool_wedges_one_tool_and_undo(lab, tool):
    node = "spark-worker"
    call = HANG_CALLS[tool]
    with faults.hang_tool(node, tool) as fault:
        assert faults.sh(node, f"timeout 3 {call}", user="spark", check=False).returncode == 124
        # The other tools and the other node still answer.
        for other, other_call in HANG_CALLS.items():
            if other != tool:
                faults.sh(node, f"timeout 10 {other_call} >/dev/null", user="spark")
        faults.sh("spark-head", f"timeout 10 {call} >/dev/null", user="spark")
        # A call left hanging in the background (as a timed-out task leaves it).
        sh(node, f"setsid {call} >/dev/null 2>&1 < /dev/null &", user="spark")
        assert eventually(lambda: sh(node, "pgrep -c -f '^glm53-lab-hung:' || true").strip() == "1")
    _undo_twice(fault)
    faults.sh(node, f"timeout 10 {call} >/dev/null", user="spark")
    assert sh(node, "pgrep -c -f '^glm53-lab-hung:' || true").strip() == "0"
    assert sh(node, f"test -e {faults.HANG} && echo present || echo absent") == "absent\n"


def test_hang_tool_rejects_a_tool_without_switch(lab):
    with pytest.raises(ValueError, match="no hang switch"):
        faults.hang_tool("spark-head", "docker")


def test_freeze_dockerd_wedges_docker_and_undo(lab):
    node = "spark-worker"
    with faults.freeze_dockerd(node) as fault:
        assert faults.sh(node, "timeout 3 docker ps", user="spark", check=False).returncode == 124
        assert sh(node, "ps -o stat= -C dockerd").strip().startswith("T")  # stopped, not gone
        faults.sh("spark-head", "timeout 10 docker ps >/dev/null", user="spark")
    _undo_twice(fault)
    faults.sh(node, "timeout 10 docker ps >/dev/null", user="spark")


def _ssh_spark(node_name, command):
    """As the deploy user over SSH from the controller: the path the roles take."""
    node = spark_lab.make_node(spark_lab.node_index(node_name))
    proc = subprocess.run(spark_lab.ssh_cmd("spark", node, command), capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_meminfo_with_cma_sets_or_adds_the_lines():
    live = "MemTotal:       16303412 kB\nFilePmdMapped:         0 kB\nHugePages_Total:       0\nHugePages_Free:        0\n"
    out = faults.meminfo_with_cma(live, 0, 10171136)
    assert out.splitlines()[2:4] == ["CmaTotal:              0 kB", "CmaFree:        10171136 kB"]
    assert out.splitlines()[4] == "HugePages_Total:       0"
    again = faults.meminfo_with_cma(out.replace("10171136", "1024"), 524288, 262144)
    assert [x for x in again.splitlines() if x.startswith("Cma")] == ["CmaTotal:         524288 kB", "CmaFree:          262144 kB"]
    assert len(again.splitlines()) == len(out.splitlines())


def test_kernel_kho_is_what_spark_reads_and_undo(lab):
    node = "spark-worker"
    read = "cat /proc/sys/kernel/osrelease; echo ==; cat /proc/meminfo; echo ==; cat /proc/cmdline; echo ==; cat /proc/version"

    def parts():
        release, meminfo, cmdline, version = _ssh_spark(node, read).split("==\n")
        return release, dict(line.split(":", 1) for line in meminfo.splitlines()), cmdline, version

    before = parts()
    assert before[0] != "7.0.0-1019-nvidia\n"
    with faults.kernel_kho(node, cmdline_kho_off=True) as fault:
        release, meminfo, cmdline, version = parts()
        assert release == "7.0.0-1019-nvidia\n"
        assert meminfo["CmaTotal"].split() == ["0", "kB"] and meminfo["CmaFree"].split() == ["10171136", "kB"]
        assert set(before[1]) <= set(meminfo)  # the rest is the live file
        assert cmdline == before[2].rstrip("\n") + " kho=off\n"
        assert version.startswith("Linux version 7.0.0-1019-nvidia ")
        # A plain docker exec as spark sees the same; the other node does not.
        assert sh(node, "cat /proc/sys/kernel/osrelease", user="spark") == "7.0.0-1019-nvidia\n"
        assert sh("spark-head", "cat /proc/sys/kernel/osrelease") == before[0]
    _undo_twice(fault)
    after = parts()
    assert after[0] == before[0] and after[2] == before[2] and after[3] == before[3]
    assert set(after[1]) == set(before[1])  # figures move between reads; the fields are the live ones again
    # The fault's copies are gone; glm53-lab-gpud's node meminfo and driver socket stay.
    assert sh(node, "ls -A /run/glm53-lab 2>/dev/null || true").split() == ["gpu.sock", "meminfo"]


def test_kernel_kho_without_cmdline_leaves_cmdline(lab):
    node = "spark-head"
    cmdline = sh(node, "cat /proc/cmdline")
    with faults.kernel_kho(node):
        assert sh(node, "cat /proc/cmdline", user="spark") == cmdline
        assert "CmaFree:        10171136 kB" in sh(node, "cat /proc/meminfo", user="spark")
    assert "10171136" not in sh(node, "cat /proc/meminfo")


def inet(node, netdev, user="root"):
    """[(address/prefix, scope, broadcast)] of `netdev` in the kernel's order, as `user` sees them."""
    info = json.loads(sh(node, f"ip -j -4 addr show dev {netdev}", user=user))
    return [(f"{a['local']}/{a['prefixlen']}", a["scope"], a.get("broadcast")) for d in info for a in d["addr_info"]]


def test_link_local_first_and_undo(lab):
    node = "spark-head"
    original = inet(node, LINK1)
    assert [a[:2] for a in original] == [("198.18.1.10/24", "global")]
    with faults.link_local_first(node, LINK1, "169.254.33.44") as fault:
        assert inet(node, LINK1, user="spark") == [("169.254.33.44/16", "link", "169.254.255.255")] + original
        first = sh(node, f"ip -4 -o addr show dev {LINK1} | head -1", user="spark")
        assert " inet 169.254.33.44/16 " in first
        faults.sh(node, f"ping -c 1 -W 2 -I {LINK1} 198.18.1.11")  # the static address still works
    _undo_twice(fault)
    assert inet(node, LINK1) == original
    with pytest.raises(ValueError, match="169.254.0.0/16"):
        faults.link_local_first(node, LINK1, "10.0.0.1")


def test_link_local_only_and_undo(lab):
    nodes = ("spark-head", "spark-worker")
    original = {n: inet(n, LINK1) for n in nodes}
    with faults.link_local_only(nodes, LINK1) as fault:
        assert inet("spark-head", LINK1, user="spark") == [("169.254.1.10/16", "link", "169.254.255.255")]
        assert inet("spark-worker", LINK1, user="spark") == [("169.254.1.11/16", "link", "169.254.255.255")]
        # Like a cable, the link carries link-local traffic; the static address is gone.
        faults.sh("spark-head", f"ping -c 1 -W 2 -I {LINK1} 169.254.1.11", user="spark")
        assert faults.sh("spark-head", "ping -c 1 -W 1 198.18.1.11", check=False).returncode != 0
        assert [a[0] for a in inet("spark-head", LINK2)] == ["198.18.2.10/24"]
    _undo_twice(fault)
    assert {n: inet(n, LINK1) for n in nodes} == original
    faults.sh("spark-head", f"ping -c 1 -W 2 -I {LINK1} 198.18.1.11")


def test_cable_other_cage_and_undo(lab):
    nodes = ("spark-head", "spark-worker")
    links = {n: sh(n, f"cat {faults.LINKS}") for n in nodes}
    ibdev = {n: sh(n, "ibdev2netdev") for n in nodes}
    state = f"cat {SYSFS}/rocep1s0f0/ports/1/state {SYSFS}/rocep1s0f1/ports/1/state"
    with faults.cable_other_cage(nodes) as fault:
        for n in nodes:
            assert sh(n, "ibdev2netdev", user="spark").splitlines() == [
                "rocep1s0f0 port 1 ==> enp1s0f0np0 (Up)",
                "rocep1s0f1 port 1 ==> enp1s0f1np1 (Down)",
                "roceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Up)",
                "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Down)",
            ]
            assert eventually(lambda n=n: sh(n, state) == "4: ACTIVE\n1: DOWN\n")
            assert sh(n, "ip -4 -o addr show dev enp1s0f1np1") == ""
            assert sh(n, "cat /sys/class/net/enp1s0f0np0/mtu") == "9000\n"
        assert sh("spark-head", "ip -4 -o addr show dev enp1s0f0np0 | awk '{print $4}'") == "198.18.1.10/24\n"
        faults.sh("spark-head", "ping -M do -s 8972 -c 1 -W 2 -I enp1s0f0np0 198.18.1.11", user="spark")
        faults.sh("spark-head", "ping -M do -s 8972 -c 1 -W 2 -I enP2p1s0f0np0 198.18.2.11", user="spark")
        # Rerunning the renamer (boot, `make lab-up`) keeps the fault: links.json says so.
        assert sh("spark-worker", "/usr/local/sbin/glm53-lab-netnames") == ""
    _undo_twice(fault)
    for n in nodes:
        assert sh(n, f"cat {faults.LINKS}") == links[n]
        assert sh(n, "ibdev2netdev") == ibdev[n]
        assert eventually(lambda n=n: sh(n, state) == "1: DOWN\n4: ACTIVE\n")
    faults.sh("spark-head", f"ping -M do -s 8972 -c 1 -W 2 -I {LINK1} 198.18.1.11")


def test_block_port_drops_only_that_port_and_undo(lab):
    port = 29599
    listener = sh(
        "spark-head",
        f"setsid timeout 120 python3 -c 'import socket, time; s = socket.create_server((\"0.0.0.0\", {port})); time.sleep(120)' "
        "> /dev/null 2>&1 < /dev/null & echo $!",
        user="spark",
    ).strip()

    def connect(address):
        script = f"timeout 3 bash -c 'exec 3<>/dev/tcp/{address}/{port}'"
        return faults.sh("spark-worker", script, user="spark", check=False).returncode

    try:
        assert eventually(lambda: connect("198.18.1.10") == 0, timeout=10)
        with faults.block_port("spark-head", port) as fault:
            assert connect("198.18.1.10") == 124  # dropped: the connect hangs
            assert connect("198.18.2.10") == 124
            assert faults.sh("spark-worker", "ssh -V", check=False).returncode == 0
        _undo_twice(fault)
        assert connect("198.18.1.10") == 0
        with faults.block_port("spark-head", port, netdev=LINK1):
            assert connect("198.18.1.10") == 124
            assert connect("198.18.2.10") == 0  # the other link is open
        assert connect("198.18.1.10") == 0
    finally:
        faults.sh("spark-head", f"kill {listener} 2>/dev/null || true")


def test_helpers_take_any_lab_node_name(lab):
    assert [spark_lab.node_name(i) for i in range(4)] == ["spark-head", "spark-worker", "spark-worker-2", "spark-worker-3"]
    assert [spark_lab.node_index(n) for n in ("spark-head", "spark-worker", "spark-worker-3", "spark-worker-1", "other")] == [
        0, 1, 3, None, None]
    for bad in ("spark-worker-1", "spark-worker-16", "worker", "spark-head; true"):
        with pytest.raises(ValueError, match="unknown lab node"):
            faults.sh(bad, "true")


# ------------------------------------------------------------ four-node lab


def test_every_node_reaches_the_lab_hub(lab):
    endpoint = yaml.safe_load((REPO / "lab" / "inventory" / "group_vars" / "sparks.yml").read_text())["glm53_hf_endpoint"]
    assert endpoint == spark_lab.HUB_URL
    repo, sha = "brandonmusic/GLM-5.3-Flash-tr3-4bpw", "5ab363a8dcf6405955fd5f99671e01a1c9fb124b"
    for node in lab.nodes.values():
        info = json.loads(sh(node.name, f"curl -sf {endpoint}/api/models/{repo}/revision/{sha}?blobs=true"))
        assert info["sha"] == sha and info["id"] == repo
        assert any(s.get("lfs") for s in info["siblings"])
    with urllib.request.urlopen(endpoint + "/_lab/requests", timeout=10) as resp:
        clients = {r["client"] for r in json.load(resp) if r["repo"] == repo}
    assert {n.mgmt for n in lab.nodes.values()} <= clients


def _fingerprint(node):
    """What a fault changes, as a user of the node sees it."""
    return sh(node, "cat /etc/glm53-lab/gpu.json /etc/glm53-lab/links.json; ls /etc/glm53-lab; "
                    "ip -4 -o addr show | awk '{print $2, $4}' | sort; "
                    "for d in enp1s0f1np1 enP2p1s0f1np1; do cat /sys/class/net/$d/mtu /sys/class/net/$d/operstate; done; "
                    "iptables -S INPUT; command -v nvidia-ctk docker; id -nG spark; ls /etc/sudoers.d; "
                    "cat /etc/docker/daemon.json; systemctl is-active docker; "
                    "awk '$5 ~ /^[/]proc[/]|glm53/ {print $5}' /proc/self/mountinfo | sort; cat /proc/sys/kernel/osrelease; "
                    "md5sum /home/spark/.ssh/authorized_keys")


@pytest.mark.parametrize("deploy", [False, True], ids=["up", "reset"])
def test_faults_left_by_a_killed_run_are_undone_by_lab_up(lab, deploy):
    # A killed run never reaches the helpers' undo: apply them and drop them, as it would.
    before = {n: _fingerprint(n) for n in ("spark-head", "spark-worker")}
    if deploy:  # what a deployment leaves: an engine container
        sh("spark-worker", "docker run -d --name glm53-left-behind glm53-lab/busybox sleep 600 >/dev/null")
    applied = [
        faults.hang_tool("spark-head", "nvidia-smi"),
        faults.hide_command("spark-worker", "nvidia-ctk"),
        faults.foreign_cuda_process("spark-head"),
        faults.block_port("spark-head", 29500),
        faults.small_disk("spark-worker", "/home/spark/glm53-killed-run", 1 << 20),
        faults.kernel_kho("spark-worker", cmdline_kho_off=True),
        faults.set_mtu("spark-head", LINK2, 1500),
        faults.move_link_address("spark-worker", LINK1),
        faults.link_local_first("spark-head", LINK1),
        faults.link_down("spark-worker", LINK2),
        faults.leave_group("spark-worker"),
        faults.grant_sudo("spark-head"),
        faults.break_worker_ssh(),
        faults.cable_other_cage("spark-head"),
        faults.daemon_json("spark-worker", {"storage-driver": "vfs"}),
    ]
    for fault in applied:
        fault.__enter__()
    sh("spark-head", "(sleep 0.2; nvidia-smi) >/dev/null 2>&1 &")  # a call left hung on the switch
    assert {n: _fingerprint(n) for n in before} != before
    if deploy:
        changes = spark_lab.reset()
        assert any("removed 1 container" in c for c in changes), changes
    else:
        changes = spark_lab.up(nodes=2).changes
    after = {n: _fingerprint(n) for n in before}
    assert after == before, changes
    for expected in ("no hang switch", "/nvidia-ctk", "gpu.json", "removed iptables", "unmounted /proc/meminfo",
                     "unmounted /home/spark/glm53-killed-run", "mtu 9000", "spark in group docker",
                     "removed /etc/sudoers.d/glm53-lab-spark", "authorized_keys", "links.json", "daemon.json"):
        assert any(expected in c for c in changes), (expected, changes)
    assert not sh("spark-head", "pgrep -f '^glm53-lab-hung:' || true").strip()
    # And the lab is whole again: a rerun changes nothing, SSH works from the head.
    assert spark_lab.up(nodes=2).changes == []
    sh("spark-head", "ssh -o BatchMode=yes -o ConnectTimeout=5 198.18.1.11 true", user="spark")


def test_a_stale_namespace_holding_a_node_address_is_removed_by_lab_up(lab):
    # The CI failure "ssh spark@198.18.0.11 failed: Connection refused" on a lab booted from
    # a killed run's state: an empty namespace answered for the worker's address.
    node = spark_lab.make_node(1)
    with faults.stale_namespace("spark-worker"):
        refused = subprocess.run(spark_lab.ssh_cmd("spark", node, "true"), capture_output=True, text=True, timeout=60, check=False)
        assert "Connection refused" in refused.stderr
        changes = spark_lab.up(nodes=2).changes
        assert any(f"removed {node.mgmt} (spark-worker's) from a stale network namespace" in c for c in changes), changes
        assert _ssh_spark("spark-worker", "hostname") == "spark-worker\n"
    assert spark_lab.up(nodes=2).changes == []
