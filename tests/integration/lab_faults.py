"""Fault injection on the Spark lab nodes, for end-to-end tests.

Each helper is a context manager that applies a fault on entry and undoes it on
exit; `undo()` may also be called early, and running it twice is harmless.

    with lab_faults.link_down("spark-worker", "enp1s0f1np1"):
        run_playbook("playbooks/preflight.yml", expect_success=False)

They act as root inside the node containers through `docker exec`, never through
the roles under test, so a fault cannot be "fixed" by the code that should detect it.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

# lab/ is not a package and never ships: put it on the path once; conftest.py and
# benchmarks/preflight.py import the lab tool the same way.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
import spark_lab  # noqa: E402  pylint: disable=wrong-import-position

HEAD = "spark-head"
WORKER = "spark-worker"
NODES = (HEAD, WORKER)
GPU_STATE = "/etc/glm53-lab/gpu.json"


def sh(node: str, script: str, check: bool = True, user: str = "root", input: str | None = None) -> subprocess.CompletedProcess:
    """Run a bash script in a node (the lab tool's own `docker exec`); raise with its output when `check` and it fails."""
    if node not in NODES:
        raise ValueError(f"unknown lab node {node!r}; expected one of {NODES}")
    return spark_lab.node_exec(node, script, user=user, check=check, input=input)


def _q(value) -> str:
    return shlex.quote(str(value))


class Fault:
    """Base: subclasses implement _apply() and _undo(); undo() runs _undo() once."""

    def __init__(self):
        self._applied = False

    def __enter__(self):
        self._apply()
        self._applied = True
        return self

    def __exit__(self, *exc):
        self.undo()
        return False

    def undo(self):
        if self._applied:
            self._applied = False
            self._undo()

    def _apply(self):
        raise NotImplementedError

    def _undo(self):
        raise NotImplementedError


class link_down(Fault):  # noqa: N801 - reads like the action it performs
    """`ip link set <netdev> down` on one node (ibdev2netdev then shows (Down),
    the simulated RDMA port goes to 1: DOWN)."""

    def __init__(self, node: str, netdev: str):
        super().__init__()
        self.node, self.netdev = node, netdev

    def _apply(self):
        sh(self.node, f"ip link set dev {_q(self.netdev)} down")

    def _undo(self):
        sh(self.node, f"ip link set dev {_q(self.netdev)} up")


class set_mtu(Fault):  # noqa: N801
    """Change a netdev's MTU; undo restores the MTU it had."""

    def __init__(self, node: str, netdev: str, mtu: int):
        super().__init__()
        self.node, self.netdev, self.mtu = node, netdev, int(mtu)
        self.original = None

    def _apply(self):
        self.original = int(sh(self.node, f"cat /sys/class/net/{_q(self.netdev)}/mtu").stdout.strip())
        sh(self.node, f"ip link set dev {_q(self.netdev)} mtu {self.mtu}")

    def _undo(self):
        sh(self.node, f"ip link set dev {_q(self.netdev)} mtu {self.original}")


def _ipv4_addresses(node: str, netdev: str) -> list[str]:
    out = sh(node, f"ip -j -4 addr show dev {_q(netdev)}").stdout
    info = json.loads(out or "[]")
    return [f"{a['local']}/{a['prefixlen']}" for dev in info for a in dev.get("addr_info", []) if a.get("family") == "inet"]


class move_link_address(Fault):  # noqa: N801
    """Take the IPv4 address(es) off `netdev`; with `to` set, put them on that
    interface instead (as /32, default `lo`), so the address still exists on the
    node but not on the link netdev. Undo puts them back with their prefix."""

    def __init__(self, node: str, netdev: str, to: str | None = "lo"):
        super().__init__()
        self.node, self.netdev, self.to = node, netdev, to
        self.addresses: list[str] = []

    def _apply(self):
        self.addresses = _ipv4_addresses(self.node, self.netdev)
        if not self.addresses:
            raise RuntimeError(f"{self.node}: {self.netdev} has no IPv4 address to move")
        for cidr in self.addresses:
            sh(self.node, f"ip addr del {_q(cidr)} dev {_q(self.netdev)}")
            if self.to:
                ip = cidr.split("/")[0]
                sh(self.node, f"ip addr replace {_q(ip + '/32')} dev {_q(self.to)}")

    def _undo(self):
        for cidr in self.addresses:
            ip = cidr.split("/")[0]
            if self.to:
                sh(self.node, f"ip addr del {_q(ip + '/32')} dev {_q(self.to)} 2>/dev/null || true")
            sh(self.node, f"ip addr replace {_q(cidr)} dev {_q(self.netdev)}")


def remove_link_address(node: str, netdev: str) -> move_link_address:
    """Take the IPv4 address(es) off `netdev` and put them nowhere."""
    return move_link_address(node, netdev, to=None)


class stop_dockerd(Fault):  # noqa: N801
    """Stop the node's Docker engine (socket too, or socket activation restarts it)."""

    def __init__(self, node: str):
        super().__init__()
        self.node = node

    def _apply(self):
        sh(self.node, "systemctl stop docker.socket docker.service")

    def _undo(self):
        sh(self.node, "systemctl start docker.socket docker.service")


class break_worker_ssh(Fault):  # noqa: N801
    """Remove the head's key from spark@spark-worker's authorized_keys, so
    `ssh -o BatchMode=yes spark-worker` from the head fails like a missing
    ssh-copy-id. Undo restores the file byte for byte."""

    KEYS = "/home/spark/.ssh/authorized_keys"
    SAVED = "/home/spark/.ssh/.authorized_keys.glm53-lab-fault"

    def __init__(self):
        super().__init__()

    def _apply(self):
        head_key = sh(HEAD, "cut -d' ' -f1,2 /home/spark/.ssh/id_ed25519.pub").stdout.strip()
        sh(
            WORKER,
            f"cp -p {self.KEYS} {self.SAVED} && grep -vF {_q(head_key)} {self.SAVED} > {self.KEYS} || true",
        )

    def _undo(self):
        sh(WORKER, f"if [ -f {self.SAVED} ]; then mv -f {self.SAVED} {self.KEYS}; fi")


class small_disk(Fault):  # noqa: N801
    """Mount a tmpfs of `free_bytes` at `path` on the node (owner and mode of the
    existing directory kept), so free space there is tiny without filling any real
    disk. Anything under `path` is hidden until undo unmounts it."""

    def __init__(self, node: str, path: str, free_bytes: int):
        super().__init__()
        self.node, self.path, self.free_bytes = node, path.rstrip("/") or "/", int(free_bytes)
        self.created: list[str] = []

    def _apply(self):
        # Missing directories are made with the owner of the nearest existing one
        # (e.g. ~/.cache/huggingface stays the deploy user's), and removed on undo.
        missing = []
        p = self.path
        while sh(self.node, f"test -d {_q(p)}", check=False).returncode != 0:
            missing.append(p)
            p = p.rsplit("/", 1)[0] or "/"
        owner = sh(self.node, f"stat -c '%u %g %a' {_q(p)}").stdout.split()
        for d in reversed(missing):
            sh(self.node, f"install -d -o {owner[0]} -g {owner[1]} {_q(d)}")
        self.created = missing
        size = max(self.free_bytes, 4096)
        sh(
            self.node,
            f"mount -t tmpfs -o size={size},uid={owner[0]},gid={owner[1]},mode={owner[2]} glm53-lab-small-disk {_q(self.path)}",
        )

    def _undo(self):
        p = _q(self.path)
        sh(self.node, f"if mountpoint -q {p}; then umount {p}; fi")
        for d in self.created:  # deepest first
            sh(self.node, f"rmdir {_q(d)} 2>/dev/null || true")


class _gpu_state(Fault):
    """Edit the node's simulated GPU state; undo restores the file as it was."""

    def __init__(self, node: str):
        super().__init__()
        self.node = node
        self.original = None

    def _edit(self, state: dict) -> dict:
        raise NotImplementedError

    def _apply(self):
        self.original = sh(self.node, f"cat {GPU_STATE}").stdout
        state = self._edit(json.loads(self.original))
        sh(self.node, f"cat > {GPU_STATE}.tmp && mv {GPU_STATE}.tmp {GPU_STATE}", input=json.dumps(state, indent=2) + "\n")

    def _undo(self):
        sh(self.node, f"cat > {GPU_STATE}.tmp && mv {GPU_STATE}.tmp {GPU_STATE}", input=self.original)


class foreign_cuda_process(_gpu_state):  # noqa: N801
    """Make `nvidia-smi --query-compute-apps` report a process we did not start."""

    def __init__(self, node: str, pid: int = 4242, name: str = "python3", used_memory_mib: int = 20480):
        super().__init__(node)
        self.app = {"pid": int(pid), "name": name, "used_memory_mib": int(used_memory_mib)}

    def _edit(self, state):
        state.setdefault("compute_apps", []).append(self.app)
        return state


class gpu_driver(_gpu_state):  # noqa: N801
    """Make `nvidia-smi` report another driver version (e.g. 590.44.01)."""

    def __init__(self, node: str, version: str):
        super().__init__(node)
        self.version = version

    def _edit(self, state):
        state["driver_version"] = self.version
        return state


class kill_container(Fault):  # noqa: N801
    """`docker kill` a container in the node's own engine; undo starts it again
    if it still exists and is not running (a restart policy may have done it)."""

    def __init__(self, node: str, name: str):
        super().__init__()
        self.node, self.name = node, name

    def _apply(self):
        sh(self.node, f"docker kill {_q(self.name)}")

    def _undo(self):
        n = _q(self.name)
        sh(
            self.node,
            f"state=$(docker inspect -f '{{{{.State.Running}}}}' {n} 2>/dev/null) || exit 0; "
            f"[ \"$state\" = true ] || docker start {n} >/dev/null",
        )
