#!/usr/bin/env python
"""The Spark lab: simulated DGX Sparks (containers running systemd, sshd and their
own Docker engine) joined by two CX7-like links. Two nodes by default (a head and a
worker); any number from 1 to 16, all on the same link subnets as through a switch.
See lab/README.md.

    python lab/spark_lab.py up [--nodes N]      # create, repair or resize to N; idempotent
    python lab/spark_lab.py status [--nodes N]  # per-node health, exit 1 if unhealthy
    python lab/spark_lab.py inventory [--nodes N]   # print the inventory path for N nodes
    python lab/spark_lab.py reset [--nodes N]   # nodes back to baseline, no deployment on them
    python lab/spark_lab.py down                # remove our containers, networks, volumes

N defaults to $GLM53_LAB_NODES, else 2. `up` also keeps the lab hub (lab/hub/hub.py, a
Hugging Face Hub simulator) running on the controller at http://198.18.0.1:8090, serves the
simulated TensorFold kit and profile repositories (lab/sim/) at git://198.18.0.1/ and
preloads the kit's base image glm53-lab/pytorch:26.07-py3 into every node's engine.

Everything this creates carries the label glm53-lab=1, and `down` removes only
that. Only the standard library and the docker CLI are used, so it runs before
`make setup` and on a brand-new machine (root: it apt-installs what is missing).
Importable: tests/integration/conftest.py calls up().
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baseline  # noqa: E402  pylint: disable=wrong-import-position
import host_tools  # noqa: E402  pylint: disable=wrong-import-position

LAB = Path(__file__).resolve().parent
REPO = LAB.parent
STATE = LAB / ".state"
KEY = STATE / "id_ed25519"
KNOWN_HOSTS = STATE / "known_hosts"
INVENTORY = LAB / "inventory"
IMAGE_DIR = LAB / "image"
LABEL = "glm53-lab=1"

# Controller engine, when we start one: its own bridge and pool inside 198.18.0.0/15,
# clear of the lab networks below and of the nodes' inner pools (198.19.0.0/16).
ENGINE_BIP = "198.18.250.1/24"
ENGINE_POOL = "base=198.18.128.0/18,size=24"

NETWORKS = {
    # name: (subnet, gateway, mtu, internal)
    "glm53-lab-mgmt": ("198.18.0.0/24", "198.18.0.1", 1500, False),
    # A direct cable has no way out: the links are internal (no NAT, no default route).
    "glm53-lab-link1": ("198.18.1.0/24", "198.18.1.1", 9000, True),
    "glm53-lab-link2": ("198.18.2.0/24", "198.18.2.1", 9000, True),
}


MAX_NODES = 16
DEFAULT_NODES = 2
NODES_ENV = "GLM53_LAB_NODES"


@dataclass
class Node:
    name: str
    index: int
    mgmt: str
    link1: str
    link2: str
    # The node's own Docker engine: distinct bridge and pool per node, inside 198.19.0.0/16.
    inner_bip: str
    inner_pool: str

    @property
    def volume(self) -> str:
        return f"glm53-lab-{self.name}-docker"

    @property
    def addresses(self) -> list[str]:
        return [self.mgmt, self.link1, self.link2]

    @property
    def is_head(self) -> bool:
        return self.index == 0


def node_name(index: int) -> str:
    """spark-head, spark-worker, spark-worker-2, spark-worker-3, ..."""
    return "spark-head" if index == 0 else "spark-worker" if index == 1 else f"spark-worker-{index}"


def node_index(name: str) -> int | None:
    """Index of a lab node name (inverse of node_name), None for anything else."""
    if name == "spark-head":
        return 0
    if name == "spark-worker":
        return 1
    m = re.fullmatch(r"spark-worker-([1-9][0-9]*)", name)
    return int(m.group(1)) if m and 2 <= int(m.group(1)) < MAX_NODES else None


def inner_network(index: int) -> tuple[str, str]:
    """(bip, address pool) of a node's inner engine. Head and worker keep the /18 pools
    they always had; later nodes get a /21 (8 networks of /24) from what is left, so no
    two engines overlap: bips in 198.19.0.0/20, pools 198.19.16.0-63.255 and 64.0-255.255."""
    bip = f"198.19.{index}.1/24"
    if index == 0:
        return bip, "198.19.64.0/18"
    if index == 1:
        return bip, "198.19.128.0/18"
    k = index - 2
    third = 192 + 8 * k if k < 8 else 16 + 8 * (k - 8)
    return bip, f"198.19.{third}.0/21"


def make_node(index: int) -> Node:
    host = 10 + index
    bip, pool = inner_network(index)
    return Node(node_name(index), index, f"198.18.0.{host}", f"198.18.1.{host}", f"198.18.2.{host}", bip, pool)


def lab_nodes(count: int) -> list[Node]:
    """The nodes of a lab of `count` nodes, head first."""
    return [make_node(i) for i in range(count)]


def node_count(nodes: int | str | None = None) -> int:
    """`nodes`, else $GLM53_LAB_NODES, else 2; checked to be 1..16."""
    source = "--nodes"
    if nodes is None:
        nodes, source = os.environ.get(NODES_ENV) or DEFAULT_NODES, NODES_ENV
    try:
        count = int(nodes)
    except (TypeError, ValueError):
        count = 0
    if not 1 <= count <= MAX_NODES:
        raise LabError(f"{source}: expected a node count from 1 to {MAX_NODES} (one head, the rest workers), found {nodes!r}")
    return count


NODES = lab_nodes(DEFAULT_NODES)  # the default two-node lab
HEAD, WORKER = NODES
LINK_NETDEVS = {"glm53-lab-link1": "enp1s0f1np1", "glm53-lab-link2": "enP2p1s0f1np1"}


class LabError(RuntimeError):
    """A failure with a message that says what to do."""


def log(msg: str) -> None:
    print(f"[lab] {msg}", flush=True)


def run(cmd, check=True, input=None, timeout=600, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    if check and proc.returncode != 0:
        raise LabError(f"`{' '.join(map(str, cmd))}` exited {proc.returncode}:\n{proc.stdout}{proc.stderr}".rstrip())
    return proc


def docker(*args, check=True, input=None, timeout=600) -> subprocess.CompletedProcess:
    return run(["docker", *args], check=check, input=input, timeout=timeout)


def node_exec(node: str, script: str, user: str = "root", check=True, input=None, timeout=120):
    """bash -c `script` inside a node container, as `user`."""
    args = ["exec", "-u", user, "-e", "LC_ALL=C"] + (["-i"] if input is not None else []) + [node, "bash", "-c", script]
    return docker(*args, check=check, input=input, timeout=timeout)


# --------------------------------------------------------------------------- host


def ensure_tools(changes: list[str]) -> None:
    """Every host tool of lab/host_tools.py (the one list `make setup` installs too)."""
    try:
        installed = host_tools.install(host_tools.missing(), log=log)
    except RuntimeError as err:
        raise LabError(str(err)) from None
    if installed:
        changes.append("installed " + " ".join(installed))


def engine_answers() -> bool:
    return docker("version", "--format", "{{.Server.Version}}", check=False, timeout=30).returncode == 0


def ensure_engine(changes: list[str]) -> None:
    if engine_answers():
        return
    if os.geteuid() != 0:
        raise LabError("no Docker engine answers and only root can start one; start dockerd, or run as root")
    STATE.mkdir(parents=True, exist_ok=True)
    logfile = STATE / "dockerd.log"
    log(f"no Docker engine answers: starting dockerd in the background (log: {logfile})")
    with open(logfile, "ab") as out:
        # Own session so it outlives make; its own bridge in 198.18/15, not 172.17/16.
        subprocess.Popen(
            ["dockerd", "--bip", ENGINE_BIP, "--default-address-pool", ENGINE_POOL],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.time() + 60
    while time.time() < deadline:
        if engine_answers():
            changes.append("started dockerd")
            return
        time.sleep(1)
    tail = logfile.read_text(errors="replace").splitlines()[-20:]
    raise LabError("dockerd did not answer within 60 s; last log lines:\n" + "\n".join(tail))


def debian_mirror() -> str:
    """The Debian mirror apt on this controller uses (the only one reachable)."""
    if os.environ.get("GLM53_LAB_MIRROR"):
        return os.environ["GLM53_LAB_MIRROR"]
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for src in sources:
        try:
            text = src.read_text()
        except OSError:
            continue
        # deb822: "URIs: http://.../debian" ; one-line: "deb http://.../debian bookworm main"
        for m in re.finditer(r"^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+/debian)/?\s*(?:$|\s)", text, re.M):
            return m.group(1)
    return "http://deb.debian.org/debian"


# ------------------------------------------------------------------------- images


def tree_hash(*paths: Path, extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for root in paths:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for f in files:
            h.update(str(f.relative_to(LAB)).encode() + b"\0")
            h.update(b"x" if os.access(f, os.X_OK) else b"-")
            h.update(f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False).returncode == 0


def drop_other_tags(repo: str, keep: str) -> None:
    """Old recipe builds: remove them unless a container still uses them."""
    out = docker("image", "ls", repo, "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    for tag in out:
        if tag != keep:
            docker("image", "rm", tag, check=False)


def ensure_images(changes: list[str]) -> tuple[str, str]:
    """(node tag, base tag), building what the current recipe lacks."""
    base_tag = "glm53-lab/node-base:" + tree_hash(IMAGE_DIR / "base")
    if not image_exists(base_tag):
        if os.geteuid() != 0:
            raise LabError("building the node base image needs root (debootstrap)")
        t0 = time.time()
        log(f"building {base_tag} (debootstrap, about a minute)")
        proc = run(["bash", str(IMAGE_DIR / "base" / "build.sh"), base_tag, debian_mirror()], check=False, timeout=1800)
        if proc.returncode != 0:
            raise LabError(f"base image build failed:\n{proc.stdout}{proc.stderr}")
        changes.append(f"built {base_tag} in {time.time() - t0:.0f}s")
    node_tag = "glm53-lab/node:" + tree_hash(IMAGE_DIR / "node", extra=base_tag)
    if not image_exists(node_tag):
        t0 = time.time()
        log(f"building {node_tag}")
        # Legacy builder: no buildx plugin is needed, and it is all the recipe uses.
        env = dict(os.environ, DOCKER_BUILDKIT="0")
        proc = run(
            ["docker", "build", "--quiet", "--build-arg", f"BASE={base_tag}", "-t", node_tag, str(IMAGE_DIR / "node")],
            check=False,
            env=env,
        )
        if proc.returncode != 0:
            raise LabError(f"node image build failed:\n{proc.stdout}{proc.stderr}")
        changes.append(f"built {node_tag} in {time.time() - t0:.0f}s")
    return node_tag, base_tag


# ----------------------------------------------------------------------- networks


def inspect(kind: str, name: str) -> dict | None:
    proc = docker(kind, "inspect", name, check=False)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)[0]


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


# -------------------------------------------------------------------------- nodes


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
    if info is not None and (info["Config"]["Labels"] or {}).get("glm53-lab.image") != image:
        log(f"{node.name}: image changed, recreating the container (its Docker volume is kept)")
        docker("rm", "-f", node.name)
        create_node(node, image, lab)
        changes.append(f"recreated {node.name} on {image}")
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


def check_ssh(node: Node) -> str | None:
    for user in ("spark", "admin"):
        deadline = time.time() + 20
        while True:
            proc = run(ssh_cmd(user, node, "true"), check=False, timeout=30)
            if proc.returncode == 0:
                break
            if time.time() > deadline:
                return f"ssh {user}@{node.mgmt} failed: {proc.stderr.strip()}"
            time.sleep(0.5)
    return None


# ------------------------------------------------------------------------ lab hub
# The Hugging Face Hub simulator the nodes download from (lab/hub/hub.py, lab/README.md):
# a background process of the controller's system python3 on the management gateway.

HUB_HOST, HUB_PORT = "198.18.0.1", 8090  # glm53-lab-mgmt's gateway: the controller, seen from the nodes
HUB_URL = f"http://{HUB_HOST}:{HUB_PORT}"  # = glm53_hf_endpoint in lab/inventory/group_vars/sparks.yml
HUB_SCRIPT = LAB / "hub" / "hub.py"
HUB_DATA = STATE / "hub"  # generated repos and requests.jsonl
HUB_PID = STATE / "hub.pid"
HUB_LOG = STATE / "hub.log"
HUB_BENCH_ENV = "GLM53_LAB_HUB_BENCH"  # =1: also serve glm53-lab/bench-1g (1 GiB)


def is_hub_process(pid) -> bool:
    """Whether `pid` runs `lab/hub/hub.py serve` (of this checkout of the lab or another)."""
    try:
        argv = Path(f"/proc/{int(pid)}/cmdline").read_bytes().split(b"\0")
    except (OSError, TypeError, ValueError):
        return False
    return b"serve" in argv and any(a.endswith(b"lab/hub/hub.py") for a in argv)


def hub_pid() -> int | None:
    """The pid in hub.pid, only while that process is still a `hub.py serve`."""
    try:
        pid = int(HUB_PID.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if is_hub_process(pid) else None


def hub_answer(timeout: float = 2.0) -> dict | None:
    """The hub's /_lab/status, or None when nothing answers."""
    try:
        with urllib.request.urlopen(HUB_URL + "/_lab/status", timeout=timeout) as resp:
            return json.load(resp)
    except (OSError, ValueError):
        return None


