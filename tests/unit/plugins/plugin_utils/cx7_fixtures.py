"""Registered results shaped as the cx7_link role records them, for the controller-side checks.

``facts_results`` is what `register:` holds for the spark_node_facts task looped over the
nodes (``.results``); ``probe_results`` the same for link_probe; ``listen`` the head's
async_status result. Builders return fresh dicts each call, so tests mutate freely.
"""

import copy
import json

HEAD, WORKER = "spark-head", "spark-worker"
L1, L2 = "enp1s0f1np1", "enP2p1s0f1np1"
F0, F0B = "enp1s0f0np0", "enP2p1s0f0np0"
GIB = 1 << 30


def config(workers=(WORKER,), **over):
    nodes = {HEAD: {"netdev": "auto", "second_netdev": "auto", "address": "198.18.1.10", "sysfs_root": "/sys"}}
    for i, worker in enumerate(workers):
        nodes[worker] = {"netdev": "auto", "second_netdev": "auto", "address": "198.18.1.%d" % (11 + i),
                         "sysfs_root": "/sys"}
    out = {
        "head": HEAD, "workers": list(workers), "path": "tensorfold", "nodes": nodes, "master_port": 29551,
        "mtu": 0, "ssh_user": "spark", "ssh_timeout": 20, "port_probe_timeout": 5, "gpu_name": "NVIDIA GB10",
        "gpu_process_allow": [],
        "mem_free_gib": 100, "mem_available_gib": 100,
    }
    out.update(over)
    return out


def mlx5_gids(ipv4):
    """The RoCE v2 IPv4 GIDs as mlx5 fills the table: 0/1 are the link-local IPv6 pair, then a
    RoCE v1/v2 pair per IPv4 in address order, so the v2 GIDs are 3, 5, 7..."""
    return [{"ipv4": cidr.split("/")[0], "index": 3 + 2 * i} for i, cidr in enumerate(ipv4)]


def port(hca, netdev, ipv4, state="Up", mtu=9000, gids=None, sysfs_state="ACTIVE", carrier=1):
    """One port as ibdev2netdev_facts returns it (``gid_index``: the first IPv4's GID)."""
    if gids is None:
        gids = mlx5_gids(ipv4)
    return {
        "hca": hca, "port": 1, "netdev": netdev, "state": state, "sysfs_state": sysfs_state, "carrier": carrier,
        "operstate": "UP" if state == "Up" else "DOWN", "mtu": mtu, "ipv4": list(ipv4),
        "gid_index": gids[0]["index"] if gids else None, "roce_v2_ipv4_gids": gids,
    }


def ports(octet, cage="f1"):
    ip1, ip2 = "198.18.1.%d/24" % octet, "198.18.2.%d/24" % octet
    down = dict(state="Down", mtu=1500, sysfs_state="DOWN", carrier=0)
    if cage == "f1":
        return [port("rocep1s0f0", F0, [], **down), port("rocep1s0f1", L1, [ip1]),
                port("roceP2p1s0f0", F0B, [], **down), port("roceP2p1s0f1", L2, [ip2])]
    return [port("rocep1s0f0", F0, [ip1]), port("rocep1s0f1", L1, [], **down),
            port("roceP2p1s0f0", F0B, [ip2]), port("roceP2p1s0f1", L2, [], **down)]


def meminfo(free_gib=110, available_gib=115, extra="", cma_total_kb=0, cma_free_kb=0):
    return "MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\nCmaTotal: %d kB\nCmaFree: %d kB\n%s" % (
        128 * GIB // 1024, free_gib * GIB // 1024, available_gib * GIB // 1024, cma_total_kb, cma_free_kb, extra)


def cmd(stdout="", rc=0, stderr="", timed_out=False, command="nvidia-smi", timeout=10):
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "timed_out": timed_out, "command": command,
            "timeout": timeout}


def facts(node, octet, cage="f1"):
    disk = [{"name": "checkpoint", "path": "~/.cache/huggingface", "need": 165 * 10 ** 9, "dev": 1, "mount": "/",
             "free": 900 * 10 ** 9, "present": 0, "checked": "/home/spark"},
            {"name": "prepared", "path": "~/.cache/glm53/prepared", "need": 84 * 10 ** 9, "dev": 1, "mount": "/",
             "free": 900 * 10 ** 9, "present": 0, "checked": "/home/spark"}]
    return {
        "item": node, "changed": False,
        "link": {"source": "tool", "sysfs_root": "/sys", "error": None, "ports": ports(octet, cage)},
        "gpu": cmd("NVIDIA GB10, 580.95.05"),
        "apps": cmd(""),
        "app_containers": {}, "engine_error": None,
        "meminfo": meminfo(), "osrelease": "6.17.0-1008-nvidia", "cmdline": "BOOT_IMAGE=/vmlinuz ro quiet",
        "disk": disk,
    }


