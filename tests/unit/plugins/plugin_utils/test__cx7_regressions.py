"""One test per issue-7 item of the cx7_link preflight.

Each test states what the former module_utils/_cx7_checks.py (and the role around it) did
wrong for the same situation; run against that code, the situation gave the wrong answer.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cx7_fixtures as fx  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.dgx_spark.glm53.plugins.module_utils._node_facts import disk_entries  # noqa: E402
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _cx7_preflight, _known_issues  # noqa: E402
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_nodes import disk_groups  # noqa: E402
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._inputs import range_errors  # noqa: E402
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._preflight_result import (  # noqa: E402
    enforce_skips,
    result,
    skipped,
)

HEAD, WORKER, L1, L2, F0, F0B = fx.HEAD, fx.WORKER, fx.L1, fx.L2, fx.F0, fx.F0B
find, statuses = fx.find, fx.statuses
UNEXPLAINED, evaluate = fx.UNEXPLAINED, fx.evaluate


def reprobe(cfg, results):
    _plan, probes, listen = fx.probe(cfg, results)
    return evaluate(cfg, results, probes, listen)


def problems(report):
    return [c["message"] for c in report["failures"] + report["warnings"]]


# --- NCCL_IB_GID_INDEX is the GID of the link address -------------------------------------

def test_gid_index_is_the_configured_link_address_not_the_first_ipv4():
    # Old: NCCL_IB_GID_INDEX was the port's `gid_index`, the GID of the netdev's FIRST IPv4.
    # With a 169.254/16 link-local address listed first, the head's NCCL used GID 3 (the
    # link-local address) while HEAD_IP is 198.18.1.10 (GID 5): RoCE traffic on the wrong GID.
    cfg, results, _probes, _listen = fx.healthy()
    head_port = fx.readdress(fx.port_of(results, HEAD, L1), ["169.254.12.34/16", "198.18.1.10/24"])
    assert head_port["gid_index"] == 3 and head_port["roce_v2_ipv4_gids"][1] == {"ipv4": "198.18.1.10", "index": 5}
    # The second function gets a link-local address the same way, so both HCAs agree on 5.
    fx.readdress(fx.port_of(results, HEAD, L2), ["169.254.112.34/16", "198.18.2.10/24"])
    report = reprobe(cfg, results)
    assert report["status"] == "ok", problems(report)
    assert report["nccl"][HEAD]["NCCL_IB_GID_INDEX"] == "5"
    assert report["contract"]["nodes"][HEAD]["gid_index"] == {"rocep1s0f1": 5, "roceP2p1s0f1": 5}
    assert report["nccl"][WORKER]["NCCL_IB_GID_INDEX"] == "3"
    assert report["contract"]["master_address"] == "198.18.1.10"
    (gid,) = find(report, "rdma.gid_index", HEAD, netdev=L1)
    assert gid["found"] == "index 5" and "198.18.1.10" in gid["expected"]


def test_unconfigured_head_with_link_local_first_uses_the_address_it_shares_with_the_worker():
    # Old: without glm53_link_address the head's address was simply its first IPv4, here
    # the link-local 169.254.12.34, which the worker (only 198.18.1.11/24) cannot reach:
    # the master address, the listener and NCCL_IB_GID_INDEX all pointed at it.
    cfg, results, _probes, _listen = fx.healthy()
    cfg["nodes"][HEAD]["address"] = ""
    fx.readdress(fx.port_of(results, HEAD, L1), ["169.254.12.34/16", "198.18.1.10/24"])
    fx.readdress(fx.port_of(results, HEAD, L2), ["169.254.112.34/16", "198.18.2.10/24"])
    report = reprobe(cfg, results)
    assert report["status"] == "ok", problems(report)
    assert report["contract"]["master_address"] == "198.18.1.10"
    assert report["nccl"][HEAD]["NCCL_IB_GID_INDEX"] == "5"
    (address,) = find(report, "link.address", HEAD)
    assert address["found"] == "not set; using 198.18.1.10"


def test_link_local_only_pair_passes_on_its_link_local_addresses():
    # A guard, not a failure of the old code: the old code took the first IPv4 and so
    # handled a link-local-only pair. The new choice skips link-local addresses when
    # another one exists (see the two tests above); with nothing else it must still use
    # them: master address = the head's 169.254 address, shared subnet 169.254.0.0/16.
    cfg, results, _probes, _listen = fx.healthy()
    for node, octet in ((HEAD, 10), (WORKER, 11)):
        cfg["nodes"][node]["address"] = ""
        fx.readdress(fx.port_of(results, node, L1), ["169.254.%d.%d/16" % (octet, octet)])
        fx.readdress(fx.port_of(results, node, L2), ["169.254.%d.%d/16" % (100 + octet, octet)])
    report = reprobe(cfg, results)
    assert report["status"] == "ok", problems(report)
    assert report["contract"]["master_address"] == "169.254.10.10"
    assert report["contract"]["nodes"][WORKER]["link_address"] == "169.254.11.11"
    (subnet,) = find(report, "link.subnet", WORKER, netdev=L1)
    assert subnet["summary"] == "enp1s0f1np1 shares 169.254.0.0/16 with spark-head"
    assert report["nccl"][HEAD]["NCCL_IB_GID_INDEX"] == "3"


# --- disk: only this model's bytes count as present ---------------------------------------

def test_disk_fails_with_the_numbers_when_present_and_free_do_not_cover_the_need():
    # The controller takes `present` as the node module reports it (per entry, capped at
    # the entry's need) and adds nothing. 165 GB checkpoint with 100 GB of it there plus
    # 84 GB prepared leaves 149 GB to write on a disk with 120 GB free: 29 GB short.
    entries = [
        {"name": "checkpoint", "path": "~/.cache/huggingface", "need": 165 * 10 ** 9, "present": 100 * 10 ** 9,
         "dev": 1, "mount": "/", "free": 120 * 10 ** 9, "checked": "/home/spark/.cache/huggingface"},
        {"name": "prepared", "path": "~/.cache/glm53/prepared", "need": 84 * 10 ** 9, "present": 0,
         "dev": 1, "mount": "/", "free": 120 * 10 ** 9, "checked": "/home/spark/.cache"},
    ]
    (group,) = disk_groups(entries)
    assert (group["need"], group["present"], group["free"]) == (149 * 10 ** 9, 100 * 10 ** 9, 120 * 10 ** 9)
    cfg, results, probes, listen = fx.healthy()
    fx.by_node(results, WORKER)["disk"] = entries
    report = evaluate(cfg, results, probes, listen)
    (disk,) = find(report, "disk.free", WORKER)
    assert disk["status"] == "fail"
    assert disk["expected"] == ">= 149.0 GB free on / for checkpoint+prepared (path tensorfold)"
    assert disk["found"] == "120.0 GB free (100.0 GB of this path's data already there counted)"
    assert disk["fix"].startswith("free 29.0 GB on / (~/.cache/huggingface, ~/.cache/glm53/prepared)")
    assert statuses(report, "disk.free", HEAD) == ["ok"]


def _blob(root, repo_id, revision, name, size):
    repo = root / "hub" / ("models--" + repo_id.replace("/", "--"))
    blobs = repo / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    blob = blobs / ("%s-%s" % (revision[:8], name))
    blob.write_bytes(b"\0" * size)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    (snapshot / name).symlink_to(blob)


def test_disk_present_counts_only_the_pinned_revisions_in_a_shared_cache(tmp_path):
    # Old: the disk probe summed every regular file under the directory, so another model
    # (or an old revision) in the same Hugging Face cache counted as this path's checkpoint
    # and the check passed with too little free space.
    ours = {"repo_id": "org/glm", "revision": "a" * 40}
    _blob(tmp_path, "org/glm", "a" * 40, "model-1.safetensors", 64 * 1024)
    _blob(tmp_path, "org/glm", "b" * 40, "model-1.safetensors", 256 * 1024)   # older revision
    _blob(tmp_path, "org/other", "c" * 40, "model.safetensors", 512 * 1024)   # another model
    (entry,) = disk_entries({"checkpoint": 10 ** 12}, {"checkpoint": str(tmp_path)}, [ours])
    assert 64 * 1024 <= entry["present"] < 128 * 1024


# --- the second CX7 function follows the cabled pair ---------------------------------------

@pytest.mark.parametrize("cage, primary, second, hcas", [
    ("f0", F0, F0B, "rocep1s0f0,roceP2p1s0f0"),
    ("f1", L1, L2, "rocep1s0f1,roceP2p1s0f1"),
])
def test_auto_netdev_follows_the_cabled_cage(cage, primary, second, hcas):
    # Old: the netdevs were fixed (enp1s0f1np1 + enP2p1s0f1np1 by default), so a cable in
    # the f0 cage failed link.port_up on every node, and a primary set to enp1s0f0np0 still
    # paired it with enP2p1s0f1np1 (Down): a warning and NCCL_IB_HCA without the second half.
    cfg, results, probes, listen = fx.healthy(cage=cage)
    assert all(n["netdev"] == "auto" and n["second_netdev"] == "auto" for n in cfg["nodes"].values())
    report = evaluate(cfg, results, probes, listen)
    assert report["status"] == "ok" and report["warnings"] == [], problems(report)
    for node in (HEAD, WORKER):
        assert report["nccl"][node]["NCCL_IB_HCA"] == hcas
        assert report["nccl"][node]["NCCL_SOCKET_IFNAME"] == primary
    assert [link["netdev"] for link in report["contract"]["links"]] == [primary, second]


# --- a wedged command fails naming the node, the command and the deadline ------------------

def test_wedged_nvidia_smi_fails_naming_node_command_and_timeout():
    # Old: nvidia-smi ran as a plain command task without a deadline, so a wedged driver
    # hung the play; the reason shown for a failed command was its stderr or "rc=...",
    # never which command missed which deadline.
    cfg, results, probes, listen = fx.healthy()
    gpu_cmd = "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader"
    apps_cmd = "nvidia-smi --query-compute-apps=pid,name --format=csv,noheader"
    fx.by_node(results, WORKER)["gpu"] = fx.cmd(rc=None, timed_out=True, command=gpu_cmd, timeout=10)
    fx.by_node(results, WORKER)["apps"] = fx.cmd(rc=None, timed_out=True, command=apps_cmd, timeout=10)
    report = evaluate(cfg, results, probes, listen)
    (model,) = find(report, "gpu.model", WORKER)
    assert model["status"] == "fail"
    assert model["found"] == "nvidia-smi failed: `%s` did not answer within 10 s (wedged)" % gpu_cmd
    assert "nvidia-smi hangs on spark-worker" in model["fix"] and "reboot" in model["fix"]
    (idle,) = find(report, "gpu.idle", WORKER)
    assert idle["status"] == "fail" and apps_cmd in idle["found"] and "10 s" in idle["found"]
    assert statuses(report, "gpu.model", HEAD) == ["ok"]


def test_wedged_ssh_fails_naming_target_command_and_timeout():
    # Old: the ssh had no deadline besides ConnectTimeout, so a login or a `docker ps` that
    # hangs after connecting hung the play; a result killed by a task timeout has no rc,
    # which made both ssh checks a skip, and a skip ranked as ok.
    cfg, results, probes, listen = fx.healthy()
    ssh = fx.probe_of(probes, HEAD)["ssh"][0]
    ssh.update(rc=None, stdout="", stderr="", timed_out=True, timeout=20)
    report = evaluate(cfg, results, probes, listen)
    (res,) = find(report, "ssh.head_to_worker")
    assert res["status"] == "fail" and res["node"] == HEAD
    assert res["found"] == "`%s` did not answer within 20 s (wedged)" % ssh["command"]
    assert "spark@198.18.1.11" in res["message"] and "spark-worker" in res["fix"] and "hangs" in res["fix"]
    assert statuses(report, "ssh.worker_docker", WORKER) == ["skip"]


def test_wedged_docker_behind_a_working_ssh_fails_docker_not_ssh():
    cfg, results, probes, listen = fx.healthy()
    ssh = fx.probe_of(probes, HEAD)["ssh"][0]
    ssh.update(rc=None, stdout="glm53-ssh-ok\n", stderr="", timed_out=True, timeout=20)
    report = evaluate(cfg, results, probes, listen)
    assert statuses(report, "ssh.head_to_worker", HEAD) == ["ok"]
    (docker,) = find(report, "ssh.worker_docker", WORKER)
    assert docker["status"] == "fail" and "did not answer within 20 s" in docker["found"]


# --- a skipped fail-level check never passes without a failing cause -----------------------

def test_unexplained_skip_fails_the_preflight():
    # Old: a skip ranked like ok, so a head whose ssh probe result came back without the
    # ssh entry (nothing else wrong) passed the preflight with ssh never checked.
    cfg, results, probes, listen = fx.healthy()
    assert fx.by_node(results, WORKER)["link"]["ports"]
    fx.probe_of(probes, HEAD)["ssh"] = []
    report = evaluate(cfg, results, probes, listen)
    (ssh,) = find(report, "ssh.head_to_worker", HEAD)
    assert ssh["status"] == "fail" and ssh["summary"] == UNEXPLAINED
    assert "link.ipv4, link.port_up, node.reachable" in ssh["expected"]
    assert "ssh to spark-worker" in ssh["found"]
    assert statuses(report, "ssh.worker_docker", WORKER) != ["ok"]
    assert report["status"] == "fail" and report["nodes"][HEAD] == "fail"


def test_explained_skip_stays_a_skip():
    cfg, results, _probes, _listen = fx.healthy()
    fx.port_of(results, WORKER, L1).update(state="Down", operstate="DOWN", sysfs_state="DOWN", carrier=0)
    report = reprobe(cfg, results)
    assert statuses(report, "ssh.head_to_worker", HEAD) == ["skip"]
    assert statuses(report, "port.master", WORKER) == ["skip"]
    assert not [c for c in report["checks"] if c["summary"] == UNEXPLAINED]


def test_enforce_skips_follows_chains_and_leaves_warn_level_skips():
    checks = [
        result("a.cause", "n1", "fail", "fail", expected="x", found="y", fix="z", summary="broken"),
        skipped("b.needs_a", "n1", "fail", "a.cause"),
        skipped("c.needs_b", "n2", "fail", ["b.needs_a"]),
        skipped("d.needs_ok", "n2", "fail", "e.fine"),
        result("e.fine", "n2", "ok", "fail", summary="fine"),
        skipped("f.warn_level", "n2", "warn", "e.fine"),
    ]
    out = dict((c["check"], c) for c in enforce_skips(checks))
    assert [out[n]["status"] for n in ("b.needs_a", "c.needs_b", "f.warn_level")] == ["skip", "skip", "skip"]
    assert out["d.needs_ok"]["status"] == "fail" and out["d.needs_ok"]["node"] == "n2"
    assert out["d.needs_ok"]["message"].startswith("[d.needs_ok] n2: skipped without a failing cause")
    assert "(e.fine)" in out["d.needs_ok"]["expected"]


def test_a_failure_of_the_same_check_elsewhere_does_not_explain_a_skip():
    # The worker returned no disk entries (disk.free skipped, needing node.reachable which
    # passed); the head's disk.free failing says nothing about the worker's disk.
    checks = [
        result("node.reachable", "head", "ok", "fail", summary="reachable"),
        result("node.reachable", "worker", "ok", "fail", summary="reachable"),
        result("disk.free", "head", "fail", "fail", expected="x", found="y", fix="z", summary="full"),
        skipped("disk.free", "worker", "fail", "node.reachable"),
    ]
    worker = [c for c in enforce_skips(checks) if c["node"] == "worker" and c["check"] == "disk.free"]
    assert [c["status"] for c in worker] == ["fail"]
    # The same through the preflight: the table must not show the unchecked worker as ok.
    cfg, results, probes, listen = fx.healthy()
    fx.by_node(results, HEAD)["disk"][0]["free"] = 10 ** 9
    del fx.by_node(results, WORKER)["disk"]
    report = evaluate(cfg, results, probes, listen)
    assert statuses(report, "disk.free", WORKER) == ["fail"] and report["nodes"][WORKER] == "fail"


# --- known-bad kernel, from the data table -------------------------------------------------

KHO_RELEASE = "7.0.0-1019-nvidia"


def kho_cluster(cmdline="BOOT_IMAGE=/vmlinuz ro quiet", cma_free_kb=10171136):
    cfg, results, probes, listen = fx.healthy()
    facts = fx.by_node(results, WORKER)
    facts.update(osrelease=KHO_RELEASE, cmdline=cmdline, meminfo=fx.meminfo(cma_total_kb=0, cma_free_kb=cma_free_kb))
    return cfg, results, probes, listen


def test_kho_kernel_with_its_tell_fails_with_the_fix():
    # Old: no kernel check at all; the preflight passed and NCCL init failed later with
    # `ibv_reg_mr_iova2 ... Cannot allocate memory` and nothing in dmesg.
    report = evaluate(*kho_cluster())
    (kernel,) = find(report, "node.kernel", WORKER)
    assert kernel["status"] == "fail" and kernel["level"] == "fail"
    assert KHO_RELEASE in kernel["found"] and "CmaTotal 0 kB" in kernel["found"]
    assert "CmaFree 10171136 kB" in kernel["found"]
    assert "kho=off" in kernel["fix"] and "6.17" in kernel["fix"]
    assert statuses(report, "node.kernel", HEAD) == ["ok"]
    assert report["status"] == "fail"


def test_kho_kernel_with_kho_off_passes():
    report = evaluate(*kho_cluster(cmdline="BOOT_IMAGE=/vmlinuz ro quiet kho=off"))
    assert statuses(report, "node.kernel", WORKER) == ["ok"] and report["status"] == "ok"


def test_kho_kernel_without_the_tell_passes():
    report = evaluate(*kho_cluster(cma_free_kb=0))
    (kernel,) = find(report, "node.kernel", WORKER)
    assert kernel["status"] == "ok" and kernel["found"] == KHO_RELEASE


def test_known_issues_are_data(monkeypatch):
    # Old: the 590 warning came from a role variable and the check's own code; a new bad
    # driver or kernel is now one table entry.
    cfg, results, probes, listen = fx.healthy()
    fx.by_node(results, HEAD)["gpu"]["stdout"] = "NVIDIA GB10, 590.44.01"
    (warn,) = find(evaluate(cfg, results, probes, listen), "gpu.driver_version", HEAD)
    assert warn["status"] == "warn" and "CUDA-graph deadlock" in warn["fix"]
    monkeypatch.setattr(_known_issues, "KNOWN_DRIVERS", [
        {"id": "gpu.driver_version", "level": "warn", "prefix": "580.", "summary": "driver 580.x", "fix": "use 581"}])
    monkeypatch.setattr(_known_issues, "KNOWN_KERNELS", [
        {"id": "node.kernel", "level": "fail", "release": "6.17.0-1008-nvidia", "summary": "bad kernel",
         "fix": "boot another kernel"}])
    fx.by_node(results, HEAD)["gpu"]["stdout"] = "NVIDIA GB10, 580.95.05"
    report = evaluate(cfg, results, probes, listen)
    assert [(c["node"], c["status"], c["fix"]) for c in find(report, "gpu.driver_version")] == [
        (HEAD, "warn", "use 581"), (WORKER, "warn", "use 581")]
    assert [(c["node"], c["status"], c["fix"]) for c in find(report, "node.kernel")] == [
        (HEAD, "fail", "boot another kernel"), (WORKER, "fail", "boot another kernel")]


# --- serving mode: our own engine on the GPU ----------------------------------------------

def serving_cluster(apps, containers, available_gib=12):
    cfg, results, probes, listen = fx.healthy()
    for node in (HEAD, WORKER):
        facts = fx.by_node(results, node)
        facts["apps"] = fx.cmd(apps, command="nvidia-smi --query-compute-apps=pid,name --format=csv,noheader")
        facts["app_containers"] = fx.clone(containers)
        facts["meminfo"] = fx.meminfo(free_gib=available_gib - 2, available_gib=available_gib)
    # The engine holds the master port: the listener cannot bind, the worker still connects.
    listen["listen"].update(bound=False, accepted=[], error="bind 198.18.1.10:29551: EADDRINUSE")
    return cfg, results, probes, listen


OUR_ENGINE = {
    "4242": {"id": "3f" * 32, "name": "glm53-tf-r0", "labels": {}},
    "4343": {"id": "4e" * 32, "name": "renamed-by-hand", "labels": {"dgx_spark.glm53.engine": "tensorfold"}},
}


def test_serving_engine_passes_gpu_memory_and_master_port():
    # Old: every CUDA process not in gpu_process_allow was foreign and the memory gates
    # warned, so rerunning the preflight (site.yml) on a serving cluster failed.
    report = evaluate(*serving_cluster("4242, python3\n4343, python3\n", OUR_ENGINE))
    assert report["status"] == "ok", problems(report)
    (idle,) = find(report, "gpu.idle", WORKER)
    assert idle["found"] == "only our engine: glm53-tf-r0, renamed-by-hand" and idle["summary"] == "serving"
    for check in ("memory.mem_free", "memory.mem_available"):
        (mem,) = find(report, check, HEAD)
        assert mem["status"] == "ok" and "while our engine runs" in mem["found"]
    (port,) = find(report, "port.master", WORKER)
    assert port["status"] == "ok" and "already held on spark-head" in port["found"]


def test_a_foreign_pid_beside_the_engine_still_fails():
    containers = dict(OUR_ENGINE, **{"5656": {"id": "5d" * 32, "name": "jupyter", "labels": {}}})
    report = evaluate(*serving_cluster("4242, python3\n5555, python3\n5656, python3\n", containers))
    (idle,) = find(report, "gpu.idle", WORKER)
    assert idle["status"] == "fail" and idle["found"] == "pid 5555 (python3),pid 5656 (python3)"
    assert "stop it first" in idle["fix"]


def test_our_engine_is_either_paths_by_the_one_table_and_a_look_alike_is_foreign():
    # Old: the names and the label came from role variables, a copy of what wait_for_slots
    # and the start's cleanup knew; now all read module_utils/_engines.
    containers = {
        "4242": {"id": "3f" * 32, "name": "glm53-vllm", "labels": {}},
        "4343": {"id": "4e" * 32, "name": "serve", "labels": {"dgx_spark.glm53.engine": "vllm"}},
        "5656": {"id": "5d" * 32, "name": "glm53-tf-r0-backup", "labels": {}},
    }
    report = evaluate(*serving_cluster("4242, python3\n4343, python3\n", containers))
    (idle,) = find(report, "gpu.idle", WORKER)
    assert idle["status"] == "ok" and idle["found"] == "only our engine: glm53-vllm, serve"
    report = evaluate(*serving_cluster("4242, python3\n5656, python3\n", containers))
    (idle,) = find(report, "gpu.idle", WORKER)
    assert idle["status"] == "fail" and idle["found"] == "pid 5656 (python3)"


def test_listener_that_could_not_bind_and_no_connection_fails():
    cfg, results, probes, listen = serving_cluster("4242, python3\n", OUR_ENGINE)
    fx.probe_of(probes, WORKER)["connect"].update(connected=False, error="ECONNREFUSED")
    (port,) = find(evaluate(cfg, results, probes, listen), "port.master", WORKER)
    assert port["status"] == "fail" and "could not listen" in port["found"]


# --- any number of workers ----------------------------------------------------------------

WORKERS = ["spark-w1", "spark-w2", "spark-w3"]


def test_head_and_three_workers():
    # Old: one worker only (`workers[0]`): ssh, the worker address and the NCCL links were
    # planned and judged for the first worker; the others were never probed.
    cfg, results, probes, listen = fx.healthy(cfg=fx.config(workers=WORKERS))
    plan = _cx7_preflight.probe_plan(cfg, results)
    head = plan["nodes"][HEAD]
    assert sorted((p["netdev"], p["peer"], p["target"]) for p in head["pings"]) == sorted(
        [(L1, w, "198.18.1.%d" % (11 + i)) for i, w in enumerate(WORKERS)]
        + [(L2, w, "198.18.2.%d" % (11 + i)) for i, w in enumerate(WORKERS)])
    for worker in WORKERS:
        assert set(p["peer"] for p in plan["nodes"][worker]["pings"]) == {HEAD}
        assert plan["nodes"][worker]["connect"]["address"] == "198.18.1.10"
        assert plan["nodes"][worker]["ssh"] == []
    assert [(s["worker"], s["target"]) for s in head["ssh"]] == [
        (w, "spark@198.18.1.%d" % (11 + i)) for i, w in enumerate(WORKERS)]
    assert plan["listen"]["expect"] == 3
    assert plan["listen"]["timeout"] > 3 * cfg["port_probe_timeout"]

    report = evaluate(cfg, results, probes, listen)
    assert report["status"] == "ok", problems(report)
    for check in ("link.subnet", "link.mtu_match", "port.master", "ssh.worker_docker", "link.netdev_names"):
        for netdev in ((L1, L2) if check.startswith("link.") and check != "link.netdev_names" else (None,)):
            assert sorted(c["node"] for c in find(report, check, netdev=netdev)) == WORKERS, (check, netdev)
    assert len(find(report, "ssh.head_to_worker", HEAD)) == 3
    assert len(find(report, "link.df_ping", HEAD)) == 6
    assert all(len(find(report, "link.df_ping", w)) == 2 for w in WORKERS)
    assert sorted(report["nccl"]) == sorted([HEAD] + WORKERS)
    assert all(env["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1" for env in report["nccl"].values())
    contract = report["contract"]
    assert contract["workers"] == WORKERS
    assert [(n, contract["nodes"][n]["rank"]) for n in [HEAD] + WORKERS] == [
        (HEAD, 0), ("spark-w1", 1), ("spark-w2", 2), ("spark-w3", 3)]
    assert contract["links"][0]["addresses"] == dict(
        [(HEAD, "198.18.1.10")] + [(w, "198.18.1.%d" % (11 + i)) for i, w in enumerate(WORKERS)])


def test_one_broken_worker_of_three_is_named():
    cfg, results, _probes, _listen = fx.healthy(cfg=fx.config(workers=WORKERS))
    _plan, probes, listen = fx.probe(cfg, results)
    [s for s in fx.probe_of(probes, HEAD)["ssh"] if s["worker"] == "spark-w2"][0].update(
        rc=255, stdout="", stderr="spark@198.18.1.12: Permission denied (publickey).")
    report = evaluate(cfg, results, probes, listen)
    (ssh,) = find(report, "ssh.head_to_worker", status="fail")
    assert "spark@198.18.1.12" in ssh["message"]
    assert [(c["node"], c["status"]) for c in find(report, "ssh.worker_docker")] == [
        ("spark-w1", "ok"), ("spark-w2", "skip"), ("spark-w3", "ok")]


# --- numeric inputs are range-checked before any probe ------------------------------------

MTU_RANGE = {"cx7_link_mtu": [576, 9216, 0]}


def test_mtu_out_of_range_is_refused_naming_the_variable():
    # Old: no range check at all; cx7_link_mtu 100000 was accepted and every MTU check
    # then failed against a value no netdev can have.
    assert range_errors({"cx7_link_mtu": 100000}, MTU_RANGE) == [
        "cx7_link_mtu must be a number from 576 to 9216 or 0, found 100000"]


@pytest.mark.parametrize("value", [0, 9000, "9000", 576, 9216])
def test_mtu_in_range_passes(value):
    assert range_errors({"cx7_link_mtu": value}, MTU_RANGE) == []


@pytest.mark.parametrize("value", ["jumbo", None, True, "", 575, -1])
def test_mtu_not_a_number_or_below_fails(value):
    (message,) = range_errors({"cx7_link_mtu": value}, MTU_RANGE)
    assert message.startswith("cx7_link_mtu must be a number from 576 to 9216 or 0, found ")
    assert message.endswith(repr(value))


@pytest.mark.parametrize("over", [{}, {"ssh_timeout": 60}, {"ping_count": 10, "ping_timeout": 30}])
def test_the_listener_outlasts_every_probe_run_up_to_the_last_workers_connect(over):
    # The probes run one node after the other; the head's listener has to be there when the last
    # worker connects, after the head's run (its ssh probes, its pings) and every worker's before.
    # On a loaded lab it expired first (sized on the connects alone: 20 s for a pair).
    cfg, results, _probes, _listen = fx.healthy(cfg=fx.config(workers=WORKERS, **over))
    plan = _cx7_preflight.probe_plan(cfg, results)
    head = plan["nodes"][HEAD]
    ping_seconds = cfg.get("ping_count", 2) * 0.2 + cfg.get("ping_timeout", 2) + 2
    head_run = max([ping_seconds] + [ssh["timeout"] for ssh in head["ssh"]])
    worker_runs = sum(max(ping_seconds, plan["nodes"][w]["connect"]["timeout"]) for w in WORKERS)
    starts = _cx7_preflight.PROBE_START_SECONDS * (1 + len(WORKERS))
    assert plan["listen"]["timeout"] >= head_run + worker_runs + starts
    assert plan["listen"]["expect"] == len(WORKERS)  # and it ends as soon as every worker came
