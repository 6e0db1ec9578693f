"""The four-node lab (one head, three workers on the same link subnets, as through a
switch), in one module so the two extra workers are created once and removed when it ends
(the `lab4` fixture): the lab's shape, names, engines and faults, and the preflight on it.

Cost: the four-node lab (two workers created and removed) and one deployment of path vllm on
four nodes, whose preflight report the preflight test reads; its rerun is the idempotence claim."""

from __future__ import annotations

import ipaddress
import json
import shutil
from pathlib import Path

import pytest
import yaml

import lab_faults as faults
from lab_faults import HEAD, spark_lab
from test_cx7_link import checks

HEALTH = "tests/integration/playbooks/lab_health.yml"
REPO = Path(__file__).resolve().parents[2]
LINK1 = "enp1s0f1np1"


def sh(node, script, **kw):
    return faults.sh(node, script, **kw).stdout


def test_four_node_lab_shape_and_rerun(lab4):
    names = ["spark-head", "spark-worker", "spark-worker-2", "spark-worker-3"]
    assert list(lab4.nodes) == names
    assert [n.mgmt for n in lab4.nodes.values()] == [f"198.18.0.{10 + i}" for i in range(4)]
    assert [n.link2 for n in lab4.nodes.values()] == [f"198.18.2.{10 + i}" for i in range(4)]
    assert lab4.head.name == "spark-head" and [w.name for w in lab4.workers] == names[1:]
    inventory = Path(lab4.inventory)
    assert inventory == spark_lab.STATE / "inventory-4"
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    assert list(hosts["sparks"]["children"]["spark_head"]["hosts"]) == ["spark-head"]
    assert list(hosts["sparks"]["children"]["spark_workers"]["hosts"]) == names[1:]
    # The lab's state as plain values (a template is compiled again by every task of every host).
    state = hosts["sparks"]["vars"]
    assert state["ansible_ssh_private_key_file"] == str(spark_lab.STATE / "id_ed25519")
    assert f"UserKnownHostsFile={spark_lab.STATE / 'known_hosts'} " in state["ansible_ssh_common_args"]
    assert state["tensorfold_kit_commit"] == json.loads((spark_lab.STATE / "git" / "commits.json").read_text())["kit"]["commit"]
    assert "{{" not in (inventory / "hosts.yml").read_text()
    w3 = yaml.safe_load((inventory / "host_vars" / "spark-worker-3.yml").read_text())
    assert w3["ansible_host"] == "198.18.0.13" and w3["glm53_link_address"] == "198.18.1.13"
    assert (inventory / "group_vars").resolve() == (REPO / "lab" / "inventory" / "group_vars")
    # The committed inventory is still the two-node one.
    assert "spark-worker-2" not in (REPO / "lab" / "inventory" / "hosts.yml").read_text()
    # Rerun: nothing to change; the running lab reports healthy.
    assert spark_lab.up(nodes=4).changes == []
    assert spark_lab.status(nodes=4)


def test_four_node_head_reaches_every_worker_without_prompt(lab4):
    for worker in lab4.workers:
        for target in (worker.name, worker.link1, worker.link2):
            out = faults.sh("spark-head", f"ssh -o BatchMode=yes -o ConnectTimeout=5 {target} hostname", user="spark").stdout
            assert out == f"{worker.name}\n", target
    # every node resolves every name, its own included, to the management address
    for name in lab4.nodes:
        for node in lab4.nodes.values():
            assert sh(name, f"getent hosts {node.name}").split()[0] == node.mgmt, (name, node.name)


def test_four_node_inner_engines_do_not_overlap(lab4):
    nets = []
    for name in lab4.nodes:
        bridge = json.loads(sh(name, "docker network inspect bridge"))[0]["IPAM"]["Config"][0]["Subnet"]
        pools = json.loads(sh(name, "cat /etc/docker/daemon.json"))["default-address-pools"]
        nets += [ipaddress.ip_network(bridge)] + [ipaddress.ip_network(p["base"]) for p in pools]
    assert all(n.subnet_of(ipaddress.ip_network("198.19.0.0/16")) for n in nets)
    assert not [(a, b) for i, a in enumerate(nets) for b in nets[i + 1:] if a.overlaps(b)]
    # head and worker keep the engines they always had
    assert nets[:4] == [ipaddress.ip_network(x) for x in ("198.19.0.0/24", "198.19.64.0/18", "198.19.1.0/24", "198.19.128.0/18")]


def test_four_node_health_playbook_through_the_generated_inventory(lab4, run_playbook):
    result = run_playbook(HEALTH, inventory=lab4)
    systemd = result.task_results("Systemd finished booting with no failed unit")
    assert set(systemd) == set(lab4.nodes)
    pings = result.task_results("Jumbo frames pass unfragmented to the peer on both links")
    assert set(pings) == set(lab4.nodes)


