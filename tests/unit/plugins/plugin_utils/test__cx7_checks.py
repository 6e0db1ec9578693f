"""The cx7_link controller-side checks, on registered results shaped as the role records them.

Ported scenario by scenario from the tests of the former module_utils/_cx7_checks.py: the
facts come per node from spark_node_facts (``link.ports`` is the vendor boundary), the
probes from link_probe (``pings``, ``connect``, ``ssh``) and the head's listener result.
"""

import copy
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cx7_fixtures as fx  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.dgx_spark.glm53.plugins.module_utils._cluster_contract import (  # noqa: E402
    ENV_NAME,
    JSON_NAME,
    file_digests,
    render_env,
    render_json,
    validate,
    wanted_digests,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._files import write_atomic  # noqa: E402
from ansible_collections.dgx_spark.glm53.plugins.module_utils._node_facts import disk_entry  # noqa: E402
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _cx7_preflight  # noqa: E402
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_nodes import disk_groups  # noqa: E402
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_parsers import (  # noqa: E402
    command_error,
    parse_compute_apps,
    parse_gpus,
)
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._preflight_render import (  # noqa: E402
    gate_lines,
    report_lines,
    report_table,
)
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._preflight_result import result  # noqa: E402

HEAD, WORKER, L1, L2, F0, F0B = fx.HEAD, fx.WORKER, fx.L1, fx.L2, fx.F0, fx.F0B
find, statuses = fx.find, fx.statuses
UNEXPLAINED, evaluate = fx.UNEXPLAINED, fx.evaluate


def reprobe(cfg, results, ok=True):
    """Plan and probe again after the facts changed, then judge (every probe answers ``ok``)."""
    _plan, probes, listen = fx.probe(cfg, results, ok=ok)
    return evaluate(cfg, results, probes, listen)


def ping_of(probes, node, netdev):
    return [p for p in fx.probe_of(probes, node)["pings"] if p["netdev"] == netdev][0]


def fail_ping(item, error="2 packets transmitted, 0 received, 100% packet loss, time 1001ms"):
    item.update(rc=1, ok=False, error=error)


@pytest.fixture
def cluster():
    """(config, facts_results, probe_results, listen) of a healthy head + worker."""
    return fx.healthy()


# --- whole evaluation ----------------------------------------------------------------------

def test_healthy_pair_is_ok_and_derives_nccl_settings_and_contract(cluster):
    cfg, results, probes, listen = cluster
    report = evaluate(cfg, results, probes, listen)
    assert report["failures"] == [] and report["warnings"] == []
    assert report["status"] == "ok" and report["nodes"] == {HEAD: "ok", WORKER: "ok"}
    assert not [c for c in report["checks"] if c["status"] == "skip"]
    for name in (HEAD, WORKER):
        assert report["nccl"][name] == {"NCCL_SOCKET_IFNAME": L1, "GLOO_SOCKET_IFNAME": L1,
                                        "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1", "NCCL_IB_GID_INDEX": "3"}
    contract = report["contract"]
    assert contract["head"] == HEAD and contract["workers"] == [WORKER] and contract["path"] == "tensorfold"
    assert contract["master_address"] == "198.18.1.10" and contract["master_port"] == 29551
    assert contract["ssh_user"] == "spark"
    assert contract["links"] == [
        {"netdev": L1, "primary": True, "addresses": {HEAD: "198.18.1.10", WORKER: "198.18.1.11"}},
        {"netdev": L2, "primary": False, "addresses": {HEAD: "198.18.2.10", WORKER: "198.18.2.11"}},
    ]
    assert contract["nodes"][HEAD]["rank"] == 0 and contract["nodes"][HEAD]["role"] == "head"
    assert contract["nodes"][WORKER]["rank"] == 1 and contract["nodes"][WORKER]["role"] == "worker"
    assert contract["nodes"][WORKER]["link_address"] == "198.18.1.11"
    assert contract["nodes"][WORKER]["hcas"] == ["rocep1s0f1", "roceP2p1s0f1"]
    assert contract["nodes"][WORKER]["env"]["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    # What cluster_contract checks before it writes the files.
    assert validate(contract) == []
    names = set(c["check"] for c in report["checks"])
    assert names >= {"node.reachable", "node.link_facts", "node.kernel", "link.netdev_names", "link.port_up",
                     "link.ipv4", "link.address", "link.subnet", "link.mtu_match", "link.df_ping",
                     "rdma.port_active", "rdma.gid_index", "ssh.head_to_worker", "ssh.worker_docker", "port.master",
                     "gpu.model", "gpu.driver_version", "gpu.driver_match", "gpu.idle", "memory.mem_free",
                     "memory.mem_available", "disk.free", "rdma.gid_index_uniform"}
    assert all(set(c) >= {"check", "node", "status", "level", "expected", "found", "fix", "message"}
               for c in report["checks"])


def _persisted(tmp_path, contract, node):
    """The files cluster_contract state=present writes for ``node``, and the digests the gather
    reads back from them (the module's own code on both sides)."""
    directory = tmp_path / node
    write_atomic(str(directory / JSON_NAME), render_json(contract))
    write_atomic(str(directory / ENV_NAME), render_env(contract, node))
    return directory, file_digests(str(directory))


def test_persist_names_only_the_nodes_whose_contract_files_differ(cluster, tmp_path):
    cfg, results, probes, listen = cluster
    # Nothing persisted yet (no digests gathered): every node is written.
    contract = evaluate(cfg, results, probes, listen)["contract"]
    assert evaluate(cfg, results, probes, listen)["persist"] == [HEAD, WORKER]
    for entry in results:
        entry["contract_files"] = _persisted(tmp_path, contract, entry["item"])[1]
    assert evaluate(cfg, results, probes, listen)["persist"] == []
    # A hand edit of the worker's cluster.env: that node alone is written again.
    worker_dir = tmp_path / WORKER
    (worker_dir / ENV_NAME).write_text((worker_dir / ENV_NAME).read_text() + "GLM53_EXTRA=1\n")
    fx.by_node(results, WORKER)["contract_files"] = file_digests(str(worker_dir))
    assert evaluate(cfg, results, probes, listen)["persist"] == [WORKER]
    # Another cluster's contract on the head (a changed master port): the head differs too.
    cfg = dict(cfg, master_port=29552)
    _plan, probes, listen = fx.probe(cfg, results)
    assert evaluate(cfg, results, probes, listen)["persist"] == [HEAD, WORKER]


def test_persist_sends_an_unusable_contract_to_every_node_for_the_module_to_refuse(cluster):
    cfg, results, probes, listen = cluster
    report = evaluate(cfg, results, probes, listen)
    contract = copy.deepcopy(report["contract"])
    contract["ssh_user"] = "not a login"
    assert validate(contract)
    observed = {node: {"contract_files": wanted_digests(contract, node)} for node in (HEAD, WORKER)}
    assert _cx7_preflight.persist_nodes(contract, observed) == [HEAD, WORKER]
    assert _cx7_preflight.persist_nodes(report["contract"], {
        node: {"contract_files": wanted_digests(report["contract"], node)} for node in (HEAD, WORKER)}) == []


def test_unreachable_worker_fails_once_and_skips_what_needs_it(cluster):
    cfg, results, probes, listen = cluster
    results[1] = {"item": WORKER, "changed": False, "unreachable": True,
                  "msg": "Failed to connect to the host via ssh: ssh: connect to host spark-worker port 22: "
                         "No route to host"}
    _plan, probes, listen = fx.probe(cfg, results)
    probes = [p if p["item"] != WORKER else fx.skipped_probe(WORKER) for p in probes]
    report = evaluate(cfg, results, probes, listen)
    (fail,) = find(report, "node.reachable", WORKER)
    assert fail["status"] == "fail" and fail["found"] == "unreachable: " + results[1]["msg"]
    assert "make spark-worker reachable over ssh" in fail["fix"] and "ansible -m ping spark-worker" in fail["fix"]
    assert report["nodes"] == {HEAD: "ok", WORKER: "fail"}
    # What could not run because the worker is gone is a skip explained by node.reachable,
    # not a second, misleading "unexpected state" failure.
    assert statuses(report, "link.subnet", WORKER) == ["skip"]
    assert statuses(report, "link.port_up", WORKER) == ["skip"]
    assert statuses(report, "link.netdev_names", WORKER) == ["skip"]
    assert statuses(report, "ssh.head_to_worker", HEAD) == ["skip"]
    assert [c["message"] for c in report["failures"] if c["summary"] == UNEXPLAINED] == []
    assert [(c["check"], c["node"]) for c in report["failures"]] == [("node.reachable", WORKER)]


def test_gathering_that_failed_on_a_node_is_reported(cluster):
    cfg, results, _probes, _listen = cluster
    results[1] = {"item": WORKER, "changed": False, "failed": True,
                  "msg": "spark_node_facts: timeout must be 1 to 600 seconds, found 0"}
    report = reprobe(cfg, results)
    (fail,) = find(report, "node.reachable", WORKER)
    assert fail["status"] == "fail" and fail["found"] == results[1]["msg"]


def test_port_map_error_is_reported(cluster):
    cfg, results, _probes, _listen = cluster
    link = fx.by_node(results, WORKER)["link"]
    link.update(ports=None, error="`ip -j addr show` failed (rc=1): boom", source=None)
    report = reprobe(cfg, results)
    (fail,) = find(report, "node.link_facts", WORKER)
    assert fail["status"] == "fail" and "boom" in fail["found"] and "rdma-core" in fail["fix"]
    assert statuses(report, "link.port_up", WORKER) == ["skip"]
    assert [(c["check"], c["node"]) for c in report["failures"]] == [("node.link_facts", WORKER)]


# --- link ----------------------------------------------------------------------------------

def test_worker_link_down_names_check_node_and_fix(cluster):
    cfg, results, _probes, _listen = cluster
    fx.port_of(results, WORKER, L1).update(state="Down", operstate="DOWN", sysfs_state="DOWN", carrier=0)
    _plan, probes, listen = fx.probe(cfg, results)
    fail_ping(ping_of(probes, HEAD, L1))  # the head still pings the worker's address, which no longer answers
    report = evaluate(cfg, results, probes, listen)
    (up,) = find(report, "link.port_up", WORKER, "fail")
    assert up["netdev"] == L1 and "(Down)" in up["found"] and "carrier 0" in up["found"]
    assert up["message"].startswith("[link.port_up] spark-worker: enp1s0f1np1 is not Up; expected enp1s0f1np1 (Up)")
    assert "cable" in up["fix"] and "ip link set enp1s0f1np1 up" in up["fix"]
    assert find(report, "rdma.port_active", WORKER, "fail")
    assert statuses(report, "link.df_ping", WORKER) == ["ok", "skip"]
    assert statuses(report, "port.master", WORKER) == ["skip"]
    assert statuses(report, "ssh.head_to_worker", HEAD) == ["skip"]
    assert report["status"] == "fail"


@pytest.mark.parametrize("down", [HEAD, WORKER])
def test_a_link_down_is_reported_on_the_netdev_that_carries_the_configured_address(cluster, down):
    # glm53_link_address says which netdev is the link: when that port is Down the report
    # says so, instead of moving the link to the other Up function and then blaming the
    # addresses (link.address) or the netdev names (link.netdev_names) for it.
    cfg, results, _probes, _listen = cluster
    fx.port_of(results, down, L1).update(state="Down", operstate="DOWN", sysfs_state="DOWN", carrier=0)
    _plan, probes, listen = fx.probe(cfg, results)
    for item in fx.probe_of(probes, HEAD)["pings"]:
        if item["netdev"] == L1:
            fail_ping(item)
    report = evaluate(cfg, results, probes, listen)
    (up,) = find(report, "link.port_up", down, netdev=L1)
    assert up["status"] == "fail" and up["level"] == "fail" and "half the bandwidth" not in up["fix"]
    assert [c["check"] for c in report["failures"] if c["node"] == down] == ["link.port_up", "rdma.port_active"]
    assert statuses(report, "link.address", HEAD) == ["ok"] and statuses(report, "link.address", WORKER) == ["ok"]
    # Both nodes report facts and name their link netdevs alike: the names are fine, whichever port is down.
    assert statuses(report, "link.netdev_names", WORKER) == ["ok"]
    assert report["contract"]["links"][0]["netdev"] == L1 and report["contract"]["master_address"] == "198.18.1.10"


def test_missing_port_lists_the_up_netdevs(cluster):
    cfg, results, _probes, _listen = cluster
    link = fx.by_node(results, WORKER)["link"]
    link["ports"] = [p for p in link["ports"] if p["netdev"] != L1]
    report = reprobe(cfg, results)
    (up,) = find(report, "link.port_up", WORKER, "fail")
    assert "no RDMA port maps to enp1s0f1np1" in up["found"] and L2 in up["found"]
    assert statuses(report, "link.ipv4", WORKER) == ["ok", "skip"]


def test_second_function_down_is_a_warning_and_leaves_nccl_ib_hca(cluster):
    cfg, results, _probes, _listen = cluster
    fx.port_of(results, WORKER, L2).update(state="Down", operstate="DOWN", sysfs_state="DOWN", carrier=0)
    _plan, probes, listen = fx.probe(cfg, results)
    fail_ping(ping_of(probes, HEAD, L2))
    report = evaluate(cfg, results, probes, listen)
    assert report["status"] == "warn" and report["failures"] == []
    (warn,) = find(report, "link.port_up", WORKER, "warn")
    assert warn["netdev"] == L2 and "half the bandwidth" in warn["fix"]
    assert report["nccl"][WORKER]["NCCL_IB_HCA"] == "rocep1s0f1"
    assert report["nccl"][HEAD]["NCCL_IB_HCA"] == "rocep1s0f1"
    assert [link["netdev"] for link in report["contract"]["links"]] == [L1]


def test_no_second_netdev_configured(cluster):
    cfg, results, _probes, _listen = cluster
    for node_cfg in cfg["nodes"].values():
        node_cfg["second_netdev"] = ""
    report = reprobe(cfg, results)
    assert report["status"] == "ok"
    assert report["nccl"][HEAD]["NCCL_IB_HCA"] == "rocep1s0f1"
    assert not [c for c in report["checks"] if c.get("netdev") == L2]


def test_netdev_names_differ(cluster):
    cfg, results, _probes, _listen = cluster
    cfg["nodes"][WORKER]["netdev"] = F0
    report = reprobe(cfg, results)
    (res,) = find(report, "link.netdev_names", WORKER)
    assert res["status"] == "fail" and res["node"] == WORKER
    assert res["found"] == "enp1s0f0np0,enP2p1s0f0np0"
    assert res["expected"] == "link netdevs enp1s0f1np1,enP2p1s0f1np1 as on spark-head"
    assert "same name" in res["fix"] and "Up netdevs here: enP2p1s0f1np1,enp1s0f1np1" in res["fix"]


def test_worker_without_ipv4_message_matches_the_issue(cluster):
    cfg, results, _probes, _listen = cluster
    fx.readdress(fx.port_of(results, WORKER, L1), [])
    cfg["nodes"][WORKER]["address"] = ""
    report = reprobe(cfg, results)
    (res,) = find(report, "link.ipv4", WORKER, "fail")
    assert res["summary"] == "enp1s0f1np1 has no IPv4 address"
    assert res["fix"] == "give it one on the same /24 as spark-head's 198.18.1.10 (netplan) and rerun"
    assert statuses(report, "link.subnet", WORKER) == ["ok", "skip"]
    assert statuses(report, "rdma.gid_index", WORKER) == ["ok", "skip"]


def test_head_without_ipv4_suggests_the_configured_address(cluster):
    cfg, results, _probes, _listen = cluster
    fx.readdress(fx.port_of(results, HEAD, L1), [])
    report = reprobe(cfg, results)
    (res,) = find(report, "link.ipv4", HEAD, netdev=L1)
    assert res["status"] == "fail"
    assert "198.18.1.10" in res["fix"] and "glm53_link_address" in res["fix"]


def test_head_address_moved_off_the_link_netdev(cluster):
    cfg, results, _probes, _listen = cluster
    fx.readdress(fx.port_of(results, HEAD, L1), [])
    report = reprobe(cfg, results)
    (res,) = find(report, "link.address", HEAD, "fail")
    assert res["summary"] == "HEAD_IP 198.18.1.10 is not on enp1s0f1np1"
    assert res["found"] == "enp1s0f1np1 has no IPv4" and "not on the LAN interface" in res["fix"]


def test_configured_address_differs_from_the_netdev(cluster):
    cfg, results, _probes, _listen = cluster
    cfg["nodes"][HEAD]["address"] = "192.168.1.50"
    report = reprobe(cfg, results)
    (res,) = find(report, "link.address", HEAD)
    assert res["status"] == "fail" and res["found"] == "enp1s0f1np1 has 198.18.1.10/24"
    assert res["expected"] == "192.168.1.50 (glm53_link_address) on enp1s0f1np1"


def test_unset_address_is_derived(cluster):
    cfg, results, _probes, _listen = cluster
    cfg["nodes"][WORKER]["address"] = ""
    report = reprobe(cfg, results)
    (res,) = find(report, "link.address", WORKER)
    assert res["status"] == "ok" and "using 198.18.1.11" in res["found"]
    assert report["contract"]["nodes"][WORKER]["link_address"] == "198.18.1.11"
    assert report["status"] == "ok"


def test_subnet_mismatch(cluster):
    cfg, results, _probes, _listen = cluster
    fx.readdress(fx.port_of(results, WORKER, L1), ["198.18.9.11/24"])
    cfg["nodes"][WORKER]["address"] = "198.18.9.11"
    _plan, probes, listen = fx.probe(cfg, results)
    for node in (HEAD, WORKER):
        fail_ping(ping_of(probes, node, L1), error="connect: Network is unreachable")
    report = evaluate(cfg, results, probes, listen)
    (res,) = find(report, "link.subnet", netdev=L1)
    assert res["status"] == "fail" and res["node"] == WORKER
    assert res["summary"] == "enp1s0f1np1 has no subnet in common with spark-head"
    assert "198.18.1.0/24" in res["fix"] and res["found"] == "198.18.9.11/24"


def test_mtu_mismatch_and_required_mtu(cluster):
    cfg, results, _probes, _listen = cluster
    fx.port_of(results, WORKER, L1)["mtu"] = 1500
    report = reprobe(dict(cfg, mtu=9000), results)
    (match,) = find(report, "link.mtu_match", netdev=L1)
    assert match["status"] == "fail" and match["node"] == WORKER
    assert match["expected"] == "MTU 9000 as on spark-head" and match["found"] == "MTU 1500"
    mtu = dict((c["node"], c["status"]) for c in find(report, "link.mtu", netdev=L1))
    assert mtu == {HEAD: "ok", WORKER: "fail"}
    (fix,) = find(report, "link.mtu", WORKER, netdev=L1)
    assert fix["fix"] == "set `mtu: 9000` for enp1s0f1np1 in netplan on spark-worker (or change cx7_link_mtu)"
    assert not find(reprobe(cfg, results), "link.mtu")


@pytest.mark.parametrize("item, found", [
    ({"rc": 1, "ok": False, "error": "2 packets transmitted, 0 received, 100% packet loss, time 1001ms"},
     "2 packets transmitted, 0 received, 100% packet loss, time 1001ms"),
    ({"rc": 1, "ok": False, "error": "ping: local error: message too long, mtu=1500"},
     "ping: local error: message too long, mtu=1500"),
    ({"rc": 2, "ok": False, "error": None}, "rc=2"),
    ({"rc": None, "ok": False, "error": None, "timed_out": True, "timeout": 7},
     "`ping -M do -s 8972 -I enp1s0f1np1 198.18.1.11` did not answer within 7 s (wedged)"),
])
def test_ping_failure_reports_what_the_probe_saw(cluster, item, found):
    cfg, results, probes, listen = cluster
    ping_of(probes, HEAD, L1).update(item)
    report = evaluate(cfg, results, probes, listen)
    (res,) = find(report, "link.df_ping", HEAD, netdev=L1)
    assert res["status"] == "fail" and res["found"] == found
    assert res["expected"] == "replies to `ping -M do -s 8972 -I enp1s0f1np1 198.18.1.11`"
    assert "9000-byte frames" in res["fix"] and "ping -I enp1s0f1np1 198.18.1.11" in res["fix"]


# --- plan ----------------------------------------------------------------------------------

def test_probe_plan_for_a_healthy_pair(cluster):
    cfg, results, _probes, _listen = cluster
    plan = _cx7_preflight.probe_plan(cfg, results)
    head, worker = plan["nodes"][HEAD], plan["nodes"][WORKER]
    assert head["pings"] == [
        {"netdev": L1, "peer": WORKER, "target": "198.18.1.11", "size": 8972},
        {"netdev": L2, "peer": WORKER, "target": "198.18.2.11", "size": 8972},
    ]
    assert head["connect"] is None
    assert head["ssh"] == [{"worker": WORKER, "target": "spark@198.18.1.11",
                            "command": "echo glm53-ssh-ok; docker ps -q", "timeout": 20}]
    listen = dict(plan["listen"])
    # Long enough for the worker to be probed after the listener started.
    assert listen.pop("timeout") > cfg["port_probe_timeout"]
    assert listen == {"address": "198.18.1.10", "port": 29551, "expect": 1}
    assert worker["connect"] == {"address": "198.18.1.10", "port": 29551, "timeout": 5}
    assert worker["ssh"] == []
    assert [(p["peer"], p["target"]) for p in worker["pings"]] == [(HEAD, "198.18.1.10"), (HEAD, "198.18.2.10")]


def test_probe_plan_together_listens_within_the_heads_probe(cluster):
    # Every node probes in the same task at once: no listener of its own, the head listens in
    # its probe, and the worker retries its connect while the head's module starts.
    cfg, results, _probes, _listen = cluster
    apart, together = _cx7_preflight.probe_plan(cfg, results), _cx7_preflight.probe_plan(cfg, results, together=True)
    assert together["listen"] is None and apart["nodes"][HEAD]["listen"] is None
    listen = dict(together["nodes"][HEAD]["listen"])
    assert listen.pop("timeout") < apart["listen"]["timeout"]
    assert listen == {"address": "198.18.1.10", "port": 29551, "expect": 1}
    connect = together["nodes"][WORKER]["connect"]
    assert connect["timeout"] == cfg["port_probe_timeout"] + _cx7_preflight.PROBE_START_SECONDS
    # The listener outlasts the worker's connect, and the head's own ssh probe.
    assert together["nodes"][HEAD]["listen"]["timeout"] > connect["timeout"] + 20
    assert together["nodes"][WORKER]["listen"] is None


@pytest.mark.parametrize("accepted, status", [(["198.18.1.11"], "ok"), ([], "fail")])
def test_the_heads_own_probe_carries_the_listener_when_together(cluster, accepted, status):
    cfg, results, _probes, _listen = cluster
    plan = _cx7_preflight.probe_plan(cfg, results, together=True)
    probes = fx.probes_for(plan)
    fx.probe_of(probes, HEAD)["listen"] = dict(plan["nodes"][HEAD]["listen"], bound=True, accepted=accepted,
                                               error=None if accepted else "1 of 1 connection(s) did not come")
    if not accepted:
        fx.probe_of(probes, WORKER)["connect"].update(connected=False, error="ETIMEDOUT")
    (res,) = find(evaluate(cfg, results, probes, None), "port.master", WORKER)
    assert res["status"] == status, res


def test_probe_plan_skips_what_cannot_work(cluster):
    cfg, results, _probes, _listen = cluster
    fx.port_of(results, WORKER, L1).update(state="Down")
    plan = _cx7_preflight.probe_plan(cfg, results)
    # The head still pings on link 1 (the worker keeps its address there), the worker does not.
    assert [p["netdev"] for p in plan["nodes"][HEAD]["pings"]] == [L1, L2]
    assert [p["netdev"] for p in plan["nodes"][WORKER]["pings"]] == [L2]
    assert plan["listen"] is None and plan["nodes"][HEAD]["ssh"] == []
    assert plan["nodes"][WORKER]["connect"] is None
    healthy_cfg, healthy_results, _p, _l = fx.healthy()
    plan = _cx7_preflight.probe_plan(dict(healthy_cfg, ssh_user=""), healthy_results)
    assert [s["target"] for s in plan["nodes"][HEAD]["ssh"]] == ["198.18.1.11"]


def test_ping_size_follows_own_mtu(cluster):
    cfg, results, _probes, _listen = cluster
    fx.port_of(results, HEAD, L1)["mtu"] = 1500
    plan = _cx7_preflight.probe_plan(cfg, results)
    assert [(p["netdev"], p["size"]) for p in plan["nodes"][HEAD]["pings"]] == [(L1, 1472), (L2, 8972)]
    assert [p["size"] for p in plan["nodes"][WORKER]["pings"]] == [8972, 8972]


# --- ssh, port -----------------------------------------------------------------------------

def ssh_of(probes):
    return fx.probe_of(probes, HEAD)["ssh"][0]


def test_ssh_auth_failure(cluster):
    cfg, results, probes, listen = cluster
    ssh_of(probes).update(rc=255, stdout="", stderr="spark@198.18.1.11: Permission denied (publickey).")
    report = evaluate(cfg, results, probes, listen)
    (ssh,) = find(report, "ssh.head_to_worker")
    assert ssh["status"] == "fail" and ssh["node"] == HEAD and "Permission denied" in ssh["found"]
    assert "ssh-copy-id spark@198.18.1.11" in ssh["fix"]
    (docker,) = find(report, "ssh.worker_docker")
    assert docker["status"] == "skip" and docker["node"] == WORKER


def test_ssh_host_key_failure_has_its_own_fix(cluster):
    cfg, results, probes, listen = cluster
    ssh_of(probes).update(rc=255, stdout="", stderr="Host key verification failed.")
    (ssh,) = find(evaluate(cfg, results, probes, listen), "ssh.head_to_worker")
    assert ssh["status"] == "fail" and "accept the host key" in ssh["fix"] and "ssh spark@198.18.1.11 true" in ssh["fix"]


def test_docker_over_ssh_failure(cluster):
    cfg, results, probes, listen = cluster
    ssh_of(probes).update(rc=1, stdout="glm53-ssh-ok\n",
                          stderr="permission denied while trying to connect to the Docker daemon socket")
    report = evaluate(cfg, results, probes, listen)
    assert statuses(report, "ssh.head_to_worker", HEAD) == ["ok"]
    (docker,) = find(report, "ssh.worker_docker")
    assert docker["status"] == "fail" and docker["node"] == WORKER and "docker group" in docker["fix"]
    assert "Docker daemon socket" in docker["found"]


def test_ssh_not_run_when_the_worker_has_no_link_address(cluster):
    cfg, results, _probes, _listen = cluster
    fx.readdress(fx.port_of(results, WORKER, L1), [])
    cfg["nodes"][WORKER]["address"] = ""
    _plan, probes, listen = fx.probe(cfg, results)
    assert fx.probe_of(probes, HEAD)["ssh"] == []
    report = evaluate(cfg, results, probes, listen)
    assert [(c["node"], c["status"]) for c in find(report, "ssh.head_to_worker")] == [(HEAD, "skip")]
    assert [(c["node"], c["status"]) for c in find(report, "ssh.worker_docker")] == [(WORKER, "skip")]


def test_master_port_blocked(cluster):
    cfg, results, probes, listen = cluster
    fx.probe_of(probes, WORKER)["connect"].update(connected=False, error="ETIMEDOUT")
    (res,) = find(evaluate(cfg, results, probes, listen), "port.master")
    assert res["status"] == "fail" and res["node"] == WORKER and res["found"] == "ETIMEDOUT"
    assert "29551" in res["fix"] and "198.18.1.10:29551" in res["expected"] and "tensorfold" in res["expected"]


def test_master_port_in_use_but_reachable(cluster):
    cfg, results, probes, listen = cluster
    listen["listen"].update(bound=False, accepted=[], error="bind 198.18.1.10:29551: EADDRINUSE")
    (res,) = find(evaluate(cfg, results, probes, listen), "port.master")
    assert res["status"] == "ok" and "already held on spark-head" in res["found"] and "EADDRINUSE" in res["found"]


def test_master_port_head_cannot_listen(cluster):
    cfg, results, probes, listen = cluster
    listen["listen"].update(bound=False, accepted=[], error="bind 198.18.1.10:29551: EADDRNOTAVAIL")
    fx.probe_of(probes, WORKER)["connect"].update(connected=False, error="ECONNREFUSED")
    (res,) = find(evaluate(cfg, results, probes, listen), "port.master")
    assert res["status"] == "fail" and res["found"] == "spark-head could not listen: bind 198.18.1.10:29551: EADDRNOTAVAIL"


def test_master_port_not_probed_because_the_worker_link_is_down(cluster):
    cfg, results, _probes, _listen = cluster
    fx.port_of(results, WORKER, L1).update(state="Down", operstate="DOWN", sysfs_state="DOWN", carrier=0)
    _plan, probes, listen = fx.probe(cfg, results)
    assert listen is None and fx.probe_of(probes, WORKER)["connect"] is None
    report = evaluate(cfg, results, probes, listen)
    assert statuses(report, "port.master", WORKER) == ["skip"]


def test_master_port_listener_lost_with_nothing_failed_is_a_failure(cluster):
    # The listener's result never came back (async_status gave up) although both ends were
    # fine: that must not pass as a skip.
    cfg, results, probes, _listen = cluster
    report = evaluate(cfg, results, probes, None)
    (res,) = find(report, "port.master", WORKER)
    assert res["status"] == "fail" and res["summary"] == UNEXPLAINED
    assert "port 29551" in res["found"]


# --- GPU, memory, disk ---------------------------------------------------------------------

def test_foreign_cuda_process_fails(cluster):
    cfg, results, probes, listen = cluster
    fx.by_node(results, WORKER)["apps"]["stdout"] = "4242, python3\n"
    report = evaluate(cfg, results, probes, listen)
    (res,) = find(report, "gpu.idle", WORKER, "fail")
    assert res["found"] == "pid 4242 (python3)" and "stop it first" in res["fix"] and "spark-worker" in res["fix"]
    allowed = evaluate(dict(cfg, gpu_process_allow=["^python"]), results, probes, listen)
    assert statuses(allowed, "gpu.idle", WORKER) == ["ok"]


def test_driver_mismatch_and_590_are_warnings(cluster):
    cfg, results, probes, listen = cluster
    fx.by_node(results, WORKER)["gpu"]["stdout"] = "NVIDIA GB10, 590.44.01\n"
    report = evaluate(cfg, results, probes, listen)
    assert report["status"] == "warn" and report["failures"] == []
    (match,) = find(report, "gpu.driver_match", WORKER)
    assert match["status"] == "warn" and match["found"] == "590.44.01" and "580.95.05" in match["expected"]
    (version,) = find(report, "gpu.driver_version", WORKER, "warn")
    assert "CUDA-graph deadlock" in version["fix"] and "580" in version["fix"]
    assert find(report, "gpu.driver_version", HEAD, "ok")


def test_wrong_gpu_or_no_nvidia_smi(cluster):
    cfg, results, probes, listen = cluster
    fx.by_node(results, HEAD)["gpu"] = fx.cmd("NVIDIA H100 80GB HBM3, 580.95.05")
    fx.by_node(results, WORKER)["gpu"] = fx.cmd(rc=127, stderr="nvidia-smi: command not found in PATH")
    fx.by_node(results, WORKER)["apps"] = fx.cmd(rc=127, stderr="nvidia-smi: command not found in PATH")
    report = evaluate(cfg, results, probes, listen)
    res = dict((c["node"], c) for c in find(report, "gpu.model"))
    assert res[HEAD]["status"] == "fail" and res[HEAD]["found"] == "NVIDIA H100 80GB HBM3"
    assert res[HEAD]["expected"] == "NVIDIA GB10"
    assert res[WORKER]["status"] == "fail"
    assert res[WORKER]["found"] == "nvidia-smi failed: nvidia-smi: command not found in PATH"
    assert "install the NVIDIA driver" in res[WORKER]["fix"]


def test_compute_apps_unreadable_fails(cluster):
    cfg, results, probes, listen = cluster
    fx.by_node(results, HEAD)["apps"] = fx.cmd(rc=6, stderr="Failed to initialize NVML: Unknown Error")
    (res,) = find(evaluate(cfg, results, probes, listen), "gpu.idle", HEAD)
    assert res["status"] == "fail" and "NVML" in res["found"] and "--query-compute-apps" in res["fix"]


def test_memory_gate_warns(cluster):
    cfg, results, probes, listen = cluster
    report = evaluate(dict(cfg, mem_free_gib=112, mem_available_gib=None), results, probes, listen)
    res = [c for c in report["checks"] if c["check"].startswith("memory.")]
    assert [(c["check"], c["node"], c["status"]) for c in res] == [
        ("memory.mem_free", HEAD, "warn"), ("memory.mem_free", WORKER, "warn")]
    assert res[0]["found"] == "110.0 GiB" and res[0]["expected"] == ">= 112 GiB MemFree"
    assert report["status"] == "warn"
    fx.by_node(results, HEAD)["meminfo"] = ""
    (unreadable,) = find(evaluate(cfg, results, probes, listen), "memory.mem_free", HEAD)
    assert unreadable["status"] == "warn" and unreadable["found"] == "unreadable"


def test_disk_groups_add_up_on_one_filesystem(cluster):
    cfg, results, probes, listen = cluster
    entries = fx.by_node(results, HEAD)["disk"]
    entries.append({"name": "session", "path": "/nvme/session", "need": 64 * fx.GIB, "dev": 2, "mount": "/nvme",
                    "free": 10 * fx.GIB, "present": 0, "checked": "/nvme"})
    groups = disk_groups(entries)
    assert [(g["mount"], g["need"], g["names"]) for g in groups] == [
        ("/", 249 * 10 ** 9, ["checkpoint", "prepared"]), ("/nvme", 64 * fx.GIB, ["session"])]
    res = find(evaluate(cfg, results, probes, listen), "disk.free", HEAD)
    assert [c["status"] for c in res] == ["ok", "fail"]
    assert res[1]["found"] == "10.7 GB free" and "/nvme/session" in res[1]["fix"]
    assert res[1]["expected"] == ">= 68.7 GB free on /nvme for session (path tensorfold)"
    assert "free 58.0 GB on /nvme" in res[1]["fix"]


def test_disk_counts_what_is_already_there(cluster):
    cfg, results, probes, listen = cluster
    entries = [
        {"name": "checkpoint", "path": "~/.cache/huggingface", "need": 165 * 10 ** 9, "present": 170 * 10 ** 9,
         "dev": 1, "mount": "/", "free": 90 * 10 ** 9},
        {"name": "prepared", "path": "~/.cache/glm53/prepared", "need": 84 * 10 ** 9, "present": 4 * 10 ** 9,
         "dev": 1, "mount": "/", "free": 90 * 10 ** 9},
    ]
    (group,) = disk_groups(entries)
    assert group["need"] == 80 * 10 ** 9 and group["present"] == 169 * 10 ** 9
    fx.by_node(results, HEAD)["disk"] = entries
    (res,) = find(evaluate(cfg, results, probes, listen), "disk.free", HEAD)
    assert res["status"] == "ok"
    assert res["found"] == "90.0 GB free (169.0 GB of this path's data already there counted)"


def test_disk_entry_error_fails(cluster):
    cfg, results, probes, listen = cluster
    fx.by_node(results, HEAD)["disk"] = [{"name": "checkpoint", "path": "/x", "need": 1, "checked": "/x",
                                          "error": "/x: Permission denied"}]
    report = evaluate(cfg, results, probes, listen)
    (head,) = find(report, "disk.free", HEAD)
    assert head["status"] == "fail" and head["found"] == "/x: Permission denied"
    assert head["summary"] == "cannot stat /x" and head["fix"] == "create the directory or fix its permissions"


def test_node_without_disk_entries_fails(cluster):
    # A node that answered but returned no disk measurement: never a pass.
    cfg, results, probes, listen = cluster
    del fx.by_node(results, WORKER)["disk"]
    report = evaluate(cfg, results, probes, listen)
    (worker,) = find(report, "disk.free", WORKER)
    assert worker["status"] == "fail" and report["status"] == "fail"


# --- GID -----------------------------------------------------------------------------------

def test_gid_missing(cluster):
    cfg, results, probes, listen = cluster
    fx.port_of(results, WORKER, L1).update(gid_index=None, roce_v2_ipv4_gids=[{"ipv4": "198.18.7.7", "index": 3}])
    report = evaluate(cfg, results, probes, listen)
    (res,) = find(report, "rdma.gid_index", WORKER, netdev=L1)
    assert res["status"] == "fail" and "198.18.7.7@3" in res["found"]
    assert "198.18.1.11" in res["expected"] and "reload the mlx5 driver" in res["fix"]


def test_gid_indexes_that_differ_warn(cluster):
    cfg, results, probes, listen = cluster
    fx.port_of(results, HEAD, L2).update(gid_index=5, roce_v2_ipv4_gids=[{"ipv4": "198.18.2.10", "index": 5}])
    report = evaluate(cfg, results, probes, listen)
    (res,) = find(report, "rdma.gid_index_uniform", HEAD)
    assert res["status"] == "warn" and res["found"] == "roceP2p1s0f1=5,rocep1s0f1=3"
    assert report["contract"]["nodes"][HEAD]["gid_index"] == {"rocep1s0f1": 3, "roceP2p1s0f1": 5}
    assert report["nccl"][HEAD]["NCCL_IB_GID_INDEX"] == "3"
    assert statuses(report, "rdma.gid_index_uniform", WORKER) == ["ok"]


# --- small helpers -------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("NVIDIA GB10, 580.95.05\n", [{"name": "NVIDIA GB10", "driver": "580.95.05"}]),
    ("NVIDIA GB10, 580.95.05\nNVIDIA GB10, 580.95.05", [{"name": "NVIDIA GB10", "driver": "580.95.05"}] * 2),
    ("", []),
    ("weird", [{"name": "weird", "driver": ""}]),
])
def test_parse_gpus(text, expected):
    assert parse_gpus(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("", []),
    ("No running processes found", []),
    ("4242, python3\n17, [Not Found]\n", [{"pid": 4242, "name": "python3"}, {"pid": 17, "name": "[Not Found]"}]),
])
def test_parse_compute_apps(text, expected):
    assert parse_compute_apps(text) == expected


