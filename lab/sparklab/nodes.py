"""The node containers: create, recreate or start each one, its per-node files, the SSH
keys and known hosts between controller, head and workers, and its busybox image."""

from __future__ import annotations

import json
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sparklab.commands import LabError, docker, inspect, log, node_exec, run
from sparklab.layout import KEY, KNOWN_HOSTS, LABEL, MAX_NODES, NODE_MEMORY, REPO, STATE, Node, node_index


def existing_nodes() -> dict[int, str]:
    """{index: name} of the lab node containers that exist, running or not."""
    names = docker("ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.Names}}").stdout.split()
    found = {node_index(n): n for n in names}
    return {i: found[i] for i in sorted(i for i in found if i is not None)}


def remove_extra_nodes(count: int, changes: list[str]) -> None:
    """Workers beyond `count` go, with their Docker volume: `up --nodes N` converges to N."""
    for index, name in existing_nodes().items():
        if index >= count:
            log(f"{name}: not in a {count}-node lab, removing it and its volume")
            docker("rm", "-f", name)
            changes.append(f"removed {name}")
    volumes = docker("volume", "ls", "-q", "--filter", f"label={LABEL}").stdout.split()
    for vol in volumes:
        m = re.fullmatch(r"glm53-lab-(spark-[a-z0-9-]+)-docker", vol)
        index = node_index(m.group(1)) if m else None
        if index is not None and index >= count:
            docker("volume", "rm", vol)
            changes.append(f"removed volume {vol}")


def daemon_json(node: Node) -> str:
    # No nvidia runtime at start: the Docker runtime role has to add it.
    return json.dumps(
        {
            "bip": node.inner_bip,
            "default-address-pools": [{"base": node.inner_pool, "size": 24}],
            "storage-driver": "overlay2",
        },
        indent=2,
    ) + "\n"


def hosts_text(nodes: list[Node]) -> str:
    """Every lab node's name on its management address, as a site's DNS would resolve it.
    Kept in /etc/glm53-lab/hosts and merged into /etc/hosts by glm53-lab-hosts at boot and
    on every `up`, so a resize reaches the running nodes without recreating them."""
    return "".join(f"{n.mgmt} {n.name}\n" for n in nodes)


# The RDMA verbs devices (uverbs: char major 231; rdma_cm: 10:58) a rank container is given
# with --device /dev/infiniband, as on a Spark. The node makes their nodes at boot
# (glm53-lab-rdma-sysfs.service); its inner engine can grant them to a rank only when the
# node's own device cgroup allows them.
DEVICE_RULES = ("c 231:* rwm", "c 10:58 rwm")


def recreate_reason(info: dict, image: str) -> str | None:
    """Why an existing node container must be made again, or None: another image, or
    another memory limit than layout.NODE_MEMORY (not part of the image, so compared on
    its own; recreated rather than `docker update`d, so every node is made one way)."""
    if (info["Config"]["Labels"] or {}).get("glm53-lab.image") != image:
        return "image changed"
    host = info.get("HostConfig") or {}
    # MemorySwap -1: dockerd dropped the swap limit on a kernel without swap accounting, where
    # no node can have one (recreating would change nothing).
    if host.get("Memory") != NODE_MEMORY or host.get("MemorySwap") not in (NODE_MEMORY, -1):
        return f"memory limit {host.get('Memory') or 'none'} (swap {host.get('MemorySwap')}) is not {NODE_MEMORY}"
    if sorted(host.get("DeviceCgroupRules") or []) != sorted(DEVICE_RULES):
        return "device rules changed"
    return None


def create_node(node: Node, image: str, lab: list[Node]) -> None:
    run_args = [
        "create", "--name", node.name, "--hostname", node.name,
        "--label", LABEL, "--label", f"glm53-lab.image={image}",
        "--network", "glm53-lab-mgmt", "--ip", node.mgmt,
        # --privileged is refused here (CAP_SYS_RESOURCE is outside the bounding set);
        # this set runs systemd as PID 1 and an inner dockerd.
        "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
        "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
        "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--cgroupns=host",
        "--tmpfs", "/run", "--tmpfs", "/run/lock",
        # The node's own memory (layout.NODE_MEMORY), no swap beyond it: glm53-lab-gpud
        # reports it as the node's /proc/meminfo and the GPU's free memory.
        "--memory", str(NODE_MEMORY), "--memory-swap", str(NODE_MEMORY),
        *(arg for rule in DEVICE_RULES for arg in ("--device-cgroup-rule", rule)),
        # overlay2 cannot nest on the container's own overlay root: give it a volume.
        "-v", f"{node.volume}:/var/lib/docker",
        image,
    ]  # fmt: skip
    if inspect("volume", node.volume) is None:
        docker("volume", "create", "--label", LABEL, node.volume)
    docker(*run_args)
    for net, attr in (("glm53-lab-link1", "link1"), ("glm53-lab-link2", "link2")):
        docker("network", "connect", "--ip", getattr(node, attr), net, node.name)
    # Per-node files go in before first boot, so services start with them.
    with tempfile.TemporaryDirectory() as tmp:
        for name, content, dest in (
            ("daemon.json", daemon_json(node), "/etc/docker/daemon.json"),
            ("hosts", hosts_text(lab), "/etc/glm53-lab/hosts"),
        ):
            path = Path(tmp) / name
            path.write_text(content)
            path.chmod(0o644)
            docker("cp", str(path), f"{node.name}:{dest}")
    docker("start", node.name)


