"""cx7_link on the lab, for the cases a review found a broken Spark pair passing, a
play hanging, or the preflight depending on timing; and the cluster contract later
plays read. Faults come from lab_faults (root in the node containers, never the role).

Cost: one preflight run per case, as in test_cx7_link."""

from __future__ import annotations

import json

import lab_faults
from lab_faults import HEAD, WORKER
from test_cx7_link import L1, assert_stopped_at, checks, preflight

DEFAULT_COMMAND_TIMEOUT = 10  # cx7_link_command_timeout's default

CONTRACT_PLAYBOOK = "tests/integration/cx7_link/read_contract.yml"
SERIAL_PLAYBOOK = "tests/integration/cx7_link/serial_preflight.yml"


def test_gid_index_is_the_link_address_not_the_first_ipv4(run_playbook, tmp_path):
    with lab_faults.link_local_first(HEAD, L1, "169.254.10.10"):
        first = lab_faults.sh(HEAD, f"ip -j -4 addr show dev {L1}").stdout
        assert json.loads(first)[0]["addr_info"][0]["local"] == "169.254.10.10", first
        expected, link_local = lab_faults.gid_index_in_sysfs(HEAD, "rocep1s0f1", "198.18.1.10", "169.254.10.10")
        _result, report = preflight(run_playbook, tmp_path)
    assert expected != link_local
    assert report["failures"] == [], [c["message"] for c in report["failures"]]
    # The only warning: the head's two HCAs now use different GID indexes for their link addresses.
    assert [(c["check"], c["node"]) for c in report["warnings"]] == [("rdma.gid_index_uniform", HEAD)]
    assert report["nccl"][HEAD]["NCCL_IB_GID_INDEX"] == expected
    assert report["contract"]["master_address"] == "198.18.1.10"


class _head_knows_host_key(lab_faults.Fault):  # noqa: N801 - reads like the state it makes
    """The head's deploy user knows `node`'s host key under `address` too, as an operator
    who ssh-ed there once would (the lab pins keys for the static addresses only)."""

    KNOWN = "/home/spark/.ssh/known_hosts"

    def __init__(self, node, address):
        super().__init__()
        self.node, self.address = node, address

    def _apply(self):
        key = lab_faults.sh(self.node, "cut -d' ' -f1,2 /etc/ssh/ssh_host_ed25519_key.pub").stdout.strip()
        lab_faults.sh(HEAD, f"echo '{self.address} {key}' >> {self.KNOWN}", user="spark")

    def _undo(self):
        lab_faults.sh(HEAD, f"sed -i '/^{self.address} /d' {self.KNOWN}", user="spark")


def test_a_link_local_only_pair_is_valid(run_playbook, tmp_path):
    addresses = {n: lab_faults.link_local_address(n, L1) for n in (HEAD, WORKER)}
    with lab_faults.link_local_only([HEAD, WORKER], L1), _head_knows_host_key(WORKER, addresses[WORKER]):
        expected = {n: lab_faults.gid_index_in_sysfs(n, "rocep1s0f1", addresses[n]) for n in (HEAD, WORKER)}
        # No configured address: the operator left the link to IPv4LL.
        _result, report = preflight(run_playbook, tmp_path, extravars={"glm53_link_address": ""})
    assert report["status"] == "ok", [c["message"] for c in report["checks"] if c["status"] != "ok"]
    assert report["contract"]["master_address"] == addresses[HEAD]
    assert report["contract"]["nodes"][WORKER]["link_address"] == addresses[WORKER]
    (subnet,) = [c for c in checks(report, "link.subnet", WORKER) if c["netdev"] == L1]
    assert subnet["status"] == "ok" and "169.254.0.0/16" in subnet["summary"], subnet
    for node in (HEAD, WORKER):
        assert report["nccl"][node]["NCCL_IB_GID_INDEX"] == expected[node]