def test_four_node_faults_on_the_new_workers(lab4):
    with faults.link_down("spark-worker-3", LINK1):
        assert "rocep1s0f1 port 1 ==> enp1s0f1np1 (Down)" in sh("spark-worker-3", "ibdev2netdev", user="spark").splitlines()
        assert "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)" in sh("spark-worker-2", "ibdev2netdev").splitlines()
    ssh = "ssh -o BatchMode=yes -o ConnectTimeout=5 {} true"
    with faults.break_worker_ssh("spark-worker-2"):
        assert faults.sh("spark-head", ssh.format("198.18.1.12"), user="spark", check=False).returncode != 0
        faults.sh("spark-head", ssh.format("198.18.1.13"), user="spark")
    faults.sh("spark-head", ssh.format("198.18.1.12"), user="spark")


@pytest.fixture(scope="module")
def served4(lab4, tmp_path_factory):
    """One deployment of path vllm on the four nodes for the module: the nvidia runtime (as
    admin), then site.yml, whose preflight writes its report where the preflight test reads it.
    The preflight is not run a second time on its own: site.yml's is the same role."""
    from conftest import PlaybookRunner  # pylint: disable=import-outside-toplevel
    runner = PlaybookRunner(Path(lab4.inventory), "four-nodes-vllm")
    runner("playbooks/docker_runtime.yml", inventory=lab4, cmdline="-b",
           extravars={"ansible_user": "admin", "docker_runtime_user": "spark"})
    report_path = tmp_path_factory.mktemp("four-nodes") / "cx7_link-report.json"
    run = runner("playbooks/site.yml", inventory=lab4, extravars={"path": "vllm", "cx7_link_report_path": str(report_path)})
    return run, json.loads(report_path.read_text())


def test_four_node_lab_passes_with_settings_on_every_node(lab4, served4):
    _run, report = served4
    assert report["status"] == "ok", [c["message"] for c in report["checks"] if c["status"] != "ok"]
    nodes = list(lab4.nodes)
    assert report["head"] == HEAD and sorted(report["workers"]) == sorted(n for n in nodes if n != HEAD)
    assert sorted(report["nccl"]) == sorted(nodes)
    for node in nodes:
        assert report["nccl"][node]["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    assert sorted(c["node"] for c in checks(report, "port.master", status="ok")) == sorted(report["workers"])
    assert [n["rank"] for n in report["contract"]["nodes"].values()] == list(range(len(nodes)))


def _rank(node):
    out = faults.sh(node, "docker container inspect glm53-vllm", user="spark", check=False)
    return json.loads(out.stdout)[0] if out.returncode == 0 else None


def test_four_node_vllm_serves_tp4_with_ranks_0_to_3_and_a_rerun_changes_nothing(lab4, served4, run_playbook):
    nodes = list(lab4.nodes)
    found = {node: _rank(node) for node in nodes}
    for number, node in enumerate(nodes):
        facts = found[node]
        assert facts and facts["State"]["Running"], node
        cmd = facts["Config"]["Cmd"]
        assert cmd[cmd.index("--tensor-parallel-size") + 1] == "4" and cmd[cmd.index("--nnodes") + 1] == "4"
        assert cmd[cmd.index("--node-rank") + 1] == str(number)
        assert ("--headless" in cmd) == (number > 0)
    images = {sh(node, "docker image inspect -f '{{.Id}}' glm53-sm121:local", user="spark").strip() for node in nodes}
    assert len(images) == 1, images
    before = {node: (facts["Id"], facts["State"]["StartedAt"]) for node, facts in found.items()}
    rerun = run_playbook("playbooks/site.yml", inventory=lab4, extravars={"path": "vllm"})
    assert rerun.changed_total == 0
    assert {node: (_rank(node)["Id"], _rank(node)["State"]["StartedAt"]) for node in nodes} == before


def test_three_nodes_are_refused_for_vllm_before_any_host_is_contacted(lab4, run_playbook, tmp_path):
    # The four-node lab's inventory without its last worker.
    source = Path(lab4.inventory)
    hosts = yaml.safe_load((source / "hosts.yml").read_text())
    del hosts["sparks"]["children"]["spark_workers"]["hosts"]["spark-worker-3"]
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(hosts))
    (tmp_path / "host_vars").mkdir()
    for name in ("spark-head", "spark-worker", "spark-worker-2"):
        shutil.copy(source / "host_vars" / f"{name}.yml", tmp_path / "host_vars")
    (tmp_path / "group_vars").symlink_to(REPO / "lab" / "inventory" / "group_vars")
    before = {node: _rank(node) and _rank(node)["Id"] for node in lab4.nodes}
    run = run_playbook("playbooks/site.yml", inventory=tmp_path, extravars={"path": "vllm"}, expect_success=False)
    run.assert_failed()
    assert "found 3 nodes" in run.stdout and "supported: 1, 2 or 4" in run.stdout
    assert run.changed_total == 0
    assert not [ev for ev in run.events if ev.get("event_data", {}).get("task", "").startswith("dgx_spark.glm53.cx7_link")
                or "Preflight" in ev.get("event_data", {}).get("play", "")], "a host was contacted"
    assert {node: _rank(node) and _rank(node)["Id"] for node in lab4.nodes} == before