def test_command_error():
    assert command_error(None) == "not run"
    assert command_error({"rc": 1, "stderr": "a\nlast line\n"}) == "last line"
    assert command_error({"rc": 3}) == "rc=3"
    assert command_error({"rc": 2, "msg": "[Errno 2] No such file or directory: b'ping'"}) == \
        "[Errno 2] No such file or directory: b'ping'"
    assert command_error({"rc": None, "timed_out": True, "command": "nvidia-smi -L", "timeout": 10,
                          "stderr": "partial"}) == "`nvidia-smi -L` did not answer within 10 s (wedged)"


def test_message_format():
    res = result("x.y", "n1", "fail", "fail", expected="A", found="B", fix="do C", summary="thing broke")
    assert res["message"] == "[x.y] n1: thing broke; expected A, found B; fix: do C"
    ok = result("x.y", "n1", "ok", "fail", expected="A", found="A", fix="do C", summary="fine")
    assert ok["fix"] == "" and ok["message"] == "[x.y] n1: fine; expected A, found A"


def _cells(lines, nodes):
    """Each line cut at the columns where the header puts the node names."""
    header = lines[0]
    starts = [header.index(node) for node in nodes]
    out = {}
    for line in lines[1:]:
        label = line[:starts[0]]
        assert label.endswith("  "), "the label runs into the first column: %r" % line
        cells = []
        for i, start in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else None
            cell = line[start:end]
            # A cell starts exactly at its column and never runs into the next one.
            assert cell[:1] not in ("", " "), "cell not at column %d: %r" % (start, line)
            if end is not None:
                assert cell.endswith("  "), "cell runs into the next column: %r" % line
            cells.append(cell.strip())
        out[label.strip()] = cells
    return out