def hub_wanted() -> tuple[str, bool]:
    """(code version, bench repo wanted) a running hub must match, else `up` restarts it."""
    sys.path.insert(0, str(HUB_SCRIPT.parent))
    try:
        import hub as hub_module  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(str(HUB_SCRIPT.parent))
    return hub_module.code_version(), os.environ.get(HUB_BENCH_ENV) == "1"


def hub_matches(answer: dict | None) -> bool:
    """Whether a hub's status shows this checkout's code, data dir and options."""
    version, bench = hub_wanted()
    return (
        bool(answer)
        and answer.get("version") == version
        and answer.get("root") == str(HUB_DATA)
        and ("glm53-lab/bench-1g" in answer.get("repos", {})) == bench
    )


def stop_hub() -> bool:
    """Stop the hub we started (by its pid); True when one was running."""
    pid = hub_pid()
    HUB_PID.unlink(missing_ok=True)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 10
    while Path(f"/proc/{pid}").exists() and time.time() < deadline:
        time.sleep(0.1)
    if Path(f"/proc/{pid}").exists():
        os.kill(pid, signal.SIGKILL)
    return True


def ensure_hub(changes: list[str]) -> None:
    """The hub runs at HUB_URL with the current code: started if missing, restarted if dead,
    stuck or older; nothing happens when it is fine. Needs the mgmt network (its address)."""
    pid = hub_pid()
    answer = hub_answer()
    if pid is None and answer is not None:
        if not is_hub_process(answer.get("pid")):
            raise LabError(f"something that is not the lab hub answers at {HUB_URL}; stop it and rerun")
        # Started by another checkout of the lab (the lab is one per machine): take it over.
        pid = answer["pid"]
        HUB_PID.write_text(f"{pid}\n")
    if pid and hub_matches(answer):
        return
    reason = "not running" if pid is None else "other code, data dir or options" if answer else "not answering"
    stop_hub()
    HUB_DATA.mkdir(parents=True, exist_ok=True)
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    cmd = [python, str(HUB_SCRIPT), "serve", "--root", str(HUB_DATA), "--host", HUB_HOST, "--port", str(HUB_PORT)]
    if hub_wanted()[1]:
        cmd.append("--bench")
    log(f"starting the lab hub at {HUB_URL} ({reason}; log: {HUB_LOG})")
    with open(HUB_LOG, "ab") as out:
        # Own session, so it outlives make; the first start generates the test repos.
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    HUB_PID.write_text(f"{proc.pid}\n")
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            tail = HUB_LOG.read_text(errors="replace").splitlines()[-15:]
            raise LabError(f"the lab hub exited {proc.returncode}; last lines of {HUB_LOG}:\n" + "\n".join(tail))
        if hub_matches(hub_answer()):
            changes.append(f"{'started' if pid is None else 'restarted'} the lab hub at {HUB_URL} ({reason})")
            return
        time.sleep(0.5)
    raise LabError(f"the lab hub (pid {proc.pid}) did not answer at {HUB_URL} within 300 s; see {HUB_LOG}")


