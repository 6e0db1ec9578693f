"""Fault injection on the Spark lab nodes, for end-to-end tests.

Each helper is a context manager that applies a fault on entry and undoes it on
exit; `undo()` may also be called early, and running it twice is harmless.

    with lab_faults.link_down("spark-worker", "enp1s0f1np1"):
        run_playbook("playbooks/preflight.yml", expect_success=False)

They act as root inside the node containers through `docker exec`, never through
the roles under test, so a fault cannot be "fixed" by the code that should detect it.
Every helper takes any lab node name (spark-head, spark-worker, spark-worker-<N>).
"""

from __future__ import annotations

import ipaddress
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

# lab/ is not a package and never ships: put it on the path once; conftest.py and
# benchmarks/preflight.py import the lab tool the same way.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
import spark_lab  # noqa: E402  pylint: disable=wrong-import-position

HEAD = "spark-head"
WORKER = "spark-worker"
NODES = (HEAD, WORKER)  # the default two-node lab; any lab node name is accepted below
GPU_STATE = "/etc/glm53-lab/gpu.json"
LINKS = "/etc/glm53-lab/links.json"
HANG = "/etc/glm53-lab/hang"
HANGABLE = ("nvidia-smi", "ibdev2netdev", "nvidia-ctk")


def sh(node: str, script: str, check: bool = True, user: str = "root", input: str | None = None) -> subprocess.CompletedProcess:
    """Run a bash script in a node (the lab tool's own `docker exec`); raise with its output when `check` and it fails."""
    if spark_lab.node_index(node) is None:
        raise ValueError(f"unknown lab node {node!r}; expected spark-head, spark-worker or spark-worker-<N>")
    return spark_lab.node_exec(node, script, user=user, check=check, input=input)


def _nodes(nodes) -> list[str]:
    """A node name or an iterable of them, as a list."""
    return [nodes] if isinstance(nodes, str) else list(nodes)


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
    """Remove the head's key from spark@<worker>'s authorized_keys, so
    `ssh -o BatchMode=yes <worker>` from the head fails like a missing
    ssh-copy-id. Undo restores the file byte for byte."""

    KEYS = "/home/spark/.ssh/authorized_keys"
    SAVED = "/home/spark/.ssh/.authorized_keys.glm53-lab-fault"

    def __init__(self, worker: str = WORKER):
        super().__init__()
        self.worker = worker

    def _apply(self):
        head_key = sh(HEAD, "cut -d' ' -f1,2 /home/spark/.ssh/id_ed25519.pub").stdout.strip()
        sh(
            self.worker,
            f"cp -p {self.KEYS} {self.SAVED} && grep -vF {_q(head_key)} {self.SAVED} > {self.KEYS} || true",
        )

    def _undo(self):
        sh(self.worker, f"if [ -f {self.SAVED} ]; then mv -f {self.SAVED} {self.KEYS}; fi")


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


class block_port(Fault):  # noqa: N801
    """A host firewall on `node` that silently drops inbound TCP to `port` (on `netdev`
    only when given, e.g. the head's link netdev), so a connect from a peer hangs
    until its timeout, as behind a real DROP rule. Undo deletes the rule."""

    def __init__(self, node: str, port: int, netdev: str | None = None):
        super().__init__()
        self.node = node
        self.rule = f"INPUT {'-i ' + _q(netdev) + ' ' if netdev else ''}-p tcp --dport {int(port)} -j DROP"

    def _apply(self):
        sh(self.node, f"iptables -w -I {self.rule}")

    def _undo(self):
        sh(self.node, f"while iptables -w -C {self.rule} 2>/dev/null; do iptables -w -D {self.rule}; done")


