"""The cx7_link check functions on observation dicts shaped like the role records them."""

import copy
import json
import os
import socket
import subprocess
import sys

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _cx7_checks as c

HEAD, WORKER = "spark-head", "spark-worker"
L1, L2 = "enp1s0f1np1", "enP2p1s0f1np1"
GIB = 1 << 30

CONFIG = {
    "head": HEAD, "workers": [WORKER], "path": "tensorfold", "netdev": L1, "second_netdev": L2,
    "master_port": 29551, "mtu": 0, "ssh_user": "spark", "gpu_name": "NVIDIA GB10",
    "driver_warn_prefixes": ["590."], "gpu_process_allow": [], "mem_free_gib": 100, "mem_available_gib": 100,
}


def port(hca, netdev, ipv4, state="Up", mtu=9000, gid=3, sysfs_state="ACTIVE"):
    return {
        "hca": hca, "port": 1, "netdev": netdev, "state": state, "sysfs_state": sysfs_state,
        "operstate": "UP" if state == "Up" else "DOWN", "mtu": mtu, "ipv4": ipv4, "gid_index": gid,
        "gid_index_by_ipv4": {}, "roce_v2_ipv4_gids": [],
    }


def node(last_octet, address=None):
    ip1, ip2 = "198.18.1.%d" % last_octet, "198.18.2.%d" % last_octet
    ports = [
        port("rocep1s0f0", "enp1s0f0np0", [], state="Down", mtu=1500, gid=None, sysfs_state="DOWN"),
        port("rocep1s0f1", L1, [ip1 + "/24"]),
        port("roceP2p1s0f0", "enP2p1s0f0np0", [], state="Down", mtu=1500, gid=None, sysfs_state="DOWN"),
        port("roceP2p1s0f1", L2, [ip2 + "/24"]),
    ]
    meminfo = "MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\n" % (128 * GIB // 1024, 110 * GIB // 1024,
                                                                          115 * GIB // 1024)
    disk = [{"name": "checkpoint", "path": "~/.cache/huggingface", "need": 165 * 10 ** 9, "dev": 1, "mount": "/",
             "free": 900 * 10 ** 9, "checked": "/home/spark"},
            {"name": "prepared", "path": "~/.cache/glm53/prepared", "need": 84 * 10 ** 9, "dev": 1, "mount": "/",
             "free": 900 * 10 ** 9, "checked": "/home/spark"}]
    return {
        "netdev": L1, "second_netdev": L2, "address": ip1 if address is None else address,
        "sysfs_root": "/sys",
        "ibdev": {"changed": False, "ansible_facts": {"ibdev2netdev": {"source": "tool", "ports": ports}}},
        "networks": {L1: ["198.18.1.0/24"], L2: ["198.18.2.0/24"], "enp1s0f0np0": [], "enP2p1s0f0np0": []},
        "gpu": {"rc": 0, "stdout": "NVIDIA GB10, 580.95.05"},
        "apps": {"rc": 0, "stdout": ""},
        "meminfo": meminfo,
        "disk": {"rc": 0, "stdout": json.dumps(disk)},
    }


def with_probes(obs):
    """Add the probe results a healthy run records."""
    head, worker = obs[HEAD], obs[WORKER]
    for me, peer_octet in ((head, 11), (worker, 10)):
        me["pings"] = [
            {"rc": 0, "item": {"netdev": L1, "peer": WORKER if me is head else HEAD,
                               "target": "198.18.1.%d" % peer_octet, "size": 8972}},
            {"rc": 0, "item": {"netdev": L2, "peer": WORKER if me is head else HEAD,
                               "target": "198.18.2.%d" % peer_octet, "size": 8972}},
        ]
    head["port_probe"] = {"rc": 0, "stdout": json.dumps({"mode": "listen", "bound": True, "accepted": True})}
    worker["port_probe"] = {"rc": 0, "stdout": json.dumps({"mode": "connect", "address": "198.18.1.10",
                                                           "connected": True, "error": None})}
    head["ssh"] = {"rc": 0, "stdout": "", "stderr": ""}
    head["ssh_target"] = "spark@198.18.1.11"
    return obs


@pytest.fixture
def obs():
    return with_probes({HEAD: node(10), WORKER: node(11)})


def ports_by_netdev(o, netdev):
    return [p for p in o["ibdev"]["ansible_facts"]["ibdev2netdev"]["ports"] if p["netdev"] == netdev][0]


def find(report, check, node=None, status=None):
    return [r for r in report["checks"] if r["check"] == check and (node is None or r["node"] == node)
            and (status is None or r["status"] == status)]


def statuses(report, check, node):
    return sorted(set(r["status"] for r in find(report, check, node)))


# --- whole evaluation ----------------------------------------------------------------------

def test_healthy_pair_is_ok_and_derives_nccl_settings(obs):
    report = c.evaluate(obs, CONFIG)
    assert report["failures"] == [] and report["warnings"] == []
    assert report["status"] == "ok" and report["nodes"] == {HEAD: "ok", WORKER: "ok"}
    env = report["nccl"]["env"]
    for name in (HEAD, WORKER):
        assert env[name] == {"NCCL_SOCKET_IFNAME": L1, "GLOO_SOCKET_IFNAME": L1,
                             "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1", "NCCL_IB_GID_INDEX": "3"}
    assert report["nccl"]["head_address"] == "198.18.1.10"
    assert report["nccl"]["worker_address"] == "198.18.1.11"
    assert report["nccl"]["links"] == [
        {"netdev": L1, "head_address": "198.18.1.10", "worker_address": "198.18.1.11"},
        {"netdev": L2, "head_address": "198.18.2.10", "worker_address": "198.18.2.11"},
    ]
    names = set(r["check"] for r in report["checks"])
    assert names >= {"node.reachable", "node.link_facts", "link.netdev_names", "link.port_up", "link.ipv4",
                     "link.address", "link.subnet", "link.mtu_match", "link.df_ping", "rdma.port_active",
                     "rdma.gid_index", "ssh.head_to_worker", "ssh.worker_docker", "port.master", "gpu.model",
                     "gpu.driver_version", "gpu.driver_match", "gpu.idle", "memory.mem_free",
                     "memory.mem_available", "disk.free", "rdma.gid_index_uniform"}
    assert all(set(r) >= {"check", "node", "status", "level", "expected", "found", "fix", "message"}
               for r in report["checks"])


def test_unreachable_worker_fails_and_skips_pair_checks(obs):
    del obs[WORKER]
    report = c.evaluate(obs, CONFIG)
    (fail,) = find(report, "node.reachable", WORKER)
    assert fail["status"] == "fail" and "--limit" in fail["fix"]
    assert statuses(report, "link.subnet", WORKER) == ["skip"]
    assert report["nodes"][WORKER] == "fail"


def test_module_failure_is_reported(obs):
    obs[WORKER]["ibdev"] = {"failed": True, "msg": "'ip -j addr show' failed (rc=1): boom"}
    report = c.evaluate(obs, CONFIG)
    (fail,) = find(report, "node.link_facts", WORKER)
    assert fail["status"] == "fail" and "boom" in fail["found"]
    assert statuses(report, "link.port_up", WORKER) == ["skip"]


# --- link ----------------------------------------------------------------------------------

def test_worker_link_down_names_check_node_and_fix(obs):
    p = ports_by_netdev(obs[WORKER], L1)
    p.update(state="Down", operstate="DOWN", sysfs_state="DOWN")
    obs[WORKER]["pings"] = [i for i in obs[WORKER]["pings"] if i["item"]["netdev"] != L1]
    obs[HEAD]["pings"] = [i for i in obs[HEAD]["pings"] if i["item"]["netdev"] != L1]
    report = c.evaluate(obs, CONFIG)
    (up,) = find(report, "link.port_up", WORKER, "fail")
    assert up["netdev"] == L1 and "(Down)" in up["found"]
    assert up["message"].startswith("[link.port_up] spark-worker: enp1s0f1np1 is not Up; expected enp1s0f1np1 (Up)")
    assert "cable" in up["fix"]
    assert find(report, "rdma.port_active", WORKER, "fail")
    assert statuses(report, "link.df_ping", WORKER) == ["ok", "skip"]


def test_missing_port_lists_the_up_netdevs(obs):
    ports = obs[WORKER]["ibdev"]["ansible_facts"]["ibdev2netdev"]["ports"]
    obs[WORKER]["ibdev"]["ansible_facts"]["ibdev2netdev"]["ports"] = [p for p in ports if p["netdev"] != L1]
    report = c.evaluate(obs, CONFIG)
    (up,) = find(report, "link.port_up", WORKER, "fail")
    assert "no RDMA port maps to enp1s0f1np1" in up["found"] and L2 in up["found"]
    assert statuses(report, "link.ipv4", WORKER) == ["ok", "skip"]


def test_second_function_down_is_a_warning_and_leaves_nccl_ib_hca(obs):
    ports_by_netdev(obs[WORKER], L2).update(state="Down", sysfs_state="DOWN")
    report = c.evaluate(obs, CONFIG)
    assert report["status"] == "warn" and report["failures"] == []
    (warn,) = find(report, "link.port_up", WORKER, "warn")
    assert "half the bandwidth" in warn["fix"]
    assert report["nccl"]["env"][WORKER]["NCCL_IB_HCA"] == "rocep1s0f1"
    assert report["nccl"]["env"][HEAD]["NCCL_IB_HCA"] == "rocep1s0f1"
    assert [link["netdev"] for link in report["nccl"]["links"]] == [L1]


def test_no_second_netdev_configured(obs):
    config = dict(CONFIG, second_netdev="")
    for o in obs.values():
        o["second_netdev"] = ""
    report = c.evaluate(obs, config)
    assert report["status"] == "ok"
    assert report["nccl"]["env"][HEAD]["NCCL_IB_HCA"] == "rocep1s0f1"
    assert not [r for r in report["checks"] if r.get("netdev") == L2]


def test_netdev_names_differ(obs):
    obs[WORKER]["netdev"] = "enp1s0f0np0"
    (res,) = c.check_netdev_names(CONFIG, obs)
    assert res["status"] == "fail" and res["node"] == WORKER
    assert res["found"] == "enp1s0f0np0,enP2p1s0f1np1" and "spark-head" in res["expected"]
    assert "same name" in res["fix"]


def test_worker_without_ipv4_message_matches_the_issue(obs):
    ports_by_netdev(obs[WORKER], L1)["ipv4"] = []
    obs[WORKER]["networks"][L1] = []
    obs[WORKER]["address"] = ""
    report = c.evaluate(obs, CONFIG)
    (res,) = find(report, "link.ipv4", WORKER, "fail")
    assert res["summary"] == "enp1s0f1np1 has no IPv4 address"
    assert res["fix"] == "give it one on the same /24 as spark-head's 198.18.1.10 (netplan) and rerun"
    assert statuses(report, "link.subnet", WORKER) == ["ok", "skip"]
    assert statuses(report, "rdma.gid_index", WORKER) == ["ok", "skip"]


def test_head_without_ipv4_suggests_the_configured_address(obs):
    ports_by_netdev(obs[HEAD], L1)["ipv4"] = []
    (res,) = [r for r in c.check_link_ports(CONFIG, obs) if r["check"] == "link.ipv4" and r["node"] == HEAD
              and r["netdev"] == L1]
    assert "198.18.1.10/24" in res["fix"]


def test_head_address_moved_off_the_link_netdev(obs):
    ports_by_netdev(obs[HEAD], L1)["ipv4"] = []
    report = c.evaluate(obs, CONFIG)
    (res,) = find(report, "link.address", HEAD, "fail")
    assert res["summary"] == "HEAD_IP 198.18.1.10 is not on enp1s0f1np1"
    assert res["found"] == "enp1s0f1np1 has no IPv4" and "not on the LAN interface" in res["fix"]


def test_configured_address_differs_from_the_netdev(obs):
    obs[HEAD]["address"] = "192.168.1.50"
    (res,) = [r for r in c.check_link_ports(CONFIG, obs) if r["check"] == "link.address" and r["node"] == HEAD]
    assert res["status"] == "fail" and res["found"] == "enp1s0f1np1 has 198.18.1.10/24"


def test_unset_address_is_derived(obs):
    obs[WORKER]["address"] = ""
    report = c.evaluate(obs, CONFIG)
    (res,) = find(report, "link.address", WORKER)
    assert res["status"] == "ok" and "using 198.18.1.11" in res["found"]
    assert report["nccl"]["worker_address"] == "198.18.1.11"


def test_subnet_mismatch(obs):
    ports_by_netdev(obs[WORKER], L1)["ipv4"] = ["198.18.9.11/24"]
    obs[WORKER]["networks"][L1] = ["198.18.9.0/24"]
    (res,) = [r for r in c.check_link_pairs(CONFIG, obs) if r["check"] == "link.subnet" and r["netdev"] == L1]
    assert res["status"] == "fail" and res["node"] == WORKER
    assert "198.18.1.0/24" in res["fix"] and res["found"] == "198.18.9.11/24"


def test_mtu_mismatch_and_required_mtu(obs):
    ports_by_netdev(obs[WORKER], L1)["mtu"] = 1500
    config = dict(CONFIG, mtu=9000)
    res = [r for r in c.check_link_pairs(config, obs) if r["netdev"] == L1]
    (match,) = [r for r in res if r["check"] == "link.mtu_match"]
    assert match["status"] == "fail" and match["expected"] == "MTU 9000 as on spark-head"
    assert match["found"] == "MTU 1500"
    mtu = dict((r["node"], r["status"]) for r in res if r["check"] == "link.mtu")
    assert mtu == {HEAD: "ok", WORKER: "fail"}
    assert not [r for r in c.check_link_pairs(CONFIG, obs) if r["check"] == "link.mtu"]


@pytest.mark.parametrize("registered, expected", [
    ({"rc": 1, "stderr": "ping: Warning: source address might be selected on device other than: enp1s0f1np1\n",
      "stdout": "PING 198.18.1.11 (198.18.1.11) from 198.18.0.10 enp1s0f1np1: 8972(9000) bytes of data.\n\n"
                "--- 198.18.1.11 ping statistics ---\n2 packets transmitted, 0 received, 100% packet loss, time 1001ms\n"},
     "2 packets transmitted, 0 received, 100% packet loss, time 1001ms"),
    ({"rc": 2, "stderr": "ping: local error: message too long, mtu=1500\n", "stdout": ""},
     "ping: local error: message too long, mtu=1500"),
    ({"rc": 2, "msg": "[Errno 2] No such file or directory: b'ping'"}, "[Errno 2] No such file or directory: b'ping'"),
])
def test_ping_error(registered, expected):
    assert c.ping_error(registered) == expected


def test_ping_failure_reports_the_command_output(obs):
    obs[HEAD]["pings"][0].update(rc=1, stdout="2 packets transmitted, 0 received, 100% packet loss, time 1001ms")
    (res,) = [r for r in c.check_pings(CONFIG, obs) if r["node"] == HEAD and r["netdev"] == L1]
    assert res["status"] == "fail" and "100% packet loss" in res["found"]
    assert "ping -M do -s 8972 -I enp1s0f1np1 198.18.1.11" in res["expected"]


# --- plan ----------------------------------------------------------------------------------

def test_probe_plan_for_a_healthy_pair(obs):
    head = c.probe_plan(CONFIG, obs, HEAD)
    assert head["pings"] == [
        {"netdev": L1, "peer": WORKER, "target": "198.18.1.11", "size": 8972, "primary": True},
        {"netdev": L2, "peer": WORKER, "target": "198.18.2.11", "size": 8972, "primary": False},
    ]
    assert head["port_probe"] == {"mode": "listen", "address": "198.18.1.10", "port": 29551}
    assert head["ssh_target"] == "spark@198.18.1.11"
    worker = c.probe_plan(CONFIG, obs, WORKER)
    assert worker["port_probe"] == {"mode": "connect", "address": "198.18.1.10", "port": 29551}
    assert worker["ssh_target"] is None
    assert [p["target"] for p in worker["pings"]] == ["198.18.1.10", "198.18.2.10"]


def test_probe_plan_skips_what_cannot_work(obs):
    ports_by_netdev(obs[WORKER], L1).update(state="Down")
    head = c.probe_plan(CONFIG, obs, HEAD)
    # The head still pings on link 1 (the worker has an address), the worker does not.
    assert [p["netdev"] for p in c.probe_plan(CONFIG, obs, WORKER)["pings"]] == [L2]
    assert head["port_probe"] is None and head["ssh_target"] is None
    assert c.probe_plan(dict(CONFIG, ssh_user=""), with_probes({HEAD: node(10), WORKER: node(11)}),
                        HEAD)["ssh_target"] == "198.18.1.11"


def test_ping_size_follows_own_mtu(obs):
    ports_by_netdev(obs[HEAD], L1)["mtu"] = 1500
    assert c.ping_plan(CONFIG, obs, HEAD)[0]["size"] == 1472


# --- ssh, port -----------------------------------------------------------------------------

def test_ssh_auth_failure(obs):
    obs[HEAD]["ssh"] = {"rc": 255, "stdout": "", "stderr": "spark@198.18.1.11: Permission denied (publickey)."}
    ssh, docker = c.check_ssh(CONFIG, obs)
    assert ssh["status"] == "fail" and ssh["node"] == HEAD and "Permission denied" in ssh["found"]
    assert "ssh-copy-id spark@198.18.1.11" in ssh["fix"]
    assert docker["status"] == "skip"


def test_ssh_host_key_failure_has_its_own_fix(obs):
    obs[HEAD]["ssh"] = {"rc": 255, "stderr": "Host key verification failed."}
    ssh = c.check_ssh(CONFIG, obs)[0]
    assert "accept the host key" in ssh["fix"]


def test_docker_over_ssh_failure(obs):
    obs[HEAD]["ssh"] = {"rc": 1, "stderr": "permission denied while trying to connect to the Docker daemon socket"}
    ssh, docker = c.check_ssh(CONFIG, obs)
    assert ssh["status"] == "ok"
    assert docker["status"] == "fail" and docker["node"] == WORKER and "docker group" in docker["fix"]


def test_ssh_not_run(obs):
    obs[HEAD]["ssh"] = {"skipped": True}
    assert [r["status"] for r in c.check_ssh(CONFIG, obs)] == ["skip", "skip"]


def test_master_port_blocked(obs):
    obs[WORKER]["port_probe"]["stdout"] = json.dumps(
        {"mode": "connect", "address": "198.18.1.10", "connected": False, "error": "ETIMEDOUT"})
    (res,) = c.check_master_port(CONFIG, obs)
    assert res["status"] == "fail" and res["node"] == WORKER and res["found"] == "ETIMEDOUT"
    assert "29551" in res["fix"] and "198.18.1.10:29551" in res["expected"]


def test_master_port_in_use_but_reachable(obs):
    obs[HEAD]["port_probe"]["stdout"] = json.dumps({"mode": "listen", "bound": False, "error": "bind: EADDRINUSE"})
    (res,) = c.check_master_port(CONFIG, obs)
    assert res["status"] == "ok" and "already in use" in res["found"]


def test_master_port_head_cannot_listen(obs):
    obs[HEAD]["port_probe"]["stdout"] = json.dumps(
        {"mode": "listen", "bound": False, "error": "bind 198.18.1.10:29551: EADDRNOTAVAIL"})
    obs[WORKER]["port_probe"]["stdout"] = json.dumps({"mode": "connect", "connected": False, "error": "ECONNREFUSED"})
    (res,) = c.check_master_port(CONFIG, obs)
    assert res["status"] == "fail" and "could not listen" in res["found"]


def test_master_port_skipped_without_probe(obs):
    obs[HEAD]["port_probe"] = {"skipped": True}
    assert c.check_master_port(CONFIG, obs)[0]["status"] == "skip"


# --- GPU, memory, disk ---------------------------------------------------------------------

def test_foreign_cuda_process_fails(obs):
    obs[WORKER]["apps"]["stdout"] = "4242, python3\n"
    report = c.evaluate(obs, CONFIG)
    (res,) = find(report, "gpu.idle", WORKER, "fail")
    assert res["found"] == "pid 4242 (python3)" and "stop it first" in res["fix"]
    allowed = c.check_gpus(dict(CONFIG, gpu_process_allow=["^python"]), obs)
    assert [r["status"] for r in allowed if r["check"] == "gpu.idle" and r["node"] == WORKER] == ["ok"]


def test_driver_mismatch_and_590_are_warnings(obs):
    obs[WORKER]["gpu"]["stdout"] = "NVIDIA GB10, 590.44.01\n"
    report = c.evaluate(obs, CONFIG)
    assert report["status"] == "warn" and report["failures"] == []
    (match,) = find(report, "gpu.driver_match", WORKER)
    assert match["status"] == "warn" and match["found"] == "590.44.01" and "580.95.05" in match["expected"]
    assert find(report, "gpu.driver_version", WORKER, "warn")
    assert find(report, "gpu.driver_version", HEAD, "ok")


def test_wrong_gpu_or_no_nvidia_smi(obs):
    obs[HEAD]["gpu"] = {"rc": 0, "stdout": "NVIDIA H100 80GB HBM3, 580.95.05"}
    obs[WORKER]["gpu"] = {"rc": 2, "msg": "[Errno 2] No such file or directory: b'nvidia-smi'"}
    res = dict((r["node"], r) for r in c.check_gpus(CONFIG, obs) if r["check"] == "gpu.model")
    assert res[HEAD]["status"] == "fail" and res[HEAD]["found"] == "NVIDIA H100 80GB HBM3"
    assert res[WORKER]["status"] == "fail" and "No such file" in res[WORKER]["found"]


def test_compute_apps_unreadable_fails(obs):
    obs[HEAD]["apps"] = {"rc": 6, "stderr": "Failed to initialize NVML"}
    (res,) = [r for r in c.check_gpus(CONFIG, obs) if r["check"] == "gpu.idle" and r["node"] == HEAD]
    assert res["status"] == "fail" and "NVML" in res["found"]


def test_memory_gate_warns(obs):
    config = dict(CONFIG, mem_free_gib=112, mem_available_gib=None)
    res = c.check_memory(config, obs)
    assert [(r["check"], r["status"]) for r in res] == [("memory.mem_free", "warn"), ("memory.mem_free", "warn")]
    assert res[0]["found"] == "110.0 GiB" and res[0]["expected"] == ">= 112 GiB MemFree"
    obs[HEAD]["meminfo"] = ""
    assert c.check_memory(CONFIG, obs)[0]["found"] == "unreadable"


def test_disk_groups_add_up_on_one_filesystem(obs):
    entries = json.loads(obs[HEAD]["disk"]["stdout"])
    entries.append({"name": "session", "path": "/nvme/session", "need": 64 * GIB, "dev": 2, "mount": "/nvme",
                    "free": 10 * GIB})
    groups = c.disk_groups(entries)
    assert [(g["mount"], g["need"], g["names"]) for g in groups] == [
        ("/", 249 * 10 ** 9, ["checkpoint", "prepared"]), ("/nvme", 64 * GIB, ["session"])]
    obs[HEAD]["disk"]["stdout"] = json.dumps(entries)
    res = [r for r in c.check_disk(CONFIG, obs) if r["node"] == HEAD]
    assert [r["status"] for r in res] == ["ok", "fail"]
    assert res[1]["found"] == "10.7 GB free" and "/nvme/session" in res[1]["fix"]


def test_disk_counts_what_is_already_there(obs):
    entries = [
        {"name": "checkpoint", "path": "~/.cache/huggingface", "need": 165 * 10 ** 9, "present": 170 * 10 ** 9,
         "dev": 1, "mount": "/", "free": 90 * 10 ** 9},
        {"name": "prepared", "path": "~/.cache/glm53/prepared", "need": 84 * 10 ** 9, "present": 4 * 10 ** 9,
         "dev": 1, "mount": "/", "free": 90 * 10 ** 9},
    ]
    (group,) = c.disk_groups(entries)
    assert group["need"] == 80 * 10 ** 9 and group["present"] == 169 * 10 ** 9
    obs[HEAD]["disk"]["stdout"] = json.dumps(entries)
    (res,) = [r for r in c.check_disk(CONFIG, obs) if r["node"] == HEAD]
    assert res["status"] == "ok" and res["found"] == "90.0 GB free (169.0 GB already there counted)"


def test_disk_probe_errors(obs):
    obs[WORKER]["disk"] = {"rc": 1, "stdout": "", "stderr": "python3: not found"}
    obs[HEAD]["disk"]["stdout"] = json.dumps([{"name": "checkpoint", "path": "/x", "need": 1,
                                               "error": "/x: Permission denied"}])
    res = dict((r["node"], r) for r in c.check_disk(CONFIG, obs))
    assert res[WORKER]["status"] == "fail" and "python3: not found" in res[WORKER]["found"]
    assert res[HEAD]["status"] == "fail" and "Permission denied" in res[HEAD]["found"]


# --- GID -----------------------------------------------------------------------------------

def test_gid_missing(obs):
    p = ports_by_netdev(obs[WORKER], L1)
    p.update(gid_index=None, roce_v2_ipv4_gids=[{"ipv4": "198.18.7.7", "index": 3}])
    (res,) = [r for r in c.check_link_ports(CONFIG, obs) if r["check"] == "rdma.gid_index" and r["node"] == WORKER
              and r["netdev"] == L1]
    assert res["status"] == "fail" and "198.18.7.7@3" in res["found"]


def test_gid_indexes_that_differ_warn(obs):
    ports_by_netdev(obs[HEAD], L2)["gid_index"] = 5
    report = c.evaluate(obs, CONFIG)
    (res,) = find(report, "rdma.gid_index_uniform", HEAD)
    assert res["status"] == "warn" and res["found"] == "roceP2p1s0f1=5,rocep1s0f1=3"
    assert report["nccl"]["gid_index"][HEAD] == {"rocep1s0f1": 3, "roceP2p1s0f1": 5}
    assert report["nccl"]["env"][HEAD]["NCCL_IB_GID_INDEX"] == "3"


# --- small helpers -------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("NVIDIA GB10, 580.95.05\n", [{"name": "NVIDIA GB10", "driver": "580.95.05"}]),
    ("NVIDIA GB10, 580.95.05\nNVIDIA GB10, 580.95.05", [{"name": "NVIDIA GB10", "driver": "580.95.05"}] * 2),
    ("", []),
    ("weird", [{"name": "weird", "driver": ""}]),
])
def test_parse_gpus(text, expected):
    assert c.parse_gpus(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("", []),
    ("No running processes found", []),
    ("4242, python3\n17, [Not Found]\n", [{"pid": 4242, "name": "python3"}, {"pid": 17, "name": "[Not Found]"}]),
])
def test_parse_compute_apps(text, expected):
    assert c.parse_compute_apps(text) == expected


