#!/usr/bin/env python
"""The Spark lab: two simulated DGX Sparks (containers running systemd, sshd and
their own Docker engine) joined by two CX7-like links. See lab/README.md.

    python lab/spark_lab.py up        # create or repair; idempotent
    python lab/spark_lab.py status    # per-node health, exit 1 if unhealthy
    python lab/spark_lab.py down      # remove our containers, networks, volumes

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
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass
class Node:
    name: str
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


NODES = [
    Node("spark-head", "198.18.0.10", "198.18.1.10", "198.18.2.10", "198.19.0.1/24", "198.19.64.0/18"),
    Node("spark-worker", "198.18.0.11", "198.18.1.11", "198.18.2.11", "198.19.1.1/24", "198.19.128.0/18"),
]
HEAD, WORKER = NODES
LINK_NETDEVS = {"glm53-lab-link1": "enp1s0f1np1", "glm53-lab-link2": "enP2p1s0f1np1"}
TOOLS = {  # command -> Debian package providing it
    "dockerd": "docker.io",
    "debootstrap": "debootstrap",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "iptables": "iptables",
    "tar": "tar",
}


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
    missing = sorted({pkg for cmd, pkg in TOOLS.items() if not shutil.which(cmd)})
    if not shutil.which("docker") and "docker.io" not in missing:
        missing.append("docker.io")
    if not missing:
        return
    if os.geteuid() != 0:
        raise LabError(f"missing {', '.join(missing)}; install them (apt-get install {' '.join(missing)}) or run as root")
    log(f"installing {' '.join(missing)} with apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # Another apt run may hold the lock on a shared machine: wait rather than fail.
    lock = ["-o", "DPkg::Lock::Timeout=600"]
    run(["apt-get", *lock, "update", "-qq"], env=env, timeout=900)
    run(["apt-get", *lock, "install", "-y", "-qq", "--no-install-recommends", *missing], env=env, timeout=1800)
    changes.append("installed " + " ".join(missing))


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
            for node in NODES:
                docker("rm", "-f", node.name, check=False)
            docker("network", "rm", name)
        args = ["network", "create", "--driver", "bridge", "--label", LABEL, "--subnet", subnet, "--gateway", gateway]
        # Readable host-side bridge names for debugging (max 15 chars).
        args += ["-o", f"com.docker.network.bridge.name={name.replace('glm53-lab-', 'glm53lab-')}"]
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


# -------------------------------------------------------------------------- nodes


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


def create_node(node: Node, image: str) -> None:
    run_args = [
        "create", "--name", node.name, "--hostname", node.name,
        "--label", LABEL, "--label", f"glm53-lab.image={image}",
        "--network", "glm53-lab-mgmt", "--ip", node.mgmt,
        # Names resolve to management addresses, as a site's DNS would.
        "--add-host", f"{HEAD.name}:{HEAD.mgmt}", "--add-host", f"{WORKER.name}:{WORKER.mgmt}",
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
        path = Path(tmp) / "daemon.json"
        path.write_text(daemon_json(node))
        docker("cp", str(path), f"{node.name}:/etc/docker/daemon.json")
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


def ensure_node(node: Node, image: str, changes: list[str]) -> None:
    info = inspect("container", node.name)
    if info is not None and (info["Config"]["Labels"] or {}).get("glm53-lab.image") != image:
        log(f"{node.name}: image changed, recreating the container (its Docker volume is kept)")
        docker("rm", "-f", node.name)
        create_node(node, image)
        changes.append(f"recreated {node.name} on {image}")
    elif info is None:
        log(f"{node.name}: creating")
        create_node(node, image)
        changes.append(f"created {node.name}")
    else:
        nets = info["NetworkSettings"]["Networks"]
        want = {"glm53-lab-mgmt": node.mgmt, "glm53-lab-link1": node.link1, "glm53-lab-link2": node.link2}
        # The static address each attachment was created with (kept while stopped).
        wrong = [n for n, ip in want.items() if ((nets.get(n) or {}).get("IPAMConfig") or {}).get("IPv4Address") != ip]
        if wrong:
            log(f"{node.name}: network attachments are wrong, recreating it")
            docker("rm", "-f", node.name)
            create_node(node, image)
            changes.append(f"recreated {node.name} (networks)")
        elif not info["State"]["Running"]:
            log(f"{node.name}: starting")
            docker("start", node.name)
            changes.append(f"started {node.name}")
    wait_booted(node)
    renamed = node_exec(node.name, "/usr/local/sbin/glm53-lab-netnames").stdout.strip()
    if renamed:
        changes.append(f"{node.name}: {renamed}")


def write_if_changed(node: str, path: str, content: str, owner: str, mode: str) -> bool:
    current = node_exec(node, f"cat {path} 2>/dev/null || true").stdout
    if current == content:
        return False
    node_exec(node, f"install -m {mode} -o {owner} -g {owner} /dev/stdin {path}", input=content)
    return True


def host_key(node: Node) -> str:
    return node_exec(node.name, "cut -d' ' -f1,2 /etc/ssh/ssh_host_ed25519_key.pub").stdout.strip()


def ensure_keys(changes: list[str]) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    if not KEY.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "glm53-lab-controller", "-f", str(KEY)])
        changes.append(f"generated {KEY.relative_to(REPO)}")
    controller_pub = KEY.with_suffix(".pub").read_text().strip()

    # spark@spark-head -> spark@spark-worker, passwordless and BatchMode, as the kit requires.
    head_key = "/home/spark/.ssh/id_ed25519"
    if node_exec(HEAD.name, f"test -f {head_key}", check=False).returncode != 0:
        node_exec(HEAD.name, f"ssh-keygen -q -t ed25519 -N '' -C spark@spark-head -f {head_key}", user="spark")
        changes.append("generated spark@spark-head key")
    head_pub = node_exec(HEAD.name, f"cat {head_key}.pub").stdout.strip()

    for node in NODES:
        for user in ("spark", "admin"):
            keys = [controller_pub] + ([head_pub] if node is WORKER and user == "spark" else [])
            if write_if_changed(node.name, f"/home/{user}/.ssh/authorized_keys", "\n".join(keys) + "\n", user, "0600"):
                changes.append(f"{node.name}: authorized_keys of {user}")

    # Host keys: every name and address a node is reached by, for the controller and the head.
    lines = []
    for node in NODES:
        lines.append(f"{node.name},{','.join(node.addresses)} {host_key(node)}")
    known = "\n".join(lines) + "\n"
    if not KNOWN_HOSTS.exists() or KNOWN_HOSTS.read_text() != known:
        KNOWN_HOSTS.write_text(known)
        changes.append(f"wrote {KNOWN_HOSTS.relative_to(REPO)}")
    worker_line = lines[1] + "\n"
    if write_if_changed(HEAD.name, "/home/spark/.ssh/known_hosts", worker_line, "spark", "0644"):
        changes.append("spark-head: known_hosts of spark")


def ensure_busybox(node: Node, changes: list[str]) -> None:
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
        changes.append(f"{node.name}: imported glm53-lab/busybox into its engine")


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


# ------------------------------------------------------------------------- public


@dataclass
class Lab:
    """What tests get from the `lab` fixture."""

    inventory: str = str(INVENTORY)
    key: str = str(KEY)
    known_hosts: str = str(KNOWN_HOSTS)
    nodes: dict = field(default_factory=lambda: {n.name: n for n in NODES})
    changes: list = field(default_factory=list)

    def exec(self, node: str, script: str, user: str = "root", check: bool = True, input=None):
        return node_exec(node, script, user=user, check=check, input=input)


@contextlib.contextmanager
def locked():
    """One lab operation at a time (make, pytest and molecule may overlap)."""
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def up() -> Lab:
    changes: list[str] = []
    t0 = time.time()
    with locked():
        ensure_tools(changes)
        ensure_engine(changes)
        image, base = ensure_images(changes)
        ensure_networks(changes)
        for node in NODES:
            ensure_node(node, image, changes)
        ensure_keys(changes)
        for node in NODES:
            ensure_busybox(node, changes)
        # Builds of older recipes, now that no node runs on them.
        drop_other_tags("glm53-lab/node", image)
        drop_other_tags("glm53-lab/node-base", base)
        problems = [p for p in (check_ssh(n) for n in NODES) if p]
        if problems:
            raise LabError("lab is up but SSH does not work:\n" + "\n".join(problems))
    if changes:
        log(f"changed {len(changes)}: " + "; ".join(changes))
    else:
        log("nothing to change: the lab was already up and healthy")
    log(f"ready in {time.time() - t0:.0f}s; inventory: {INVENTORY.relative_to(REPO)}  (ansible-playbook -i {INVENTORY.relative_to(REPO)} ...)")
    return Lab(changes=changes)


def down() -> None:
    with locked():
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
        if KNOWN_HOSTS.exists():
            KNOWN_HOSTS.unlink()  # host keys die with the containers
        log("removed " + (", ".join(removed) if removed else "nothing (no lab found)") + "; images kept as cache")


def status() -> bool:
    if not engine_answers():
        print("controller: no Docker engine answers (run `make lab-up`)")
        return False
    healthy = True
    for node in NODES:
        info = inspect("container", node.name)
        checks = []
        if info is None or not info["State"]["Running"]:
            print(f"{node.name}: container {'missing' if info is None else 'stopped'}")
            healthy = False
            continue
        systemd = node_exec(node.name, "systemctl is-system-running", check=False).stdout.strip()
        checks.append(("systemd", systemd, systemd == "running"))
        ver = node_exec(node.name, "docker info --format '{{.ServerVersion}} {{.Driver}}'", user="spark", check=False)
        checks.append(("docker (as spark)", ver.stdout.strip() or ver.stderr.strip()[:60], ver.returncode == 0))
        for net, dev in LINK_NETDEVS.items():
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
        node_ok = all(c[2] for c in checks)
        healthy &= node_ok
        print(f"{node.name}: {'healthy' if node_ok else 'UNHEALTHY'}")
        for name, desc, ok in checks:
            print(f"  {'ok ' if ok else 'BAD'} {name}: {desc}")
    return healthy


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("command", choices=["up", "down", "status"])
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up()
        elif args.command == "down":
            down()
        else:
            return 0 if status() else 1
    except LabError as exc:
        print(f"[lab] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