def test_table_has_a_row_per_check_and_aligned_columns(cluster):
    cfg, results, probes, listen = cluster
    fx.by_node(results, WORKER)["apps"]["stdout"] = "1, x"
    fx.by_node(results, HEAD)["gpu"]["stdout"] = "NVIDIA GB10, 590.44.01"
    report = evaluate(cfg, results, probes, listen)
    lines = report_table(report)
    assert lines[0].split() == ["check", HEAD, WORKER]
    rows = _cells(lines, [HEAD, WORKER])
    assert list(rows)[0] == "node.reachable" and list(rows)[-1] == "overall"
    assert len(rows) == len(lines) - 1  # one row per check name, no duplicates
    assert rows["gpu.idle"] == ["ok", "fail"]
    assert rows["gpu.driver_version"] == ["warn", "ok"]
    assert rows["gpu.driver_match"] == ["-", "warn"]
    assert rows["ssh.head_to_worker"] == ["ok", "-"]
    assert rows["ssh.worker_docker"] == ["-", "ok"]
    assert rows["link.netdev_names"] == ["-", "ok"]
    assert rows["link.df_ping"] == ["ok", "ok"]
    assert rows["overall"] == ["warn", "fail"]
    for name, cells in rows.items():
        assert all(cell in ("ok", "warn", "fail", "skip", "-") for cell in cells), (name, cells)