def wait_booted(node: Node, timeout: int = 120) -> None:
    deadline = time.time() + timeout
    state = ""
    while time.time() < deadline:
        proc = node_exec(node.name, "systemctl is-system-running", check=False)
        state = proc.stdout.strip()
        if state == "running":
            return
        if state == "degraded":
            failed = node_exec(node.name, "systemctl --failed --no-legend --plain", check=False).stdout
            raise LabError(f"{node.name}: systemd is degraded; failed units:\n{failed}")
        time.sleep(0.5)
    raise LabError(f"{node.name}: systemd did not finish booting in {timeout}s (state: {state or 'unknown'})")


def ensure_node(node: Node, image: str, lab: list[Node]) -> list[str]:
    """Create, recreate or start one node and wait for it; returns what changed."""
    changes: list[str] = []
    info = inspect("container", node.name)
    reason = recreate_reason(info, image) if info is not None else None
    if reason:
        log(f"{node.name}: {reason}, recreating the container (its Docker volume is kept)")
        docker("rm", "-f", node.name)
        create_node(node, image, lab)
        changes.append(f"recreated {node.name} on {image}" if reason == "image changed"
                       else f"recreated {node.name} ({reason})")
    elif info is None:
        log(f"{node.name}: creating")
        create_node(node, image, lab)
        changes.append(f"created {node.name}")
    else:
        nets = info["NetworkSettings"]["Networks"]
        want = {"glm53-lab-mgmt": node.mgmt, "glm53-lab-link1": node.link1, "glm53-lab-link2": node.link2}
        # The static address each attachment was created with (kept while stopped).
        wrong = [n for n, ip in want.items() if ((nets.get(n) or {}).get("IPAMConfig") or {}).get("IPv4Address") != ip]
        if wrong:
            log(f"{node.name}: network attachments are wrong, recreating it")
            docker("rm", "-f", node.name)
            create_node(node, image, lab)
            changes.append(f"recreated {node.name} (networks)")
        elif not info["State"]["Running"]:
            log(f"{node.name}: starting")
            docker("start", node.name)
            changes.append(f"started {node.name}")
    wait_booted(node)
    renamed = node_exec(node.name, "/usr/local/sbin/glm53-lab-netnames").stdout.strip()
    if renamed:
        changes.append(f"{node.name}: {renamed}")
    # Names of the lab's nodes: rewritten when the lab is resized.
    hosts_changed = write_if_changed(node.name, "/etc/glm53-lab/hosts", hosts_text(lab), "root", "0644")
    synced = node_exec(node.name, "/usr/local/sbin/glm53-lab-hosts").stdout.strip()
    if hosts_changed or synced:
        changes.append(f"{node.name}: lab names in /etc/hosts")
    return changes


def write_if_changed(node: str, path: str, content: str, owner: str, mode: str) -> bool:
    current = node_exec(node, f"cat {path} 2>/dev/null || true").stdout
    if current == content:
        return False
    node_exec(node, f"install -m {mode} -o {owner} -g {owner} /dev/stdin {path}", input=content)
    return True


def host_key(node: Node) -> str:
    return node_exec(node.name, "cut -d' ' -f1,2 /etc/ssh/ssh_host_ed25519_key.pub").stdout.strip()


def per_node(fn, lab: list[Node]) -> list[str]:
    """fn(node) -> [changes] on every node at once (node work is mostly waiting on docker
    exec and boots); changes come back in node order, and the first error is raised."""
    with ThreadPoolExecutor(max_workers=MAX_NODES) as pool:
        return [c for node_changes in pool.map(fn, lab) for c in node_changes]