def hub_status() -> tuple[bool, str]:
    """(healthy, one report line) of the hub."""
    pid = hub_pid()
    answer = hub_answer()
    if pid is None and answer is not None and is_hub_process(answer.get("pid")):
        return False, f"hub: pid {answer['pid']} of another checkout (data {answer.get('root')}) at {HUB_URL} (`make lab-up` replaces it)"
    if pid is None:
        return False, f"hub: not running (`make lab-up` starts it at {HUB_URL})"
    if answer is None:
        return False, f"hub: pid {pid} does not answer at {HUB_URL} (log: {HUB_LOG}; `make lab-up` restarts it)"
    stale = "" if hub_matches(answer) else "; runs other code, data dir or options (`make lab-up` restarts it)"
    return not stale, f"hub: {'healthy' if not stale else 'STALE'}, pid {pid} at {HUB_URL}, {len(answer.get('repos', {}))} repos{stale}"


# ------------------------------------------------------------ TensorFold path
# What the tensorfold role deploys in the lab (lab/README.md, "TensorFold path"): the
# simulated kit and profile repositories (lab/sim/) as git repositories with fixed
# identities and dates, so identical content always gives the same commit shas; a
# read-only git daemon on the management gateway the nodes clone from; and the kit's
# base image, preloaded into every node's engine (no registry is reachable).