class hang_tool(Fault):  # noqa: N801
    """Make a simulated vendor tool (nvidia-smi, ibdev2netdev, nvidia-ctk) wedge: every
    call from now on never returns (a signal, e.g. from `timeout`, still ends it), like a
    driver call stuck in the kernel. Through the simulators' hang switch, a line per
    tool in /etc/glm53-lab/hang. Undo removes the line and ends the calls still hung."""

    def __init__(self, node: str, tool: str):
        super().__init__()
        if tool not in HANGABLE:
            raise ValueError(f"hang_tool: {tool!r} has no hang switch; expected one of {HANGABLE}")
        self.node, self.tool = node, tool

    def _apply(self):
        sh(self.node, f"echo {_q(self.tool)} >> {HANG} && chmod 0644 {HANG}")

    def _undo(self):
        sh(
            self.node,
            f"if [ -f {HANG} ]; then grep -vxF {_q(self.tool)} {HANG} > {HANG}.tmp || true; "
            f"if [ -s {HANG}.tmp ]; then mv -f {HANG}.tmp {HANG}; else rm -f {HANG} {HANG}.tmp; fi; fi; "
            # The simulator execs `sleep` under this name when it wedges.
            f"pkill -x -f {_q('glm53-lab-hung:' + self.tool + ' infinity')} || true",
        )


class freeze_dockerd(Fault):  # noqa: N801
    """SIGSTOP the node's dockerd and containerd: the socket still accepts connections,
    so `docker ps` (and the Docker modules) wedge instead of failing, as with a hung
    engine. Running containers keep running (their shims are not stopped). Undo SIGCONTs
    the same processes."""

    def __init__(self, node: str):
        super().__init__()
        self.node = node
        self.pids: list[str] = []

    def _apply(self):
        self.pids = sh(self.node, "pidof dockerd containerd").stdout.split()
        if not self.pids:
            raise RuntimeError(f"{self.node}: no dockerd/containerd process to freeze")
        sh(self.node, "kill -STOP " + " ".join(self.pids))

    def _undo(self):
        sh(self.node, "kill -CONT " + " ".join(self.pids) + " 2>/dev/null || true")


KHO_RELEASE = "7.0.0-1019-nvidia"
KHO_CMA_FREE_KIB = 10171136  # about 9.7 GiB, as the affected kernel reports it


def meminfo_with_cma(meminfo: str, cma_total_kib: int, cma_free_kib: int) -> str:
    """/proc/meminfo text with CmaTotal/CmaFree set, added where the kernel prints them
    (after FilePmdMapped, before Unaccepted/HugePages_*) when the live kernel has no CMA."""
    values = {"CmaTotal": int(cma_total_kib), "CmaFree": int(cma_free_kib)}
    lines = meminfo.splitlines()
    fmt = {k: f"{k + ':':<16}{v:>8} kB" for k, v in values.items()}
    out, seen = [], set()
    for line in lines:
        key = line.split(":", 1)[0]
        if key in values:
            out.append(fmt[key])
            seen.add(key)
        else:
            out.append(line)
    missing = [fmt[k] for k in values if k not in seen]
    if missing:
        at = next((i for i, line in enumerate(out) if line.startswith(("Unaccepted:", "HugePages_Total:"))), len(out))
        out[at:at] = missing
    return "\n".join(out) + "\n"


class kernel_kho(Fault):  # noqa: N801
    """The known-bad kernel state: 7.0.0-1019-nvidia with kexec handover (KHO) on, whose
    tell is CmaFree larger than CmaTotal in /proc/meminfo (about 9.7 GiB against 0).

    Bind-mounts files over /proc/sys/kernel/osrelease (the release), /proc/version (the
    release in it replaced) and /proc/meminfo (a snapshot of the live one with CmaTotal
    and CmaFree set, added when missing), and with `cmdline_kho_off` over /proc/cmdline
    (the live one plus ` kho=off`). Every process of the node sees them, `spark` over SSH
    included; the meminfo figures are frozen at the snapshot while the fault lasts.
    The uname(2) syscall (`uname -r`, Ansible's ansible_kernel fact) cannot be changed
    from inside a container and still reports the controller's kernel.
    Undo unmounts them and removes the copies."""

    DIR = "/run/glm53-lab/kernel_kho"

    def __init__(self, node: str, cmdline_kho_off: bool = False, release: str = KHO_RELEASE,
                 cma_total_kib: int = 0, cma_free_kib: int = KHO_CMA_FREE_KIB):
        super().__init__()
        self.node, self.cmdline_kho_off, self.release = node, bool(cmdline_kho_off), release
        self.cma_total_kib, self.cma_free_kib = int(cma_total_kib), int(cma_free_kib)
        self.mounted: list[str] = []

    def _put(self, name: str, content: str, target: str):
        path = f"{self.DIR}/{name}"
        sh(self.node, f"install -m 0444 /dev/stdin {path}", input=content)
        sh(self.node, f"mount --bind {path} {target}")
        self.mounted.append(target)

    def _apply(self):
        sh(self.node, f"install -d -m 0755 {self.DIR}")
        live_release = sh(self.node, "cat /proc/sys/kernel/osrelease").stdout.strip()
        self._put("osrelease", self.release + "\n", "/proc/sys/kernel/osrelease")
        version = sh(self.node, "cat /proc/version").stdout.replace(live_release, self.release)
        self._put("version", version, "/proc/version")
        meminfo = meminfo_with_cma(sh(self.node, "cat /proc/meminfo").stdout, self.cma_total_kib, self.cma_free_kib)
        self._put("meminfo", meminfo, "/proc/meminfo")
        if self.cmdline_kho_off:
            cmdline = sh(self.node, "cat /proc/cmdline").stdout.rstrip("\n") + " kho=off\n"
            self._put("cmdline", cmdline, "/proc/cmdline")

    def _undo(self):
        for target in reversed(self.mounted):
            sh(self.node, f"umount {target}")
        self.mounted = []
        sh(self.node, f"rm -rf {self.DIR}")