def test_disk_counts_only_this_models_bytes(run_playbook, tmp_path):
    cache = "/home/spark/.cache/huggingface"
    lab_faults.sh(WORKER, f"mkdir -p {cache}", user="spark")
    with lab_faults.small_disk(WORKER, cache, 64 * 1024 * 1024):
        # Another model's 40 MiB in the same cache: it must not count toward ours.
        other = f"{cache}/hub/models--someone--other-model"
        lab_faults.sh(WORKER, f"mkdir -p {other}/blobs {other}/snapshots/{'a' * 40} && "
                              f"head -c 41943040 /dev/urandom > {other}/blobs/deadbeef && "
                              f"ln -s ../../blobs/deadbeef {other}/snapshots/{'a' * 40}/model.safetensors",
                      user="spark")
        free = int(lab_faults.sh(WORKER, f"df -B1 --output=avail {cache} | tail -1", user="spark").stdout)
        result, report = preflight(run_playbook, tmp_path, expect_success=False, extravars={
            "cx7_link_disk_need_bytes": {"tensorfold": {"checkpoint": 50_000_000}}})
    failed = assert_stopped_at(result, report, "disk.free", WORKER, cache, "checkpoint", "0.1 GB")
    # The numbers: need 0.1 GB (50 MB rounds up), found what df measured, and no bytes counted as ours.
    assert failed["found"] == "%.1f GB free" % (free / 1e9), failed
    assert "already there" not in failed["found"]


def test_the_other_qsfp_cage_works_the_same(run_playbook, tmp_path):
    with lab_faults.cable_other_cage([HEAD, WORKER]):
        _result, report = preflight(run_playbook, tmp_path)
    assert report["status"] == "ok", [c["message"] for c in report["checks"] if c["status"] != "ok"]
    assert report["warnings"] == []
    for node in (HEAD, WORKER):
        assert report["nccl"][node]["NCCL_IB_HCA"] == "rocep1s0f0,roceP2p1s0f0"
        assert report["nccl"][node]["NCCL_SOCKET_IFNAME"] == "enp1s0f0np0"


def test_a_wedged_nvidia_smi_fails_with_the_node_command_and_timeout(run_playbook, tmp_path):
    with lab_faults.hang_tool(WORKER, "nvidia-smi"):
        result, report = preflight(run_playbook, tmp_path, expect_success=False,
                                   extravars={"cx7_link_command_timeout": 3})
    failed = assert_stopped_at(result, report, "gpu.model", WORKER, "nvidia-smi", "within 3 s")
    assert "spark-worker" in failed["message"]
    # The process list is not asked of the same wedged driver: one deadline, not two.
    (idle,) = checks(report, "gpu.idle", WORKER)
    assert "not asked" in idle["found"] and "within 3 s" in idle["found"], idle
    # The given 3 s deadline ended the call: no task waited as long as the 10 s default
    # (7 s left for the task's own work, which took up to 4 s on a loaded CI machine).
    task, seconds = result.slowest_task(WORKER)
    assert seconds < DEFAULT_COMMAND_TIMEOUT, f"{task} took {seconds:.1f}s with a wedged nvidia-smi"


def test_a_wedged_ibdev2netdev_fails_the_port_map_naming_it(run_playbook, tmp_path):
    with lab_faults.hang_tool(WORKER, "ibdev2netdev"):
        result, report = preflight(run_playbook, tmp_path, expect_success=False,
                                   extravars={"cx7_link_command_timeout": 3})
    assert_stopped_at(result, report, "node.link_facts", WORKER, "ibdev2netdev", "3 s")
    # Everything that needs the port map is skipped because of it, not failed on its own.
    assert checks(report, "link.port_up", WORKER, "skip")


def test_a_wedged_docker_on_the_worker_fails_the_ssh_docker_check(run_playbook, tmp_path):
    with lab_faults.freeze_dockerd(WORKER):
        result, report = preflight(run_playbook, tmp_path, expect_success=False,
                                   extravars={"cx7_link_ssh_timeout": 5})
    assert_stopped_at(result, report, "ssh.worker_docker", WORKER, "docker ps -q", "within 5 s")
    assert checks(report, "ssh.head_to_worker", HEAD, "ok")


def test_port_probe_passes_with_forks_1(run_playbook, tmp_path):
    _result, report = preflight(run_playbook, tmp_path, cmdline="--forks 1")
    assert checks(report, "port.master", WORKER, "ok")


def test_port_probe_passes_under_serial(run_playbook, tmp_path):
    report_path = tmp_path / "serial.json"
    run_playbook(SERIAL_PLAYBOOK, extravars={"cx7_link_report_path": str(report_path)})
    report = json.loads(report_path.read_text())
    assert report["status"] == "ok", [c["message"] for c in report["checks"] if c["status"] != "ok"]
    assert checks(report, "port.master", WORKER, "ok")


def test_known_bad_kernel_fails_with_the_fix(run_playbook, tmp_path):
    with lab_faults.kernel_kho(WORKER):
        result, report = preflight(run_playbook, tmp_path, expect_success=False)
    assert_stopped_at(result, report, "node.kernel", WORKER, "7.0.0-1019-nvidia", "kho=off", "6.17")
    with lab_faults.kernel_kho(WORKER, cmdline_kho_off=True):
        _result, report = preflight(run_playbook, tmp_path)
    assert checks(report, "node.kernel", WORKER, "ok")


