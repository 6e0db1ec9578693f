"""`status`: the health of every node, the hub and the git server, printed."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

from sparklab.commands import inspect, node_exec
from sparklab.host import engine_answers
from sparklab.inventory import inventory_path
from sparklab.labgit import git_server_status
from sparklab.labhub import hub_status
from sparklab.layout import DEFAULT_NODES, KEY, KNOWN_HOSTS, LINK_NETDEVS, MAX_NODES, NODES_ENV, REPO, Node, lab_nodes, node_count
from sparklab.nodes import check_ssh, existing_nodes


def node_health(node: Node, lab: list[Node]) -> tuple[bool, list[str]]:
    """(healthy, report lines) of one node."""
    info = inspect("container", node.name)
    if info is None or not info["State"]["Running"]:
        return False, [f"{node.name}: container {'missing' if info is None else 'stopped'}"]
    checks = []
    systemd = node_exec(node.name, "systemctl is-system-running", check=False).stdout.strip()
    checks.append(("systemd", systemd, systemd == "running"))
    ver = node_exec(node.name, "docker info --format '{{.ServerVersion}} {{.Driver}}'", user="spark", check=False, timeout=30)
    checks.append(("docker (as spark)", ver.stdout.strip() or ver.stderr.strip()[:60], ver.returncode == 0))
    for dev in LINK_NETDEVS.values():
        out = node_exec(node.name, f"ip -j addr show dev {dev}", check=False)
        ok, desc = False, "missing"
        if out.returncode == 0:
            d = json.loads(out.stdout)[0]
            addrs = [a["local"] for a in d.get("addr_info", []) if a.get("family") == "inet"]
            desc = f"{d['operstate']} mtu {d['mtu']} {','.join(addrs) or 'no IPv4'}"
            ok = d["operstate"] == "UP" and d["mtu"] == 9000 and bool(addrs)
        checks.append((dev, desc, ok))
    err = check_ssh(node) if KEY.exists() and KNOWN_HOSTS.exists() else "no lab key/known_hosts"
    checks.append(("ssh spark/admin", "ok" if err is None else err, err is None))
    if node.is_head:
        for worker in lab[1:]:
            proc = node_exec(node.name, f"ssh -o BatchMode=yes -o ConnectTimeout=5 {worker.link1} true", user="spark", check=False)
            checks.append((f"ssh spark -> {worker.name} ({worker.link1})", "ok" if proc.returncode == 0 else proc.stderr.strip()[:80], proc.returncode == 0))
    node_ok = all(c[2] for c in checks)
    lines = [f"{node.name}: {'healthy' if node_ok else 'UNHEALTHY'}"]
    lines += [f"  {'ok ' if ok else 'BAD'} {name}: {desc}" for name, desc, ok in checks]
    return node_ok, lines


def status(nodes: int | None = None) -> bool:
    """Print per-node health; True when every node of the lab is healthy. Checks `nodes`
    nodes (or $GLM53_LAB_NODES) when given, else the nodes that exist."""
    if not engine_answers():
        print("controller: no Docker engine answers (run `make lab-up`)")
        return False
    existing = existing_nodes()
    if nodes is not None or os.environ.get(NODES_ENV):
        count = node_count(nodes)
    else:
        count = max(existing) + 1 if existing else DEFAULT_NODES
    lab = lab_nodes(count)
    with ThreadPoolExecutor(max_workers=MAX_NODES) as pool:
        results = list(pool.map(lambda n: node_health(n, lab), lab))
    healthy = True
    for node_ok, lines in results:
        healthy &= node_ok
        print("\n".join(lines))
    hub_ok, hub_line = hub_status()
    healthy &= hub_ok
    print(hub_line)
    git_ok, git_line = git_server_status()
    healthy &= git_ok
    print(git_line)
    for index, name in existing.items():
        if index >= count:
            print(f"{name}: extra node, not part of a {count}-node lab (`up --nodes {count}` removes it)")
            healthy = False
    print(f"{count}-node lab: {'healthy' if healthy else 'UNHEALTHY'}; inventory: {inventory_path(count).relative_to(REPO)}")
    return healthy
