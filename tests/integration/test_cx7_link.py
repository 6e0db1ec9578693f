"""cx7_link end to end on the Spark lab: a clean pair passes and reruns with no change;
each real fault stops the play at the role with the failing check named, and nothing
after the role runs.

The faults come from lab_faults (root inside the node containers, never through the
role under test). The play is tests/integration/cx7_link/preflight_then_marker.yml:
the role, then a marker task in the same play and a marker play.

Cost: one preflight run per fault (each fault is a different check failing for its real reason),
about 20 s of CPU each."""

from __future__ import annotations

import json

import pytest

import lab_faults
from lab_faults import HEAD, WORKER

PLAYBOOK = "tests/integration/cx7_link/preflight_then_marker.yml"
MARKERS = ("MARKER later role in the same play", "MARKER later play")
L1, L2 = "enp1s0f1np1", "enP2p1s0f1np1"


def preflight(run_playbook, tmp_path, expect_success=True, **kw):
    report_path = tmp_path / "cx7_link-report.json"
    extravars = {"cx7_link_report_path": str(report_path)}
    extravars.update(kw.pop("extravars", {}))
    result = run_playbook(PLAYBOOK, extravars=extravars, expect_success=expect_success, **kw)
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return result, report


def checks(report, name, node=None, status=None):
    return [c for c in report["checks"] if c["check"] == name and (node is None or c["node"] == node)
            and (status is None or c["status"] == status)]


def assert_stopped_at(result, report, check, node, *fragments):
    """The play failed at the gate, the check failed on `node` with all `fragments` in
    its message, the gate message carries the same line, and no marker ran."""
    result.assert_failed()
    failed = checks(report, check, node, "fail")
    assert failed, f"{check} did not fail on {node}: " + json.dumps(
        [c for c in report["checks"] if c["status"] != "ok"], indent=1)
    message = failed[0]["message"]
    for fragment in fragments:
        assert fragment in message, message
    gate = [t for t in result.failed_tasks() if t["task"] == "Stop when a fail-level check failed"]
    assert {t["host"] for t in gate} == {HEAD, WORKER}, result.failed_tasks()
    assert message in gate[0]["msg"]
    assert all(part in message for part in ("expected", "found", "fix:")), message
    for marker in MARKERS:
        assert result.task_results(marker) == {}, f"{marker} ran after a failed preflight"
    return failed[0]


def test_clean_pair_passes_publishes_facts_and_is_idempotent(assert_idempotent, tmp_path):
    report_path = tmp_path / "report.json"
    first, second = assert_idempotent(PLAYBOOK, extravars={"cx7_link_report_path": str(report_path)})
    report = json.loads(report_path.read_text())
    assert report["status"] == "ok", [c["message"] for c in report["checks"] if c["status"] != "ok"]
    assert second.changed_total == 0
    # The gather read the contract files' digests: nothing differs, so no round trip writes them.
    persist = second.task_results("Persist the cluster contract on every node")
    assert {node: res["_event"] for node, res in persist.items()} == {
        HEAD: "runner_on_skipped", WORKER: "runner_on_skipped"}
    env = second.task_results("MARKER later role in the same play")
    for node in (HEAD, WORKER):
        assert env[node]["msg"] == {
            "NCCL_SOCKET_IFNAME": L1, "GLOO_SOCKET_IFNAME": L1,
            "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1", "NCCL_IB_GID_INDEX": "3"}
    later = second.task_results("MARKER later play")
    assert later[WORKER]["msg"] == "198.18.1.10:29551 198.18.1.11"
    assert later[HEAD]["msg"] == "198.18.1.10:29551 198.18.1.10"
    # The table is in the play output.
    assert "link.df_ping" in second.stdout and "overall" in second.stdout


def test_check_mode_runs_the_same_checks(run_playbook, tmp_path):
    result, report = preflight(run_playbook, tmp_path, cmdline="--check")
    assert report["status"] == "ok"
    assert result.changed_total == 0


def test_worker_link_down(run_playbook, tmp_path):
    with lab_faults.link_down(WORKER, L1):
        result, report = preflight(run_playbook, tmp_path, expect_success=False)
    assert_stopped_at(result, report, "link.port_up", WORKER, "[link.port_up] spark-worker: enp1s0f1np1 is not Up",
                      "rocep1s0f1 -> enp1s0f1np1 (Down)", "cable")
    assert checks(report, "rdma.port_active", WORKER, "fail")


def test_mtu_mismatch(run_playbook, tmp_path):
    with lab_faults.set_mtu(WORKER, L1, 1500):
        result, report = preflight(run_playbook, tmp_path, expect_success=False)
    assert_stopped_at(result, report, "link.mtu_match", WORKER, "expected MTU 9000 as on spark-head, found MTU 1500")
    assert checks(report, "link.mtu", WORKER, "fail")


def test_head_link_address_not_on_the_link_netdev(run_playbook, tmp_path):
    with lab_faults.move_link_address(HEAD, L1, to="lo"):
        result, report = preflight(run_playbook, tmp_path, expect_success=False)
    assert_stopped_at(result, report, "link.address", HEAD, "HEAD_IP 198.18.1.10 is not on enp1s0f1np1",
                      "not on the LAN interface")