def _inet(node: str, netdev: str) -> list[dict]:
    """IPv4 addresses of `netdev` in the kernel's order (`ip addr` lists them so)."""
    info = json.loads(sh(node, f"ip -j -4 addr show dev {_q(netdev)}").stdout or "[]")
    return [a for dev in info for a in dev.get("addr_info", []) if a.get("family") == "inet"]


def _add_args(addr: dict) -> str:
    """`ip addr add` arguments that recreate an address as `ip -j addr` reported it."""
    args = f"{addr['local']}/{addr['prefixlen']}"
    if addr.get("broadcast"):
        args += f" broadcast {addr['broadcast']}"
    return args + f" scope {addr.get('scope', 'global')}"


def _set_inet(node: str, netdev: str, addrs: list[dict]):
    """Make `netdev` carry exactly `addrs`, in that order."""
    sh(node, f"ip -4 addr flush dev {_q(netdev)}")
    for a in addrs:
        sh(node, f"ip addr add {_add_args(a)} dev {_q(netdev)}")


def _link_local(address: str) -> dict:
    ip = ipaddress.ip_interface(address if "/" in address else address + "/16")
    if ip.ip not in ipaddress.ip_network("169.254.0.0/16") or ip.network.prefixlen != 16:
        raise ValueError(f"expected an IPv4 link-local address in 169.254.0.0/16, found {address!r}")
    # As IPv4LL (systemd-networkd, avahi-autoipd) adds it: scope link.
    return {"local": str(ip.ip), "prefixlen": 16, "broadcast": "169.254.255.255", "scope": "link"}


def _global(address: str) -> dict:
    ip = ipaddress.ip_interface(address)
    if "/" not in address or not ip.ip.is_private or ip.ip.is_link_local:
        raise ValueError(f"expected a private IPv4 with its prefix (e.g. 198.18.1.111/24), found {address!r}")
    return {"local": str(ip.ip), "prefixlen": ip.network.prefixlen,
            "broadcast": str(ip.network.broadcast_address), "scope": "global"}


class address_first(Fault):  # noqa: N801
    """Put another IPv4 (`address` with its prefix) on `netdev`, listed BEFORE the addresses
    it has, as a link event can leave a port: the netdev's first IPv4 is no longer the link
    address, and the RoCE v2 GID of the link address moves two entries on (the new address's
    v1 and v2 GIDs come first). Undo restores the original addresses in their original order."""

    parse = staticmethod(_global)

    def __init__(self, node: str, netdev: str, address: str):
        super().__init__()
        self.node, self.netdev, self.address = node, netdev, self.parse(address)
        self.original: list[dict] = []

    def _apply(self):
        self.original = _inet(self.node, self.netdev)
        _set_inet(self.node, self.netdev, [self.address] + self.original)

    def _undo(self):
        _set_inet(self.node, self.netdev, self.original)


