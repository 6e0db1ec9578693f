"""Labs 2, 3, ...: the lab again, in a network namespace of its own.

Inside it the lab has the same addresses as lab 1 (the nodes' 198.18.0.10, the hub and the
git daemon at 198.18.0.1) because nothing of lab 1's is there: its own Docker engine
(its own bridges, iptables and containers, so the same node and network names) runs in
it, and so do the hub, the git daemon and every test process that talks to that lab. A
veth pair with NAT on the controller gives it the way out that lab 1 has (the Debian
archive for debootstrap and apt in the nodes), on a /30 of 198.18.254.0/24 per lab.

`spark_lab.py --lab N <command>` makes sure of the namespace and uplink (root, in the
controller's own namespace), then runs the command inside it with GLM53_LAB_ID=N and
DOCKER_HOST set to that lab's engine (`enter`).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from sparklab.commands import LabError, run
from sparklab.layout import LAB_ID_ENV, MAX_LABS, engine_host, state_dir

NETNS_DIR = Path("/run/netns")


def names(number: int) -> dict[str, str]:
    """The namespace, its veth ends and the /30 it uses (host .1, namespace .2) for lab `number`."""
    base = 4 * number
    return {
        "netns": f"glm53-lab-{number}",
        "host_if": f"glm53l{number}h",
        "ns_if": f"glm53l{number}n",
        "host_ip": f"198.18.254.{base + 1}",
        "ns_ip": f"198.18.254.{base + 2}",
        "subnet": f"198.18.254.{base}/30",
    }


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def inside(number: int) -> bool:
    """Whether this process already runs in lab `number`'s namespace."""
    ns = _inode(str(NETNS_DIR / names(number)["netns"]))
    return ns is not None and ns == _inode("/proc/self/ns/net")


def same_netns(pid: int) -> bool:
    """Whether process `pid` shares this process's network namespace (a daemon elsewhere
    holds none of our addresses, whatever its command line says)."""
    theirs = _inode(f"/proc/{pid}/ns/net")
    return theirs is not None and theirs == _inode("/proc/self/ns/net")


def _iptables(*rule: str) -> None:
    """Add `rule` (-t table CHAIN ...) once: checked with -C first."""
    table, chain, spec = rule[:2], rule[2], rule[3:]
    if run(["iptables", "-w", *table, "-C", chain, *spec], check=False).returncode != 0:
        run(["iptables", "-w", *table, "-I", chain, "1", *spec])


def ensure_netns(number: int) -> list[str]:
    """Lab `number`'s namespace with loopback up and its uplink; what had to be made."""
    if not 2 <= number <= MAX_LABS:
        raise LabError(f"lab {number}: only labs 2 to {MAX_LABS} have a namespace of their own")
    if os.geteuid() != 0:
        raise LabError(f"lab {number} runs in a network namespace of its own: only root can make it")
    n = names(number)
    made = []
    if not (NETNS_DIR / n["netns"]).exists():
        run(["ip", "netns", "add", n["netns"]])
        made.append(f"network namespace {n['netns']}")
    run(["ip", "-n", n["netns"], "link", "set", "lo", "up"])
    # A host end whose peer is not in the namespace (the namespace was deleted and made again
    # while something still held the old one) is an uplink to nowhere: make the pair again.
    host_end = run(["ip", "link", "show", n["host_if"]], check=False).returncode == 0
    if host_end and run(["ip", "-n", n["netns"], "link", "show", n["ns_if"]], check=False).returncode != 0:
        run(["ip", "link", "del", n["host_if"]])
        host_end = False
    if not host_end:
        run(["ip", "link", "add", n["host_if"], "type", "veth", "peer", "name", n["ns_if"], "netns", n["netns"]])
        made.append(f"uplink {n['host_if']} <-> {n['ns_if']}")
    run(["ip", "addr", "replace", f"{n['host_ip']}/30", "dev", n["host_if"]])
    run(["ip", "link", "set", n["host_if"], "up"])
    run(["ip", "-n", n["netns"], "addr", "replace", f"{n['ns_ip']}/30", "dev", n["ns_if"]])
    run(["ip", "-n", n["netns"], "link", "set", n["ns_if"], "up"])
    run(["ip", "-n", n["netns"], "route", "replace", "default", "via", n["host_ip"]])
    run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
    # Out through the controller's own route; Docker's FORWARD policy is DROP, so allow it.
    _iptables("-t", "nat", "POSTROUTING", "-s", n["subnet"], "!", "-o", n["host_if"], "-j", "MASQUERADE")
    _iptables("-t", "filter", "FORWARD", "-i", n["host_if"], "-j", "ACCEPT")
    _iptables("-t", "filter", "FORWARD", "-o", n["host_if"], "-m", "conntrack", "--ctstate",
              "RELATED,ESTABLISHED", "-j", "ACCEPT")
    return made


def enter(number: int, argv: list[str]) -> None:
    """Replace this process with `argv` run in lab `number`: its namespace and engine."""
    env = dict(os.environ, **{LAB_ID_ENV: str(number)})
    if number == 1:
        env.pop("DOCKER_HOST", None)
        os.execvpe(argv[0], argv, env)
    made = ensure_netns(number)
    if made:
        print(f"[lab] lab {number}: made " + ", ".join(made), file=sys.stderr, flush=True)
    env["DOCKER_HOST"] = engine_host(number)
    # A HOME of its own: what the controller keeps there is per lab, since the addresses are
    # the same - above all ssh's ControlPersist sockets (~/.ansible/cp, named by host, port
    # and user), which would carry lab 1's Ansible to lab N's nodes, and the preflight
    # reports (~/.cache/dgx_spark.glm53).
    home = state_dir(number) / "home"
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    nsenter = shutil.which("nsenter")
    if not nsenter:
        raise LabError("nsenter (util-linux) is missing: lab/host_tools.py install")
    # nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup tree dockerd needs.
    os.execve(nsenter, [nsenter, f"--net={NETNS_DIR / names(number)['netns']}", "--", *argv], env)


def remove_netns(number: int) -> list[str]:
    """Remove lab `number`'s uplink and namespace (its engine must be stopped first)."""
    n = names(number)
    removed = []
    if run(["ip", "link", "show", n["host_if"]], check=False).returncode == 0:
        run(["ip", "link", "del", n["host_if"]])
        removed.append(f"uplink {n['host_if']}")
    for rule in (("-t", "nat", "POSTROUTING", "-s", n["subnet"], "!", "-o", n["host_if"], "-j", "MASQUERADE"),
                 ("-t", "filter", "FORWARD", "-i", n["host_if"], "-j", "ACCEPT"),
                 ("-t", "filter", "FORWARD", "-o", n["host_if"], "-m", "conntrack", "--ctstate",
                  "RELATED,ESTABLISHED", "-j", "ACCEPT")):
        while run(["iptables", "-w", *rule[:2], "-D", *rule[2:]], check=False).returncode == 0:
            pass
    if (NETNS_DIR / n["netns"]).exists():
        run(["ip", "netns", "del", n["netns"]])
        removed.append(f"network namespace {n['netns']}")
    return removed