def test_command_error_and_json_stdout():
    assert c.command_error(None) == "not run"
    assert c.command_error({"rc": 1, "stderr": "a\nlast line\n"}) == "last line"
    assert c.command_error({"rc": 3}) == "rc=3"
    assert c.parse_json_stdout({"stdout": "{\"a\": 1}"}) == {"a": 1}
    assert c.parse_json_stdout({"stdout": "garbage"}) is None
    assert c.parse_json_stdout({"skipped": True}) is None


def test_message_format():
    res = c.result("x.y", "n1", "fail", "fail", "A", "B", "do C", "thing broke")
    assert res["message"] == "[x.y] n1: thing broke; expected A, found B; fix: do C"
    ok = c.result("x.y", "n1", "ok", "fail", "A", "A", "do C", "fine")
    assert ok["fix"] == "" and ok["message"] == "[x.y] n1: fine; expected A, found A"


def test_table_has_a_row_per_check_and_a_column_per_node(obs):
    obs[WORKER]["apps"]["stdout"] = "1, x"
    report = c.evaluate(obs, CONFIG)
    lines = c.report_table(report)
    assert lines[0].split() == ["check", HEAD, WORKER]
    rows = dict((line.split()[0], line.split()[1:]) for line in lines[1:])
    assert rows["gpu.idle"] == ["ok", "fail"]
    assert rows["ssh.head_to_worker"] == ["ok", "-"]
    assert rows["overall"] == ["ok", "fail"]
    assert len(set(len(line) for line in lines[:1])) == 1