class _engine_on_gpu(lab_faults.Fault):  # noqa: N801 - reads like the state it makes
    """A container named like our engine's rank runs on the node and its process holds the
    (simulated) GPU: what a converged rerun sees while the model serves."""

    def __init__(self, node, name):
        super().__init__()
        self.node, self.name = node, name
        self.saved = None

    def _apply(self):
        self.saved = lab_faults.sh(self.node, f"cat {lab_faults.GPU_STATE}").stdout
        lab_faults.sh(self.node, f"docker rm -f {self.name} >/dev/null 2>&1; "
                                 f"docker run -d --name {self.name} --label dgx_spark.glm53.engine=test "
                                 f"glm53-lab/busybox sleep 600 >/dev/null")
        pid = int(lab_faults.sh(self.node, f"docker inspect -f '{{{{.State.Pid}}}}' {self.name}").stdout)
        state = json.loads(self.saved)
        state["compute_apps"] = [{"pid": pid, "name": "python3", "used_memory_mib": 90000}]
        lab_faults.sh(self.node, f"cat > {lab_faults.GPU_STATE}", input=json.dumps(state))

    def _undo(self):
        lab_faults.sh(self.node, f"cat > {lab_faults.GPU_STATE}", input=self.saved)
        lab_faults.sh(self.node, f"docker rm -f {self.name} >/dev/null")


def test_serving_mode_passes_and_a_foreign_process_still_fails(run_playbook, tmp_path):
    with _engine_on_gpu(HEAD, "glm53-tf-r0"), _engine_on_gpu(WORKER, "glm53-tf-r1"):
        _result, report = preflight(run_playbook, tmp_path)
        for node, name in ((HEAD, "glm53-tf-r0"), (WORKER, "glm53-tf-r1")):
            (idle,) = checks(report, "gpu.idle", node, "ok")
            assert name in idle["found"], idle
    with lab_faults.foreign_cuda_process(WORKER, pid=4242, name="python3"):
        result, report = preflight(run_playbook, tmp_path, expect_success=False)
    assert_stopped_at(result, report, "gpu.idle", WORKER, "pid 4242 (python3)")


def test_out_of_range_input_is_refused_before_any_probe(run_playbook, tmp_path):
    result, report = preflight(run_playbook, tmp_path, expect_success=False, extravars={"cx7_link_mtu": 100000})
    assert report is None
    (fail,) = [t for t in result.failed_tasks() if t["task"] == "Check numeric inputs are in range"]
    assert "cx7_link_mtu must be a number from 576 to 9216 or 0, found 100000" in fail["msg"]
    assert result.task_results("Gather each node's link, GPU, kernel, memory and disk facts") == {}


def test_contract_is_kept_on_every_node_and_read_under_limit(run_playbook, tmp_path):
    # A hand edit of the worker's cluster.env: the preflight writes that node's files again.
    lab_faults.sh(WORKER, "mkdir -p ~/.config/dgx_spark.glm53 && echo GLM53_EXTRA=1 >> ~/.config/dgx_spark.glm53/cluster.env",
                  user="spark")
    result, report = preflight(run_playbook, tmp_path)
    assert result.task_results("Persist the cluster contract on every node")[WORKER]["changed"] is True
    contract = report["contract"]
    for node in (HEAD, WORKER):
        kept = json.loads(lab_faults.sh(node, "cat ~/.config/dgx_spark.glm53/cluster.json", user="spark").stdout)
        assert kept == contract
    assert "GLM53_EXTRA" not in lab_faults.sh(WORKER, "cat ~/.config/dgx_spark.glm53/cluster.env", user="spark").stdout
    refused = run_playbook("playbooks/preflight.yml", limit=WORKER, expect_success=False)
    (fail,) = [t for t in refused.failed_tasks() if t["task"] == "Check every node is in the play"]
    assert "missing spark-head" in fail["msg"] and "without --limit" in fail["msg"]
    read = run_playbook(CONTRACT_PLAYBOOK, limit=WORKER)
    (shown,) = read.task_results("CONTRACT").values()
    assert shown["msg"]["contract"] == contract
    assert shown["msg"]["env"] == ";".join([WORKER, "198.18.1.10", "29551", "rocep1s0f1,roceP2p1s0f1",
                                            contract["nodes"][WORKER]["env"]["NCCL_IB_GID_INDEX"]])