def facts_results(workers=(WORKER,), cage="f1"):
    out = [facts(HEAD, 10, cage)]
    for i, worker in enumerate(workers):
        out.append(facts(worker, 11 + i, cage))
    return out


def by_node(results, node):
    return [r for r in results if r.get("item") == node][0]


def port_of(results, node, netdev):
    return [p for p in by_node(results, node)["link"]["ports"] if p["netdev"] == netdev][0]


def readdress(port_entry, ipv4):
    """Give a port new addresses; the GID table follows them as the driver does."""
    port_entry["ipv4"] = list(ipv4)
    port_entry["roce_v2_ipv4_gids"] = mlx5_gids(ipv4)
    port_entry["gid_index"] = port_entry["roce_v2_ipv4_gids"][0]["index"] if ipv4 else None
    return port_entry


def probes_for(plan, ok=True):
    """What link_probe returns when every planned probe succeeds (or all fail)."""
    out = []
    for node, entry in plan["nodes"].items():
        result = {"item": node, "changed": False,
                  "pings": [dict(p, rc=0 if ok else 1, ok=ok, command="ping -M do -s %s -I %s %s" % (
                      p["size"], p["netdev"], p["target"]), error=None if ok else "100% packet loss",
                      timed_out=False) for p in entry["pings"]],
                  "connect": dict(entry["connect"], connected=ok, error=None if ok else "ETIMEDOUT")
                  if entry["connect"] else None,
                  "ssh": [dict(s, rc=0 if ok else 255, stdout="glm53-ssh-ok\n" if ok else "",
                               stderr="" if ok else "Permission denied (publickey).", timed_out=False)
                          for s in entry["ssh"]]}
        out.append(result)
    return out


def listen_for(plan, bound=True, accepted=True):
    if not plan["listen"]:
        return None
    return {"finished": 1, "changed": False,
            "listen": dict(plan["listen"], bound=bound, accepted=["198.18.1.11"] if accepted else [],
                           error=None if bound else "bind 198.18.1.10:29551: EADDRINUSE")}


def healthy(cfg=None, workers=(WORKER,), cage="f1"):
    """(config, facts_results, probe_results, listen) for a healthy cluster."""
    from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_preflight import probe_plan

    cfg = cfg or config(workers=workers)
    results = facts_results(workers=cfg["workers"], cage=cage)
    plan = probe_plan(cfg, results)
    return cfg, results, probes_for(plan), listen_for(plan)


def probe(cfg, results, ok=True):
    """(plan, probe_results, listen) the role records after the facts in ``results``."""
    from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_preflight import probe_plan

    plan = probe_plan(cfg, results)
    return plan, probes_for(plan, ok=ok), listen_for(plan)


def skipped_probe(node):
    """What `register:` holds for a node whose link_probe task was skipped (its facts failed)."""
    return {"item": node, "changed": False, "skipped": True, "skip_reason": "Conditional result was False",
            "false_condition": "__cx7_link_facts.results | selectattr('item', 'equalto', item)"}


def probe_of(probe_results, node):
    return [r for r in probe_results if r.get("item") == node][0]


def find(report, check, node=None, status=None, netdev=None):
    """The checks named ``check``, optionally on one node, with one status, on one link."""
    return [c for c in report["checks"] if c["check"] == check and (node is None or c["node"] == node)
            and (status is None or c["status"] == status) and (netdev is None or c["netdev"] == netdev)]


def statuses(report, check, node):
    return sorted(set(c["status"] for c in find(report, check, node)))


def clone(value):
    return copy.deepcopy(value)


def dumps(value):
    return json.dumps(value, indent=1, default=str)


UNEXPLAINED = "skipped without a failing cause"


def evaluate(cfg, results, probes=None, listen=None):
    from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_preflight import evaluate as _evaluate

    return _evaluate(cfg, results, probes, listen)