class link_local_first(address_first):  # noqa: N801
    """Put a 169.254.x.y/16 link-local IPv4 on `netdev`, listed BEFORE its static
    address, as NVIDIA's older netplan (link-local: [ipv4]) leaves a CX7 port: a tool
    that takes the first IPv4 of the netdev gets the link-local one. Undo restores the
    original addresses in their original order."""

    parse = staticmethod(_link_local)

    def __init__(self, node: str, netdev: str, address: str = "169.254.10.10"):
        super().__init__(node, netdev, address)


def _gid_script(hca: str, address: str) -> str:
    gid = "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(int(o) for o in address.split("."))
    port = f"/opt/glm53-lab/sys/class/infiniband/{hca}/ports/1"
    return (f'for f in $(ls {port}/gids | sort -n); do '
            f'[ "$(cat {port}/gids/$f)" = "{gid}" ] && [ "$(cat {port}/gid_attrs/types/$f 2>/dev/null)" = "RoCE v2" ] '
            f'&& echo $f && exit 0; done; echo none')


def gid_index_in_sysfs(node: str, hca: str, *addresses: str):
    """The lowest RoCE v2 GID index embedding each address, read from the node's (simulated)
    RDMA sysfs tree with shell tools: an independent measurement, not the module's. The
    simulated table follows address changes on the kernel's events, a moment after them, so
    this waits until every address has a GID and two reads 0.6 s apart agree."""
    script = "; ".join("( %s )" % _gid_script(hca, a) for a in addresses)
    # A wait for the simulator, not a bound on its speed: generous.
    deadline = time.time() + 30
    previous = None
    while True:
        found = sh(node, script).stdout.split()
        if "none" not in found and found == previous:
            return found if len(addresses) > 1 else found[0]
        if time.time() >= deadline:
            raise AssertionError(f"{node}: RoCE v2 GIDs of {addresses} on {hca} did not settle: {found}")
        previous = found
        time.sleep(0.6)


def link_local_address(node: str, netdev: str) -> str:
    """The 169.254/16 address link_local_only gives `node` on `netdev` by default:
    169.254.<1 or 2 by link>.<10 + node index>, distinct per node, same /16."""
    link = 2 if netdev.startswith("enP2") else 1
    return f"169.254.{link}.{10 + spark_lab.node_index(node)}"


class link_local_only(Fault):  # noqa: N801
    """Replace every given node's IPv4 on `netdev` by a 169.254/16 link-local one
    (distinct per node, same /16; `addresses` {node: address} to choose them), as a port
    left to IPv4LL with no static address. Undo restores each node's original addresses
    in their original order."""

    def __init__(self, nodes, netdev: str, addresses: dict | None = None):
        super().__init__()
        self.nodes, self.netdev = _nodes(nodes), netdev
        chosen = addresses or {}
        self.addresses = {n: _link_local(chosen.get(n) or link_local_address(n, netdev)) for n in self.nodes}
        self.original: dict[str, list[dict]] = {}

    def _apply(self):
        for node in self.nodes:
            self.original[node] = _inet(node, self.netdev)
            _set_inet(node, self.netdev, [self.addresses[node]])

    def _undo(self):
        for node, addrs in self.original.items():
            _set_inet(node, self.netdev, addrs)


def swap_cages(links: dict) -> dict:
    """links.json with the cabling moved to the other function of each CX7: the f0
    pair takes the f1 pair's cable (and subnet) and the other way round."""
    out = json.loads(json.dumps(links))
    by_hca = {link["hca"]: link for link in out["links"]}
    for a, b in (("rocep1s0f0", "rocep1s0f1"), ("roceP2p1s0f0", "roceP2p1s0f1")):
        la, lb = by_hca[a], by_hca[b]
        for key in ("cabled", "subnet"):
            va, vb = la.pop(key, None), lb.pop(key, None)
            if vb is not None:
                la[key] = vb
            if va is not None:
                lb[key] = va
    return out