def test_table_columns_follow_the_longest_node_name():
    long_worker = "spark-worker-with-a-long-name"
    cfg, results, probes, listen = fx.healthy(workers=["w1", long_worker, "w3"])
    fx.port_of(results, "w3", L2).update(state="Down", operstate="DOWN", sysfs_state="DOWN")
    _plan, probes, listen = fx.probe(cfg, results)
    fail_ping([p for p in fx.probe_of(probes, HEAD)["pings"] if p["netdev"] == L2 and p["peer"] == "w3"][0])
    report = evaluate(cfg, results, probes, listen)
    lines = report_table(report)
    rows = _cells(lines, [HEAD, "w1", long_worker, "w3"])
    assert rows["link.port_up"] == ["ok", "ok", "ok", "warn"]
    assert rows["ssh.worker_docker"] == ["-", "ok", "ok", "ok"]
    assert rows["overall"] == ["warn", "ok", "ok", "warn"]


def test_report_and_gate_lines_name_every_failure(cluster):
    cfg, results, probes, listen = cluster
    fx.by_node(results, WORKER)["apps"]["stdout"] = "4242, python3\n"
    fx.by_node(results, HEAD)["gpu"]["stdout"] = "NVIDIA GB10, 590.44.01"
    report = evaluate(cfg, results, probes, listen)
    lines = report_lines(report, "cx7_link preflight: fail")
    assert lines[0] == "cx7_link preflight: fail"
    assert [line for line in lines if line.startswith(("WARN ", "FAIL "))] == [
        "WARN " + find(report, "gpu.driver_version", HEAD)[0]["message"],
        "WARN " + find(report, "gpu.driver_match", WORKER)[0]["message"],
        "FAIL " + find(report, "gpu.idle", WORKER)[0]["message"],
    ]
    gate = gate_lines(report, "cx7_link preflight", "/tmp/r.json", "nothing was changed on any node.")
    assert gate[0] == "cx7_link preflight failed on spark-worker (1 check(s); report /tmp/r.json):"
    assert gate[1].startswith("[gpu.idle] spark-worker: 1 foreign CUDA process(es); expected no foreign CUDA")
    assert gate[-1] == "Fix the above and rerun; nothing was changed on any node."


def test_inputs_are_not_mutated(cluster):
    cfg, results, probes, listen = cluster
    before = copy.deepcopy((cfg, results, probes, listen))
    _cx7_preflight.probe_plan(cfg, results)
    evaluate(cfg, results, probes, listen)
    assert (cfg, results, probes, listen) == before


# --- what the node module measures for the disk check (real directories) -----------------

def test_disk_entry_measures_nearest_existing_dir_and_present_files(tmp_path):
    blobs = tmp_path / "cache" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / "a").write_bytes(b"x" * 65536)
    (tmp_path / "cache" / "link").symlink_to(blobs / "a")
    prepared = disk_entry("prepared", str(tmp_path / "cache"), 10)
    session = disk_entry("session", str(tmp_path / "not" / "yet"), 5)
    assert prepared["checked"] == str(tmp_path / "cache") and prepared["free"] > 0
    assert 65536 <= prepared["present"] < 2 * 65536  # the symlink is not counted again
    assert session["checked"] == str(tmp_path) and session["present"] == 0 and session["need"] == 5
    assert session["dev"] == prepared["dev"] and session["mount"] == prepared["mount"]