SIM = LAB / "sim"
GIT_ROOT = STATE / "git"  # kit.git, TensorFold.git, profile.git, commits.json
GIT_COMMITS = GIT_ROOT / "commits.json"
GIT_HOST, GIT_PORT = "198.18.0.1", 9418  # glm53-lab-mgmt's gateway: the controller, seen from the nodes
GIT_URL = f"git://{GIT_HOST}"
GIT_PID = STATE / "git-daemon.pid"
GIT_LOG = STATE / "git-daemon.log"
# Fixed author, committer and dates: a commit sha depends only on the content.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "glm53 lab", "GIT_AUTHOR_EMAIL": "lab@glm53-lab.invalid",
    "GIT_COMMITTER_NAME": "glm53 lab", "GIT_COMMITTER_EMAIL": "lab@glm53-lab.invalid",
    # No user or system config (signing, commit encoding) may change a sha.
    "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C",
}  # fmt: skip
GIT_DATES = {  # epoch seconds, UTC
    "tensorfold": 1788566400,  # 2026-09-05
    "kit": 1790769600,  # 2026-09-30 12:00 (the kit's W17 release)
    "profile-1": 1790856000,  # 2026-10-01 12:00
    "profile-2": 1790942400,  # 2026-10-02 12:00
}
# The second profile commit changes only the overlay: this line is appended to one file.
OVERLAY_REVISION = "# glm53 lab: profile commit 2 changes only the overlay (a different lp9001 image).\n"

PYTORCH_DIR = IMAGE_DIR / "pytorch"
PYTORCH_IMAGE = "glm53-lab/pytorch:26.07-py3"  # stands for nvcr.io/nvidia/pytorch:26.07-py3


