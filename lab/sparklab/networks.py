"""The lab's Docker networks (management and two CX7-like links) and the iptables rules
that make the links pass traffic like a cable."""

from __future__ import annotations

from sparklab.commands import LabError, docker, inspect, log, run
from sparklab.layout import LABEL
from sparklab.nodes import existing_nodes


NETWORKS = {
    # name: (subnet, gateway, mtu, internal)
    "glm53-lab-mgmt": ("198.18.0.0/24", "198.18.0.1", 1500, False),
    # A direct cable has no way out: the links are internal (no NAT, no default route).
    "glm53-lab-link1": ("198.18.1.0/24", "198.18.1.1", 9000, True),
    "glm53-lab-link2": ("198.18.2.0/24", "198.18.2.1", 9000, True),
}


def network_ok(info: dict, subnet: str, mtu: int, internal: bool) -> bool:
    cfg = info.get("IPAM", {}).get("Config") or [{}]
    opts = info.get("Options") or {}
    return (
        cfg[0].get("Subnet") == subnet
        and int(opts.get("com.docker.network.driver.mtu", 1500)) == mtu
        and bool(info.get("Internal")) == internal
        and (info.get("Labels") or {}).get("glm53-lab") == "1"
    )


def ensure_networks(changes: list[str]) -> None:
    for name, (subnet, gateway, mtu, internal) in NETWORKS.items():
        info = inspect("network", name)
        if info is not None and network_ok(info, subnet, mtu, internal):
            continue
        if info is not None:
            if (info.get("Labels") or {}).get("glm53-lab") != "1":
                raise LabError(f"a Docker network named {name} exists but is not the lab's; remove or rename it")
            log(f"network {name} has the wrong settings: recreating it and its nodes")
            for existing in existing_nodes().values():
                docker("rm", "-f", existing, check=False)
            docker("network", "rm", name)
        args = ["network", "create", "--driver", "bridge", "--label", LABEL, "--subnet", subnet, "--gateway", gateway]
        # Readable host-side bridge names for debugging (max 15 chars).
        args += ["-o", f"com.docker.network.bridge.name={bridge_name(name)}"]
        args += ["-o", f"com.docker.network.driver.mtu={mtu}"]
        if internal:
            args.append("--internal")
        proc = docker(*args, name, check=False)
        if proc.returncode != 0:
            raise LabError(
                f"cannot create network {name} ({subnet}): {proc.stderr.strip()}\n"
                "Another Docker network or host route may overlap 198.18.0.0/15; remove it and rerun."
            )
        changes.append(f"created network {name}")


def bridge_name(network: str) -> str:
    """Readable host-side bridge name of a lab network (max 15 chars)."""
    return network.replace("glm53-lab-", "glm53lab-")


def cable_rules() -> list[list[str]]:
    """A cable passes any frame between its ends, but Docker drops bridged traffic of an
    internal network whose addresses are outside its subnet (link-local 169.254/16, say).
    Accepting same-bridge traffic first (DOCKER-USER) makes the links behave like a cable
    or a switch; nothing leaves the bridge, so they stay internal."""
    return [["DOCKER-USER", "-i", bridge_name(n), "-o", bridge_name(n), "-j", "ACCEPT"] for n, v in NETWORKS.items() if v[3]]


def ensure_cable_rules(changes: list[str]) -> None:
    if run(["iptables", "-w", "-n", "-L", "DOCKER-USER"], check=False).returncode != 0:
        return  # the engine manages no iptables rules, so none drops link traffic
    for rule in cable_rules():
        if run(["iptables", "-w", "-C", *rule], check=False).returncode != 0:
            run(["iptables", "-w", "-I", *rule])
            changes.append(f"iptables: {' '.join(rule)}")


def remove_cable_rules() -> None:
    for rule in cable_rules():
        while run(["iptables", "-w", "-C", *rule], check=False).returncode == 0:
            run(["iptables", "-w", "-D", *rule])