class cable_other_cage(Fault):  # noqa: N801
    """Cable the other QSFP cage on every given node: enp1s0f0np0 (HCA rocep1s0f0) and
    enP2p1s0f0np0 (roceP2p1s0f0) become the cabled, Up functions with the link
    addresses and MTU, and enp1s0f1np1/enP2p1s0f1np1 exist but are Down, without carrier
    or address. Done the way the lab wires a node: links.json records the cabling and
    glm53-lab-netnames renames the interfaces (so a node restart keeps it); the RDMA
    sysfs simulator follows within a second. Undo restores links.json byte for byte and
    the f1 cabling."""

    def __init__(self, nodes):
        super().__init__()
        self.nodes = _nodes(nodes)
        self.original: dict[str, str] = {}

    def _recable(self, node: str, links_text: str):
        sh(node, f"cat > {LINKS}.tmp && chmod 0644 {LINKS}.tmp && mv -f {LINKS}.tmp {LINKS}", input=links_text)
        sh(node, "/usr/local/sbin/glm53-lab-netnames")

    def _apply(self):
        for node in self.nodes:
            text = sh(node, f"cat {LINKS}").stdout
            self.original[node] = text
            self._recable(node, json.dumps(swap_cages(json.loads(text)), indent=2) + "\n")

    def _undo(self):
        for node, text in self.original.items():
            self._recable(node, text)


DAEMON_JSON = "/etc/docker/daemon.json"
HIDDEN = "/var/lib/glm53-lab/hidden"


def lab_daemon_json(node: str) -> str:
    """The daemon.json `lab-up` gives `node` (its inner bip and address pool, overlay2, no
    nvidia runtime): the state the Docker runtime role starts from on a fresh lab."""
    return spark_lab.daemon_json(spark_lab.make_node(spark_lab.node_index(node)))


def _docker_installed(node: str) -> bool:
    status = sh(node, "dpkg-query -W -f='${Status}' docker.io 2>/dev/null || true").stdout
    return status.strip() == "install ok installed"


def _restart_docker(node: str):
    """Restart the node's engine and wait until it answers, as `lab-up` leaves it. The unit's
    start rate limit (3 starts a minute) is reset first: tests restart it more often."""
    sh(node, "systemctl reset-failed docker.service docker.socket 2>/dev/null; systemctl restart docker.service && "
             "for i in $(seq 60); do docker info >/dev/null 2>&1 && exit 0; "
             "sleep 0.5; done; echo 'docker did not answer after a restart' >&2; exit 1")


class daemon_json(Fault):  # noqa: N801
    """Give the node's Docker engine this /etc/docker/daemon.json (a dict is written as
    JSON, a str as is) and restart it, so the running dockerd matches the file. Undo puts
    back the original bytes (or removes a file that did not exist) and restarts again."""

    def __init__(self, node: str, content):
        super().__init__()
        self.node = node
        self.content = content if isinstance(content, str) else json.dumps(content, indent=2) + "\n"
        self.original: str | None = None

    def _apply(self):
        proc = sh(self.node, f"cat {DAEMON_JSON}", check=False)
        self.original = proc.stdout if proc.returncode == 0 else None
        sh(self.node, f"install -D -m 0644 /dev/stdin {DAEMON_JSON}", input=self.content)
        if _docker_installed(self.node):
            _restart_docker(self.node)

    def _undo(self):
        if self.original is None:
            sh(self.node, f"rm -f {DAEMON_JSON}")
        else:
            sh(self.node, f"install -D -m 0644 /dev/stdin {DAEMON_JSON}", input=self.original)
        if _docker_installed(self.node):
            _restart_docker(self.node)


class remove_docker(Fault):  # noqa: N801
    """Remove Debian's docker.io from the node (`dpkg --remove`: its dependencies, the
    daemon config, the docker group and /var/lib/docker with its images stay, as after
    `apt-get remove docker.io`). Undo, when docker.io is still missing, installs it again
    with apt (from the node's apt cache when a run already fetched it) and waits for the
    engine to answer."""

    def __init__(self, node: str):
        super().__init__()
        self.node = node

    def _apply(self):
        if not _docker_installed(self.node):
            raise RuntimeError(f"{self.node}: docker.io is not installed, nothing to remove")
        sh(self.node, "DEBIAN_FRONTEND=noninteractive dpkg --remove docker.io >/dev/null")

    def _undo(self):
        if not _docker_installed(self.node):
            sh(self.node, "export DEBIAN_FRONTEND=noninteractive; "
                          "apt-get install -y -q --no-install-recommends docker.io >/dev/null 2>&1 || "
                          "{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends docker.io >/dev/null; }")
        sh(self.node, "systemctl enable --now docker.service >/dev/null 2>&1")
        _restart_docker(self.node)