def shown(path: Path) -> str:
    """A path as messages show it: relative to the checkout when inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def sim_source(name: str) -> Path:
    """lab/sim/<name>: the simulated engine `tensorfold` or its patched modules `profile-overlay`."""
    return SIM / name


def git(repo: Path, *args: str, input=None, env=None) -> str:
    full_env = dict(os.environ, **GIT_ENV, **(env or {}))
    return run(["git", f"--git-dir={repo}", *args], input=input, env=full_env, timeout=60).stdout.strip()


def source_files(root: Path, prefix: str = "") -> dict[str, tuple[str, Path]]:
    """{path in the repository: (mode, file)} of a source tree, without Python caches."""
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if "__pycache__" in rel.parts or path.suffix == ".pyc" or path.is_dir():
            continue
        if path.is_symlink() or not path.is_file():
            raise LabError(f"{path}: only regular files can go into a lab repository")
        files[prefix + rel.as_posix()] = ("100755" if os.access(path, os.X_OK) else "100644", path)
    return files


def write_commit(repo: Path, files: dict, message: str, date: int, parent: str | None = None, gitlinks=None) -> str:
    """The commit of exactly `files` ({path: (mode, Path or str content)}) and `gitlinks`
    ({path: commit}); its objects are written, no ref is moved. Same input, same sha."""
    on_disk = {path: (mode, src) for path, (mode, src) in files.items() if isinstance(src, Path)}
    listing = "".join(f"{src}\n" for mode, src in on_disk.values())
    shas = git(repo, "hash-object", "-w", "--no-filters", "--stdin-paths", input=listing).split()
    entries = [f"{mode} {sha}\t{path}" for (path, (mode, src)), sha in zip(on_disk.items(), shas)]
    for path, (mode, src) in files.items():
        if not isinstance(src, Path):
            entries.append(f"{mode} {git(repo, 'hash-object', '-w', '--no-filters', '--stdin', input=src)}\t{path}")
    entries += [f"160000 {sha}\t{path}" for path, sha in (gitlinks or {}).items()]
    with tempfile.TemporaryDirectory() as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "update-index", "--add", "--index-info", input="\n".join(entries) + "\n", env=index)
        tree = git(repo, "write-tree", env=index)
    stamp = {"GIT_AUTHOR_DATE": f"{date} +0000", "GIT_COMMITTER_DATE": f"{date} +0000"}
    return git(repo, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message, env=stamp)


def revised_overlay(files: dict, prefix: str) -> dict:
    """`files` with OVERLAY_REVISION appended to the first Python file under `prefix`."""
    path = min(p for p in files if p.startswith(prefix) and p.endswith(".py"))
    mode, src = files[path]
    text = src.read_text()
    return {**files, path: (mode, text + ("" if text.endswith("\n") else "\n") + OVERLAY_REVISION)}


def ensure_git_repos(changes: list[str]) -> dict:
    """kit.git (submodule vendor/TensorFold -> TensorFold.git), TensorFold.git and
    profile.git (two commits) at the commits of the current lab/sim sources; writes
    commits.json and returns what it holds."""
    repos = {name: GIT_ROOT / f"{name}.git" for name in ("TensorFold", "kit", "profile")}
    for repo in repos.values():
        if not (repo / "HEAD").exists():
            repo.parent.mkdir(parents=True, exist_ok=True)
            run(["git", "init", "-q", "--bare", "--initial-branch=main", str(repo)], env=dict(os.environ, **GIT_ENV))
        (repo / "git-daemon-export-ok").touch()
    engine = write_commit(
        repos["TensorFold"], source_files(sim_source("tensorfold")),
        "TensorFold: the lab's simulated engine (stdlib Python, CLI tensorfold)", GIT_DATES["tensorfold"],
    )  # fmt: skip
    kit = write_commit(
        repos["kit"], source_files(SIM / "kit"), "glm53-tensorfold-spark: lab simulator of the kit",
        GIT_DATES["kit"], gitlinks={"vendor/TensorFold": engine},
    )  # fmt: skip
    overlay = "tensorfold/patches/overlay/"
    profile_files = {**source_files(SIM / "profile"), **source_files(sim_source("profile-overlay"), prefix=overlay)}
    first = write_commit(
        repos["profile"], profile_files, "C8 profile and patches 9001-9004 (lab simulator)", GIT_DATES["profile-1"],
    )  # fmt: skip
    second = write_commit(
        repos["profile"], revised_overlay(profile_files, overlay), "patches: overlay revision (changes only the overlay)",
        GIT_DATES["profile-2"], parent=first,
    )  # fmt: skip
    for name, sha in (("TensorFold", engine), ("kit", kit), ("profile", second)):
        current = run(["git", f"--git-dir={repos[name]}", "rev-parse", "-q", "--verify", "refs/heads/main"], check=False)
        if current.stdout.strip() != sha:
            git(repos[name], "update-ref", "refs/heads/main", sha)
            changes.append(f"git: {name}.git main at {sha[:12]}")
    commits = {
        "server": GIT_URL,
        "kit": {"url": f"{GIT_URL}/kit.git", "commit": kit, "submodule": {"vendor/TensorFold": engine}},
        "tensorfold": {"url": f"{GIT_URL}/TensorFold.git", "commit": engine},
        "profile": {"url": f"{GIT_URL}/profile.git", "commit": second, "commits": [first, second]},
    }
    text = json.dumps(commits, indent=2) + "\n"
    if not GIT_COMMITS.is_file() or GIT_COMMITS.read_text() != text:
        GIT_COMMITS.write_text(text)
        changes.append(f"wrote {shown(GIT_COMMITS)}")
    return commits


def is_lab_git_daemon(pid, root: Path | None = GIT_ROOT) -> bool:
    """Whether `pid` is a lab git daemon on GIT_HOST (serving `root`; any checkout's if None)."""
    try:
        argv = Path(f"/proc/{int(pid)}/cmdline").read_bytes().split(b"\0")
    except (OSError, TypeError, ValueError):
        return False
    if not argv or not argv[0].endswith(b"git-daemon") or f"--listen={GIT_HOST}".encode() not in argv:
        return False
    base = next((a[len(b"--base-path="):].decode() for a in argv if a.startswith(b"--base-path=")), "")
    return base.endswith("lab/.state/git") if root is None else base == str(root)


def git_daemon_pid() -> int | None:
    try:
        pid = int(GIT_PID.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if is_lab_git_daemon(pid) else None


def git_served(commits: dict) -> bool:
    """The daemon answers and serves kit.git at the recorded commit."""
    proc = run(["git", "ls-remote", commits["kit"]["url"], "refs/heads/main"], check=False, timeout=15,
               env=dict(os.environ, **GIT_ENV))  # fmt: skip
    return proc.returncode == 0 and proc.stdout.split()[:1] == [commits["kit"]["commit"]]


def terminate(pid: int) -> None:
    os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 10
    while Path(f"/proc/{pid}").exists() and time.time() < deadline:
        time.sleep(0.1)
    if Path(f"/proc/{pid}").exists():
        os.kill(pid, signal.SIGKILL)


def stop_git_server() -> bool:
    """Stop this checkout's git daemon (by its pid file); True when one ran."""
    pid = git_daemon_pid()
    GIT_PID.unlink(missing_ok=True)
    if pid is None:
        return False
    terminate(pid)
    return True


def ensure_git_server(changes: list[str]) -> dict:
    """The repositories at the current sources, served read-only (git daemon: fetch only) at
    git://198.18.0.1/<name>.git; (re)started when dead or not serving them. Needs the mgmt
    network (its gateway address)."""
    commits = ensure_git_repos(changes)
    pid = git_daemon_pid()
    if pid is not None and git_served(commits):
        return commits
    stop_git_server()
    # The lab is one per machine: a daemon another checkout of the lab left on the address goes.
    for other in (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()):
        if is_lab_git_daemon(other, root=None):
            log(f"stopping the lab git daemon of another checkout (pid {other})")
            terminate(other)
    exec_path = run(["git", "--exec-path"]).stdout.strip()
    cmd = [
        f"{exec_path}/git-daemon", f"--listen={GIT_HOST}", f"--port={GIT_PORT}", "--reuseaddr",
        f"--base-path={GIT_ROOT}", "--informative-errors", "--verbose", str(GIT_ROOT),
    ]  # fmt: skip
    log(f"starting the lab git server at {GIT_URL} (log: {GIT_LOG})")
    with open(GIT_LOG, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=dict(os.environ, **GIT_ENV))  # fmt: skip
    GIT_PID.write_text(f"{proc.pid}\n")
    deadline = time.time() + 20
    while time.time() < deadline:
        if proc.poll() is not None:
            tail = GIT_LOG.read_text(errors="replace").splitlines()[-10:]
            raise LabError(f"git daemon exited {proc.returncode}; last lines of {GIT_LOG}:\n" + "\n".join(tail))
        if git_served(commits):
            changes.append(f"{'restarted' if pid else 'started'} the lab git server at {GIT_URL}")
            return commits
        time.sleep(0.2)
    raise LabError(f"the lab git daemon (pid {proc.pid}) does not serve {GIT_URL}/kit.git; see {GIT_LOG}")


def git_server_status() -> tuple[bool, str]:
    pid = git_daemon_pid()
    if pid is None:
        return False, f"git server: not running (`make lab-up` starts it at {GIT_URL})"
    try:
        commits = json.loads(GIT_COMMITS.read_text())
    except (OSError, ValueError):
        return False, f"git server: pid {pid}, but no {shown(GIT_COMMITS)} (`make lab-up`)"
    if not git_served(commits):
        return False, f"git server: pid {pid} does not serve {GIT_URL}/kit.git at {commits['kit']['commit'][:12]} (log: {GIT_LOG})"
    return True, f"git server: healthy, pid {pid} at {GIT_URL} (kit {commits['kit']['commit'][:12]}, profile {commits['profile']['commit'][:12]})"


def ensure_pytorch_image(base_tag: str, changes: list[str]) -> str:
    """PYTORCH_IMAGE on the controller, from the node base image and lab/image/pytorch;
    rebuilt when that recipe or the base changes. Returns its image ID."""
    recipe = tree_hash(PYTORCH_DIR, extra=base_tag)
    info = inspect("image", PYTORCH_IMAGE)
    if info is not None and (info["Config"].get("Labels") or {}).get("glm53-lab.recipe") == recipe:
        return info["Id"]
    t0 = time.time()
    log(f"building {PYTORCH_IMAGE} (apt: python3-pip, about a minute)")
    work = f"glm53-lab-pytorch-build-{recipe}"
    docker("rm", "-f", work, check=False)
    script = (PYTORCH_DIR / "setup.sh").read_text()
    proc = docker("run", "-i", "--name", work, base_tag, "sh", "-s", debian_mirror(), input=script, check=False, timeout=1200)
    if proc.returncode != 0:
        docker("rm", "-f", work, check=False)
        raise LabError(f"{PYTORCH_IMAGE}: setup failed:\n{proc.stdout}{proc.stderr}")
    # One flat layer: what the setup removed is not carried along underneath.
    changes_args = [
        "--change", "LABEL glm53-lab=1", "--change", f"LABEL glm53-lab.recipe={recipe}",
        "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--change", 'CMD ["python3"]',
    ]  # fmt: skip
    export = subprocess.Popen(["docker", "export", work], stdout=subprocess.PIPE)
    imported = subprocess.run(["docker", "import", *changes_args, "-", PYTORCH_IMAGE], stdin=export.stdout,
                              capture_output=True, timeout=600, check=False)  # fmt: skip
    export.stdout.close()
    export.wait(timeout=60)
    docker("rm", "-f", work, check=False)
    if export.returncode != 0 or imported.returncode != 0:
        raise LabError(f"{PYTORCH_IMAGE}: export/import failed: {imported.stderr.decode(errors='replace')}")
    if info is not None:
        docker("image", "rm", info["Id"], check=False)  # the previous build, now untagged
    changes.append(f"built {PYTORCH_IMAGE} in {time.time() - t0:.0f}s")
    return inspect("image", PYTORCH_IMAGE)["Id"]


def ensure_pytorch_in_node(node: Node, image_id: str) -> list[str]:
    """PYTORCH_IMAGE in the node's own engine, loaded when missing or another build."""
    have = node_exec(node.name, f"docker image inspect -f '{{{{.Id}}}}' {PYTORCH_IMAGE} 2>/dev/null || true").stdout.strip()
    if have == image_id:
        return []
    save = subprocess.Popen(["docker", "save", PYTORCH_IMAGE], stdout=subprocess.PIPE)
    load = subprocess.run(["docker", "exec", "-i", node.name, "docker", "load", "-q"], stdin=save.stdout,
                          capture_output=True, timeout=600, check=False)  # fmt: skip
    save.stdout.close()
    save.wait(timeout=60)
    if save.returncode != 0 or load.returncode != 0:
        raise LabError(f"{node.name}: loading {PYTORCH_IMAGE} failed: {load.stderr.decode(errors='replace')}")
    if have:
        node_exec(node.name, f"docker image rm {have}", check=False)  # the previous build, if unused
    return [f"{node.name}: loaded {PYTORCH_IMAGE} into its engine"]


# ---------------------------------------------------------------------- inventory


def inventory_path(count: int) -> Path:
    """lab/inventory (committed) for the two-node lab, lab/.state/inventory-<N> otherwise."""
    return INVENTORY if count == DEFAULT_NODES else STATE / f"inventory-{count}"


def inventory_files(lab: list[Node]) -> dict[str, str]:
    """{relative path: content} of the generated inventory of `lab` (group_vars is a link)."""
    count = len(lab)
    header = f"---\n# Generated by `lab/spark_lab.py up --nodes {count}`, rewritten by every `up`: do not edit.\n"
    workers = "".join(f"        {n.name}:\n" for n in lab[1:])
    files = {
        "hosts.yml": header
        + f"# A {count}-node Spark lab: the groups of lab/inventory/ (and its group_vars).\n"
        + "sparks:\n  children:\n    spark_head:\n      hosts:\n"
        + f"        {lab[0].name}:\n"
        + "    spark_workers:\n"
        + ("      hosts:\n" + workers if workers else "      hosts: {}\n"),
    }
    for n in lab:
        files[f"host_vars/{n.name}.yml"] = (
            header
            + "# Management address on glm53-lab-mgmt (the controller's SSH target).\n"
            + f"ansible_host: {n.mgmt}\n"
            + "# The node's IPv4 on enp1s0f1np1 (glm53-lab-link1); the head's is the kit's HEAD_IP.\n"
            + f"glm53_link_address: {n.link1}\n"
            + "# The lab key and known_hosts are in lab/.state, this inventory's parent.\n"
            + 'glm53_lab_state_dir: "{{ inventory_dir }}/.."\n'
        )
    return files


def ensure_inventory(lab: list[Node], changes: list[str]) -> Path:
    """The inventory of a `len(lab)`-node lab; generated ones of other sizes are removed."""
    path = inventory_path(len(lab))
    for stale in sorted(STATE.glob("inventory-*")):
        if stale != path:
            shutil.rmtree(stale)
            changes.append(f"removed {stale.relative_to(REPO)}")
    if path == INVENTORY:
        return path
    wrote = False
    for rel, content in inventory_files(lab).items():
        f = path / rel
        if not f.is_file() or f.read_text() != content:
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(content)
            wrote = True
    group_vars = path / "group_vars"
    target = os.path.relpath(INVENTORY / "group_vars", path)
    if not group_vars.is_symlink() or os.readlink(group_vars) != target:
        if group_vars.is_symlink() or group_vars.is_file():
            group_vars.unlink()
        elif group_vars.exists():
            shutil.rmtree(group_vars)
        group_vars.symlink_to(target)
        wrote = True
    if wrote:
        changes.append(f"wrote {path.relative_to(REPO)}")
    return path


# ------------------------------------------------------------------------- public


@dataclass
class Lab:
    """What `up()` returns and the `lab`/`lab4` fixtures yield."""

    inventory: str = str(INVENTORY)
    key: str = str(KEY)
    known_hosts: str = str(KNOWN_HOSTS)
    # name -> Node, head first, then spark-worker, spark-worker-2, ...
    nodes: dict = field(default_factory=lambda: {n.name: n for n in NODES})
    changes: list = field(default_factory=list)

    @property
    def head(self) -> Node:
        return next(iter(self.nodes.values()))

    @property
    def workers(self) -> list[Node]:
        return list(self.nodes.values())[1:]

    def exec(self, node: str, script: str, user: str = "root", check: bool = True, input=None):
        return node_exec(node, script, user=user, check=check, input=input)


def restore_baseline(lab: list[Node], deploy: bool = False) -> list[str]:
    """Bring every node of `lab` back to its baseline (lab/baseline.py): undo whatever fault
    a killed test left, and with `deploy` also what a deployment leaves. Returns what it
    restored, one entry per fix, [] when the nodes were already there."""
    shipped = IMAGE_DIR / "node" / "rootfs" / "etc" / "glm53-lab"
    gpu_json, links_json = (shipped / "gpu.json").read_text(), (shipped / "links.json").read_text()

    def restore(node: Node) -> list[str]:
        nets = inspect("container", node.name)["NetworkSettings"]["Networks"]
        links = [
            baseline.Link(netdev=LINK_NETDEVS[net], mac=nets[net]["MacAddress"], cidr=f"{getattr(node, attr)}/24")
            for net, attr in (("glm53-lab-link1", "link1"), ("glm53-lab-link2", "link2"))
        ]
        text = baseline.script(links=links, daemon_json=daemon_json(node), gpu_json=gpu_json,
                               links_json=links_json, deploy=deploy)
        proc = node_exec(node.name, text, check=False, timeout=300)
        if proc.returncode != 0:
            raise LabError(f"{node.name}: could not restore the baseline:\n{proc.stdout}{proc.stderr}".rstrip())
        return [f"{node.name}: {line[len('restored: '):]}" for line in proc.stdout.splitlines()
                if line.startswith("restored: ")]

    return per_node(restore, lab)


def reset(nodes: int | None = None) -> list[str]:
    """The baseline with no deployment (tests/integration: before and after each module):
    faults undone, engines emptied, contract and kit state removed. Returns what changed."""
    lab = lab_nodes(node_count(nodes))
    with locked():
        changes = restore_baseline(lab, deploy=True)
    log(f"reset {len(changes)}: " + "; ".join(changes) if changes else "reset: every node was at its baseline")
    return changes


@contextlib.contextmanager
def locked():
    """One lab operation at a time (make, pytest and molecule may overlap)."""
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def up(nodes: int | None = None) -> Lab:
    """Create, repair or resize the lab to exactly `nodes` nodes (default $GLM53_LAB_NODES,
    else 2) and return it. Idempotent: a rerun changes nothing and says so."""
    count = node_count(nodes)
    lab = lab_nodes(count)
    changes: list[str] = []
    t0 = time.time()
    with locked():
        ensure_tools(changes)
        ensure_engine(changes)
        image, base = ensure_images(changes)
        pytorch = ensure_pytorch_image(base, changes)
        ensure_networks(changes)
        ensure_cable_rules(changes)
        ensure_hub(changes)
        ensure_git_server(changes)
        remove_extra_nodes(count, changes)
        changes += per_node(lambda node: ensure_node(node, image, lab), lab)
        ensure_keys(lab, changes)
        # A run killed mid-fault leaves it in place: undo it (a deployment stays).
        changes += restore_baseline(lab)
        changes += per_node(ensure_busybox, lab)
        changes += per_node(lambda node: ensure_pytorch_in_node(node, pytorch), lab)
        inventory = ensure_inventory(lab, changes)
        # Builds of older recipes, now that no node runs on them.
        drop_other_tags("glm53-lab/node", image)
        drop_other_tags("glm53-lab/node-base", base)
        problems = [p for p in (check_ssh(n) for n in lab) if p]
        if problems:
            raise LabError("lab is up but SSH does not work:\n" + "\n".join(problems))
    if changes:
        log(f"changed {len(changes)}: " + "; ".join(changes))
    else:
        log(f"nothing to change: the {count}-node lab was already up and healthy")
    rel = inventory.relative_to(REPO)
    log(f"{count}-node lab ready in {time.time() - t0:.0f}s; inventory: {rel}  (ansible-playbook -i {rel} ...)")
    return Lab(inventory=str(inventory), nodes={n.name: n for n in lab}, changes=changes)


def down() -> None:
    with locked():
        if stop_hub():
            log(f"stopped the lab hub ({HUB_URL})")
        if stop_git_server():
            log(f"stopped the lab git server ({GIT_URL})")
        if not engine_answers():
            log("no Docker engine answers: nothing to remove")
            return
        removed = []
        for kind, ls in (
            ("container", ["ps", "-aq"]),
            ("network", ["network", "ls", "-q"]),
            ("volume", ["volume", "ls", "-q"]),
        ):
            ids = docker(*ls, "--filter", f"label={LABEL}").stdout.split()
            if ids:
                rm = ["rm", "-f"] if kind == "container" else [kind, "rm"]
                docker(*rm, *ids)
                removed.append(f"{len(ids)} {kind}(s)")
        remove_cable_rules()
        if KNOWN_HOSTS.exists():
            KNOWN_HOSTS.unlink()  # host keys die with the containers
        for generated in STATE.glob("inventory-*"):
            shutil.rmtree(generated)  # so do the nodes they list
        log("removed " + (", ".join(removed) if removed else "nothing (no lab found)") + "; images kept as cache")


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("command", choices=["up", "down", "reset", "status", "inventory"])
    parser.add_argument(
        "--nodes", type=int, default=None,
        help=f"lab size: one head and N-1 workers, 1 to {MAX_NODES} (default ${NODES_ENV}, else {DEFAULT_NODES})",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up(args.nodes)
        elif args.command == "down":
            down()
        elif args.command == "reset":
            reset(args.nodes)
        elif args.command == "inventory":
            print(inventory_path(node_count(args.nodes)).relative_to(REPO))
        else:
            return 0 if status(args.nodes) else 1
    except LabError as exc:
        print(f"[lab] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