def ensure_keys(lab: list[Node], changes: list[str]) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    if not KEY.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "glm53-lab-controller", "-f", str(KEY)])
        changes.append(f"generated {KEY.relative_to(REPO)}")
    controller_pub = KEY.with_suffix(".pub").read_text().strip()
    head = lab[0]

    # spark@spark-head -> spark@<every worker>, passwordless and BatchMode, as the kit requires.
    head_key = "/home/spark/.ssh/id_ed25519"
    if node_exec(head.name, f"test -f {head_key}", check=False).returncode != 0:
        node_exec(head.name, f"ssh-keygen -q -t ed25519 -N '' -C spark@spark-head -f {head_key}", user="spark")
        changes.append("generated spark@spark-head key")
    head_pub = node_exec(head.name, f"cat {head_key}.pub").stdout.strip()

    def authorize(node: Node) -> list[str]:
        done = []
        for user in ("spark", "admin"):
            keys = [controller_pub] + ([head_pub] if not node.is_head and user == "spark" else [])
            if write_if_changed(node.name, f"/home/{user}/.ssh/authorized_keys", "\n".join(keys) + "\n", user, "0600"):
                done.append(f"{node.name}: authorized_keys of {user}")
        return done

    changes += per_node(authorize, lab)

    # Host keys: every name and address a node is reached by, for the controller and the head.
    with ThreadPoolExecutor(max_workers=MAX_NODES) as pool:
        host_keys = list(pool.map(host_key, lab))
    lines = [f"{node.name},{','.join(node.addresses)} {key}" for node, key in zip(lab, host_keys)]
    known = "\n".join(lines) + "\n"
    if not KNOWN_HOSTS.exists() or KNOWN_HOSTS.read_text() != known:
        KNOWN_HOSTS.write_text(known)
        changes.append(f"wrote {KNOWN_HOSTS.relative_to(REPO)}")
    workers_known = "".join(line + "\n" for line in lines[1:])
    if write_if_changed(head.name, "/home/spark/.ssh/known_hosts", workers_known, "spark", "0644"):
        changes.append(f"{head.name}: known_hosts of spark")


def ensure_busybox(node: Node) -> list[str]:
    """A tiny image in the node's own engine for tests (`docker run --gpus all glm53-lab/busybox true`)."""
    script = r"""
set -e
for i in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
docker image inspect glm53-lab/busybox:latest >/dev/null 2>&1 && exit 0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/tmp"
cp /bin/busybox "$tmp/bin/busybox"
for app in $(/bin/busybox --list); do [ "$app" = busybox ] || ln -s busybox "$tmp/bin/$app"; done
tar -C "$tmp" -c . | docker import -c 'CMD ["/bin/sh"]' -c 'LABEL glm53-lab=1' - glm53-lab/busybox:latest >/dev/null
echo imported
"""
    if node_exec(node.name, script, timeout=180).stdout.strip():
        return [f"{node.name}: imported glm53-lab/busybox into its engine"]
    return []


def ssh_cmd(user: str, node: Node, *command: str) -> list[str]:
    return [
        "ssh", "-i", str(KEY), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
        "-o", f"UserKnownHostsFile={KNOWN_HOSTS}", "-o", "StrictHostKeyChecking=yes",
        "-o", "ConnectTimeout=5", f"{user}@{node.mgmt}", *command,
    ]  # fmt: skip


def ssh_diagnosis(node: Node) -> str:
    """What the node itself says of its sshd and its management address, for an SSH failure."""
    script = ("systemctl is-active ssh; ss -Htln 'sport = :22' | head -3; "
              f"ip -br addr | grep -F ' {node.mgmt}/' || echo 'no interface has {node.mgmt}'")
    inside = node_exec(node.name, script, check=False, timeout=30)
    neigh = run(["ip", "neigh", "show", node.mgmt], check=False, timeout=30).stdout.strip()
    return (f"  on {node.name}: " + " | ".join((inside.stdout + inside.stderr).split("\n")).strip(" |")
            + f"\n  the controller's neighbour entry: {neigh or 'none'}")


def check_ssh(node: Node) -> str | None:
    """None once spark and admin log in with the lab key, else what failed and why. An sshd
    that is not running is restarted once (a node booted from a killed lab's state)."""
    restarted = False
    for user in ("spark", "admin"):
        deadline = time.time() + 45
        while True:
            proc = run(ssh_cmd(user, node, "true"), check=False, timeout=30)
            if proc.returncode == 0:
                break
            if not restarted and "Connection refused" in proc.stderr:
                active = node_exec(node.name, "systemctl is-active ssh", check=False).stdout.strip()
                if active != "active":
                    log(f"{node.name}: sshd is {active or 'unknown'}, restarting it")
                    node_exec(node.name, "systemctl restart ssh", check=False)
                    restarted = True
            if time.time() > deadline:
                return f"ssh {user}@{node.mgmt} failed: {proc.stderr.strip()}\n{ssh_diagnosis(node)}"
            time.sleep(0.5)
    return None
