"""Network namespaces a killed engine left behind, still holding a node's addresses.

When the controller's processes are killed (a CI job's end, a session's end), each node's
network namespace outlives its processes: the engine's exec root keeps it mounted, and its
interfaces stay on the lab bridges with the node's addresses. The restarted engine normally
removes those endpoints, but when it does not, two interfaces answer ARP for one address and
the empty one answers TCP with a reset: `ssh` says "Connection refused" while the node's sshd
runs. This removes every such interface; the node's live namespace is never touched."""

from __future__ import annotations

import os
from pathlib import Path

from sparklab.commands import inspect, run
from sparklab.layout import Node


def _addresses_in(ns: Path) -> dict[str, str]:
    """{interface: address} of the IPv4 addresses in namespace file `ns`."""
    proc = run(["nsenter", f"--net={ns}", "--", "ip", "-o", "-4", "addr", "show"], check=False, timeout=30)
    found = {}
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[2] == "inet":
            found[fields[1].split("@")[0]] = fields[3].split("/")[0]
    return found


def clear_stale_namespaces(lab: list[Node]) -> list[str]:
    """Delete each interface that holds a lab node's address in a namespace that is not that
    node's current one. Returns what it removed."""
    live, dirs = set(), set()
    for node in lab:
        info = inspect("container", node.name) or {}
        key = (info.get("NetworkSettings") or {}).get("SandboxKey")
        if key:
            live.add(os.path.realpath(key))
            dirs.add(Path(key).parent)
    wanted = {addr: node.name for node in lab for addr in node.addresses}
    removed = []
    for directory in sorted(dirs):
        for ns in sorted(directory.glob("*")):
            if os.path.realpath(ns) in live:
                continue
            for ifname, addr in _addresses_in(ns).items():
                if addr in wanted:
                    run(["nsenter", f"--net={ns}", "--", "ip", "link", "del", ifname], check=False, timeout=30)
                    # The controller's ARP entry still names the deleted interface's MAC.
                    run(["ip", "neigh", "flush", "to", addr], check=False, timeout=30)
                    removed.append(f"removed {addr} ({wanted[addr]}'s) from a stale network namespace {ns.name}")
    return removed