class hide_command(Fault):  # noqa: N801
    """Move a command off the node's PATH (for example `nvidia-ctk`, or the `docker` CLI
    while dockerd keeps running) into /var/lib/glm53-lab/hidden. Undo moves it back."""

    def __init__(self, node: str, command: str):
        super().__init__()
        self.node, self.command = node, command
        self.path: str | None = None

    def _apply(self):
        self.path = sh(self.node, f"command -v {_q(self.command)}").stdout.strip()
        # The .path note lets `lab up` put it back after a killed run (lab/baseline.py).
        sh(self.node, f"install -d -m 0700 {HIDDEN} && printf %s {_q(self.path)} > {HIDDEN}/{_q(self.command)}.path && "
                      f"mv {_q(self.path)} {HIDDEN}/{_q(self.command)}")

    def _undo(self):
        sh(self.node, f"mv {HIDDEN}/{_q(self.command)} {_q(self.path)} && rm -f {HIDDEN}/{_q(self.command)}.path")


class leave_group(Fault):  # noqa: N801
    """Take `user` out of `group` (default spark out of docker). Undo adds it back."""

    def __init__(self, node: str, user: str = "spark", group: str = "docker"):
        super().__init__()
        self.node, self.user, self.group = node, user, group

    def _apply(self):
        sh(self.node, f"gpasswd -d {_q(self.user)} {_q(self.group)} >/dev/null")

    def _undo(self):
        sh(self.node, f"id -nG {_q(self.user)} | tr ' ' '\\n' | grep -qx {_q(self.group)} || "
                      f"usermod -aG {_q(self.group)} {_q(self.user)}")


class grant_sudo(Fault):  # noqa: N801
    """Give `user` passwordless sudo, as the first user of a stock DGX OS has sudo (the lab's
    spark has none). Undo removes the sudoers file."""

    def __init__(self, node: str, user: str = "spark"):
        super().__init__()
        self.node, self.user = node, user
        self.path = f"/etc/sudoers.d/glm53-lab-{user}"

    def _apply(self):
        sh(self.node, f"install -m 0440 /dev/stdin {self.path} && visudo -cqf {self.path}",
           input=f"{self.user} ALL=(ALL:ALL) NOPASSWD: ALL\n")

    def _undo(self):
        sh(self.node, f"rm -f {self.path}")


class stale_namespace(Fault):  # noqa: N801
    """What a killed controller can leave: a network namespace, mounted in the engine's exec
    root beside the node's own, whose interface on the management bridge holds `node`'s
    address and has no process behind it. It answers ARP for the address, so a connect gets
    a reset ("Connection refused") while the node's sshd runs. Undo deletes it.

    Which of the two answers an ARP request first is a race (on a loaded machine the node's
    own interface sometimes won, and ssh worked); the fault is the case where the stale one
    won, so it sets the controller's neighbour entry to the stale interface's MAC itself."""

    def __init__(self, node: str):
        super().__init__()
        info = json.loads(subprocess.run(["docker", "inspect", node], capture_output=True, text=True, check=True).stdout)[0]
        self.ns = str(Path(info["NetworkSettings"]["SandboxKey"]).parent / "glm53-lab-stale")
        self.address = spark_lab.make_node(spark_lab.node_index(node)).mgmt
        self.veth = "glm53stale0"

    def _apply(self):
        ns = _q(self.ns)
        script = (f"touch {ns} && unshare --net={ns} true && "
                  f"ip link add {self.veth} type veth peer name eth0 netns {ns} && "
                  f"ip link set {self.veth} master glm53lab-mgmt up && "
                  f"nsenter --net={ns} sh -c 'ip addr add {self.address}/24 dev eth0 && ip link set eth0 up' && "
                  f"mac=$(nsenter --net={ns} ip -br link show dev eth0 | awk '{{print $3}}') && "
                  f"ip neigh replace {self.address} lladdr \"$mac\" dev glm53lab-mgmt nud reachable")
        subprocess.run(["sh", "-c", script], check=True, capture_output=True, text=True)

    def _undo(self):
        ns = _q(self.ns)
        subprocess.run(["sh", "-c", f"ip link del {self.veth} 2>/dev/null; umount {ns} 2>/dev/null; rm -f {ns}; "
                        "ip neigh flush dev glm53lab-mgmt"], check=False)