def test_head_to_worker_ssh_broken(run_playbook, tmp_path):
    with lab_faults.break_worker_ssh():
        result, report = preflight(run_playbook, tmp_path, expect_success=False)
    assert_stopped_at(result, report, "ssh.head_to_worker", HEAD, "spark@198.18.1.11", "Permission denied",
                      "ssh-copy-id")
    assert checks(report, "ssh.worker_docker", WORKER, "skip")


def test_worker_docker_down_over_ssh(run_playbook, tmp_path):
    with lab_faults.stop_dockerd(WORKER):
        result, report = preflight(run_playbook, tmp_path, expect_success=False)
    assert_stopped_at(result, report, "ssh.worker_docker", WORKER, "docker")


def test_foreign_cuda_process_on_the_worker(run_playbook, tmp_path):
    with lab_faults.foreign_cuda_process(WORKER, pid=4242, name="python3"):
        result, report = preflight(run_playbook, tmp_path, expect_success=False)
    assert_stopped_at(result, report, "gpu.idle", WORKER, "pid 4242 (python3)", "stop it first")
    assert checks(report, "gpu.idle", HEAD, "ok")


def test_driver_mismatch_only_warns(run_playbook, tmp_path):
    with lab_faults.gpu_driver(WORKER, "590.44.01"):
        result, report = preflight(run_playbook, tmp_path)
    assert report["status"] == "warn"
    (match,) = checks(report, "gpu.driver_match", WORKER, "warn")
    assert match["found"] == "590.44.01" and "580.95.05" in match["expected"]
    assert checks(report, "gpu.driver_version", WORKER, "warn")
    assert set(result.task_results(MARKERS[0])) == {HEAD, WORKER}
    assert "WARN [gpu.driver_match] spark-worker" in result.stdout


def test_disk_too_small_on_one_node(run_playbook, tmp_path):
    cache = "/home/spark/.cache/huggingface"
    # Made as the deploy user first, so the tmpfs keeps its owner (and ~/.cache stays spark's).
    lab_faults.sh(WORKER, f"mkdir -p {cache}", user="spark")
    with lab_faults.small_disk(WORKER, cache, 64 * 1024 * 1024):
        result, report = preflight(run_playbook, tmp_path, expect_success=False)
    failed = assert_stopped_at(result, report, "disk.free", WORKER, cache, "checkpoint")
    assert failed["found"].endswith("GB free") and failed["found"].startswith("0.1")
    assert [c["status"] for c in checks(report, "disk.free", HEAD)] == ["ok"]


@pytest.mark.parametrize("path, port", [("tensorfold", 29551), ("vllm", 25053)])
def test_firewall_on_the_master_port(run_playbook, tmp_path, path, port):
    with lab_faults.block_port(HEAD, port):
        result, report = preflight(run_playbook, tmp_path, expect_success=False, extravars={"path": path})
    assert_stopped_at(result, report, "port.master", WORKER, f"198.18.1.10:{port}", f"allow TCP {port}")
    # The listener is gone once the play ends.
    listening = lab_faults.sh(HEAD, f"ss -Hltn 'sport = :{port}'").stdout.strip()
    assert listening == ""


def test_nccl_test_is_skipped_with_the_reason_without_rdma_devices(run_playbook, tmp_path):
    # The lab's nodes have /dev/infiniband's device nodes (a rank is given them); a node
    # without them (a VM, no rdma-core) is this fault.
    for node in (HEAD, WORKER):
        lab_faults.sh(node, "mv /dev/infiniband /dev/infiniband.glm53-hidden")
    try:
        result, report = preflight(run_playbook, tmp_path, extravars={
            "cx7_link_nccl_test": True, "cx7_link_nccl_test_image": "glm53-lab/busybox"})
    finally:
        for node in (HEAD, WORKER):
            lab_faults.sh(node, "mv /dev/infiniband.glm53-hidden /dev/infiniband")
    (skip,) = result.task_results("Say why the NCCL test is skipped").values()
    assert "no /dev/infiniband/uverbs0" in skip["msg"] and "real CX7 hardware" in skip["msg"]


class _hide_ibdev2netdev(lab_faults.Fault):  # noqa: N801 - reads like the fault
    """A node without the ibdev2netdev tool (no MLNX_OFED/DOCA userland): moved aside, then back."""

    TOOL = "/usr/local/bin/ibdev2netdev"

    def __init__(self, node):
        super().__init__()
        self.node = node

    def _apply(self):
        lab_faults.sh(self.node, f"mv {self.TOOL} {self.TOOL}.glm53-hidden")

    def _undo(self):
        lab_faults.sh(self.node, f"mv {self.TOOL}.glm53-hidden {self.TOOL}")


def test_without_the_tool_the_sysfs_walk_gives_the_same_settings(run_playbook, tmp_path):
    with _hide_ibdev2netdev(WORKER):
        result, report = preflight(run_playbook, tmp_path)
    assert report["status"] == "ok"
    (facts,) = checks(report, "node.link_facts", WORKER)
    assert facts["found"] == "4 RDMA port(s) via sysfs"
    assert checks(report, "node.link_facts", HEAD)[0]["found"] == "4 RDMA port(s) via tool"
    assert report["nccl"][WORKER] == report["nccl"][HEAD] == {
        "NCCL_SOCKET_IFNAME": L1, "GLOO_SOCKET_IFNAME": L1,
        "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1", "NCCL_IB_GID_INDEX": "3"}