def test_inputs_are_not_mutated(obs):
    before = copy.deepcopy(obs)
    c.evaluate(obs, CONFIG)
    assert obs == before


# --- the probe scripts the role runs on the nodes (real processes, local sockets/files) ------

ROLE_FILES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "cx7_link", "files")


def run_probe(script, *args):
    proc = subprocess.run([sys.executable, os.path.join(ROLE_FILES, script)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_disk_probe_measures_nearest_existing_dir_and_present_files(tmp_path):
    blobs = tmp_path / "hf" / "hub" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / "a").write_bytes(b"x" * 65536)
    (tmp_path / "hf" / "hub" / "link").symlink_to(blobs / "a")
    spec = {"needs": {"checkpoint": 10, "session": 5},
            "dirs": {"checkpoint": str(tmp_path / "hf"), "session": str(tmp_path / "not" / "yet")}}
    checkpoint, session = run_probe("disk_probe.py", json.dumps(spec))
    assert checkpoint["checked"] == str(tmp_path / "hf") and checkpoint["free"] > 0
    assert 65536 <= checkpoint["present"] < 2 * 65536  # the symlink is not counted again
    assert session["checked"] == str(tmp_path) and session["present"] == 0
    assert session["dev"] == checkpoint["dev"] and session["mount"] == checkpoint["mount"]


def test_port_probe_listen_connect_and_refused():
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    listener = subprocess.Popen([sys.executable, os.path.join(ROLE_FILES, "port_probe.py"), "listen", "127.0.0.1",
                                 str(port), "5"], stdout=subprocess.PIPE, text=True)
    connect = run_probe("port_probe.py", "connect", "127.0.0.1", port, 5)
    listened = json.loads(listener.communicate(timeout=10)[0])
    assert connect["connected"] is True and connect["error"] is None
    assert listened["bound"] is True and listened["accepted"] is True
    # The listener has exited: nothing answers any more.
    refused = run_probe("port_probe.py", "connect", "127.0.0.1", port, 0.3)
    assert refused["connected"] is False and refused["error"] == "ECONNREFUSED"


def test_port_probe_reports_a_port_in_use():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        result = run_probe("port_probe.py", "listen", "127.0.0.1", busy.getsockname()[1], 1)
    assert result["bound"] is False and "EADDRINUSE" in result["error"]
