# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers for ibdev2netdev_facts (and any module that needs the same port map). Not a public API.

:func:`gather_ports` does everything the module does and returns ``(facts, error)``;
the rest are the pure parsers and the sysfs readers it joins. Runs on the target
with the system python3.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import json
import os
import re

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import command_string, run_with_timeout

SOURCES = ("auto", "tool", "sysfs")
TOOL = "ibdev2netdev"
TIMEOUT_DEFAULT = 10
TIMEOUT_MIN = 1
TIMEOUT_MAX = 300
# Where get_bin_path looks besides PATH; MLNX_OFED and iproute2 install there.
_SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")

# `rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)`; the state is whatever the tool printed
# between the parentheses: Up, Down, NA, or nothing.
_LINE_RE = re.compile(
    r"^(?P<hca>\S+)\s+port\s+(?P<port>\d+)\s*==>\s*(?P<netdev>\S+)\s*\((?P<state>[^)]*)\)$"
)
_GID_V2 = "roce v2"


class CommandTimeout(Exception):
    """A command outlived its timeout and was killed."""

    def __init__(self, argv, timeout):
        super(CommandTimeout, self).__init__("%s did not finish within %s s" % (" ".join(argv), timeout))
        self.argv = argv
        self.timeout = timeout


def run_command(argv, timeout):
    """Run ``argv`` with ``LC_ALL=C``; return ``(rc, stdout, stderr)``.

    Raises :class:`CommandTimeout` when it runs longer than ``timeout`` seconds. The
    deadline and the kill of the whole process group are _deadline's: the tool is a
    shell script whose ``cat`` of a wedged sysfs file would otherwise outlive it.
    """
    result = run_with_timeout(argv, timeout, env=dict(os.environ, LC_ALL="C"))
    if result["timed_out"]:
        raise CommandTimeout(argv, timeout)
    if result["rc"] is None:
        return 127, "", result["error"]
    return result["rc"], result["stdout"], result["stderr"]


def which(name):
    """The first executable ``name`` in PATH, then the sbin directories; None when absent."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    for directory in dirs + [d for d in _SBIN_DIRS if d not in dirs]:
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def parse_ibdev2netdev(text):
    """Parse ``ibdev2netdev`` output into a list of port dicts.

    Returns ``(ports, unparsed)``: each port is ``{hca, port, netdev, state}``
    with ``port`` an int and ``state`` exactly as printed (``Up``, ``Down``,
    ``NA`` or ``""``); lines that do not match are returned in ``unparsed`` so
    the caller can surface them instead of silently dropping a device.
    """
    ports = []
    unparsed = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        match = _LINE_RE.match(line)
        if not match:
            unparsed.append(line)
            continue
        ports.append({
            "hca": match.group("hca"),
            "port": int(match.group("port")),
            "netdev": match.group("netdev"),
            "state": match.group("state").strip(),
        })
    return ports, unparsed


def parse_port_state(text):
    """``"4: ACTIVE"`` -> ``"ACTIVE"``; ``None`` when unreadable or empty."""
    if text is None:
        return None
    value = text.strip()
    if not value:
        return None
    _num, sep, name = value.partition(":")
    return name.strip() if sep else value


def gid_to_ipv4(gid):
    """Return the IPv4 embedded in an IPv4-mapped GID (``::ffff:a.b.c.d``), else None.

    GIDs come from sysfs as eight colon-separated 16-bit hex groups.
    """
    if not gid:
        return None
    groups = gid.strip().lower().split(":")
    if len(groups) != 8:
        return None
    try:
        words = [int(group, 16) for group in groups]
    except ValueError:
        return None
    if any(words[:5]) or words[5] != 0xFFFF:
        return None
    return "%d.%d.%d.%d" % (words[6] >> 8, words[6] & 0xFF, words[7] >> 8, words[7] & 0xFF)


def roce_v2_ipv4_gids(gids):
    """Every IPv4-mapped RoCE v2 entry of a GID table as ``[{ipv4, index, ndev}]``, by index.

    ``gids`` is a list of ``{index, gid, type, ndev}`` from :func:`read_sysfs_port`.
    """
    result = []
    for entry in sorted(gids, key=lambda item: item["index"]):
        if (entry.get("type") or "").strip().lower() != _GID_V2:
            continue
        ipv4 = gid_to_ipv4(entry.get("gid"))
        if ipv4:
            result.append({"ipv4": ipv4, "index": entry["index"], "ndev": entry.get("ndev")})
    return result


def gid_index_for(v2_gids, ipv4, netdev):
    """Lowest RoCE v2 index embedding ``ipv4`` (what NCCL picks), else None.

    An entry whose ``ndev`` names another netdev (a VLAN or macvlan on the same
    port) does not count; an unreadable ``ndev`` does.
    """
    for entry in v2_gids:
        if entry["ipv4"] == ipv4 and entry.get("ndev") in (None, netdev):
            return entry["index"]
    return None


def parse_ip_addr_json(text):
    """``ip -j addr show`` output -> ``{ifname: {operstate, mtu, ipv4}}``.

    ``ipv4`` lists ``address/prefix`` in the kernel's order. Raises ValueError
    when the text is not the JSON list iproute2 prints.
    """
    items = json.loads(text) if text and text.strip() else []
    if not isinstance(items, list):
        raise ValueError("expected a JSON list, got %s" % type(items).__name__)
    result = {}
    for item in items:
        name = item.get("ifname") if isinstance(item, dict) else None
        if not name:
            continue
        info = result.setdefault(name, {"operstate": None, "mtu": None, "ipv4": []})
        if item.get("operstate") is not None:
            info["operstate"] = item["operstate"]
        if item.get("mtu") is not None:
            info["mtu"] = int(item["mtu"])
        for addr in item.get("addr_info") or []:
            if addr.get("family") != "inet" or not addr.get("local"):
                continue
            cidr = "%s/%s" % (addr["local"], addr.get("prefixlen", 32))
            if cidr not in info["ipv4"]:
                info["ipv4"].append(cidr)
    return result


def _read(path):
    try:
        with open(path, "r") as handle:
            return handle.read()
    except (IOError, OSError):
        # Unpopulated GID slots and the carrier of an admin-down netdev fail with EINVAL.
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except (IOError, OSError):
        return []


def link_state(sysfs_root, hca, netdev):
    """``Up``/``Down``/``NA`` for a netdev, decided the way ibdev2netdev decides it.

    MLNX_OFED's ibdev2netdev (the Mellanox script, read in the copy vendored at
    https://github.com/Mellanox/docker-sriov-plugin/blob/b0619966428c722a1389594809da50d49fae8c80/ibdev2netdev)
    tests ``[ -f /sys/class/net/$eth/carrier ]``; when the file exists it runs
    ``cat carrier 2> /dev/null`` and prints ``(Up)`` only when the value is 1,
    so 0 and an unreadable carrier (EINVAL while the netdev is admin-down) print
    ``(Down)``; when the file does not exist it prints ``(NA)``. It never looks
    at operstate.

    The netdev is looked up under ``<sysfs_root>/class/net`` (what the script
    reads when the root is /sys) and then under the HCA's ``device/net``, which
    is the same kernel directory on a real node and the only one a test tree
    may carry.
    """
    for base in (os.path.join(sysfs_root, "class", "net", netdev),
                 os.path.join(sysfs_root, "class", "infiniband", hca, "device", "net", netdev)):
        if os.path.isdir(base):
            carrier = os.path.join(base, "carrier")
            if not os.path.isfile(carrier):
                return "NA"
            value = _read(carrier)
            return "Up" if value is not None and value.strip() == "1" else "Down"
    return "NA"


def read_sysfs_port(sysfs_root, hca, port):
    """Read one RDMA port: state, phys_state, link_layer and the GID table with each entry's netdev."""
    base = os.path.join(sysfs_root, "class", "infiniband", hca, "ports", str(port))
    gids = []
    ndevs = set()
    for name in _listdir(os.path.join(base, "gids")):
        if not name.isdigit():
            continue
        gid = _read(os.path.join(base, "gids", name))
        if gid is None:
            continue
        gid_type = _read(os.path.join(base, "gid_attrs", "types", name))
        ndev = (_read(os.path.join(base, "gid_attrs", "ndevs", name)) or "").strip() or None
        if ndev:
            ndevs.add(ndev)
        gids.append({"index": int(name), "gid": gid.strip(), "type": (gid_type or "").strip() or None, "ndev": ndev})
    link_layer = _read(os.path.join(base, "link_layer"))
    return {
        "state": parse_port_state(_read(os.path.join(base, "state"))),
        "phys_state": parse_port_state(_read(os.path.join(base, "phys_state"))),
        "link_layer": link_layer.strip() if link_layer else None,
        "gids": gids,
        "ndevs": sorted(ndevs),
    }


def walk_sysfs(sysfs_root):
    """List ``{hca, port, netdev, state}`` from the RDMA sysfs tree, as ibdev2netdev would print it.

    The netdev comes from the GID table's ``ndevs`` when populated, else from
    ``device/net`` (one netdev per PCI function on ConnectX, matched by
    ``dev_port`` when there are several); ``state`` is :func:`link_state`, or
    None when no netdev was found (the tool prints no line for such a port).
    """
    ports = []
    root = os.path.join(sysfs_root, "class", "infiniband")
    for hca in _listdir(root):
        for name in _listdir(os.path.join(root, hca, "ports")):
            if not name.isdigit():
                continue
            port = int(name)
            info = read_sysfs_port(sysfs_root, hca, port)
            netdev = info["ndevs"][0] if len(info["ndevs"]) == 1 else None
            if netdev is None:
                netdev = _netdev_from_device(os.path.join(root, hca, "device", "net"), port)
            state = link_state(sysfs_root, hca, netdev) if netdev else None
            ports.append({"hca": hca, "port": port, "netdev": netdev, "state": state})
    return ports


def _netdev_from_device(net_dir, port):
    names = _listdir(net_dir)
    if len(names) == 1:
        return names[0]
    for name in names:
        dev_port = _read(os.path.join(net_dir, name, "dev_port"))
        if dev_port is not None and dev_port.strip().isdigit() and int(dev_port) + 1 == port:
            return name
    return None


def join_ports(ports, ip_info, sysfs_ports, address=None):
    """Combine the port list, the ``ip`` data and the sysfs data into the module's per-port result.

    ``ports``: ``{hca, port, netdev, state}``; ``ip_info``: from
    :func:`parse_ip_addr_json`; ``sysfs_ports``: ``{(hca, port): read_sysfs_port(...)}``.
    ``address`` (plain IPv4, optional): on the port whose netdev carries it,
    ``gid_index`` is that address's RoCE v2 index (None when it has none);
    every other port takes the first of its IPv4s that has one.
    ``gid_ipv4`` names the address ``gid_index`` belongs to.
    """
    result = []
    for entry in ports:
        netdev = entry.get("netdev")
        link = ip_info.get(netdev) if netdev else None
        sysfs = sysfs_ports.get((entry["hca"], entry["port"])) or {}
        ipv4 = list(link["ipv4"]) if link else []
        v2_gids = roce_v2_ipv4_gids(sysfs.get("gids") or [])
        addresses = [cidr.split("/")[0] for cidr in ipv4]
        by_ipv4 = dict((ip, gid_index_for(v2_gids, ip, netdev)) for ip in addresses)
        if address and address in by_ipv4:
            gid_ipv4 = address
        else:
            gid_ipv4 = next((ip for ip in addresses if by_ipv4[ip] is not None), None)
        result.append({
            "hca": entry["hca"],
            "port": entry["port"],
            "netdev": netdev,
            "state": entry.get("state"),
            "sysfs_state": sysfs.get("state"),
            "phys_state": sysfs.get("phys_state"),
            "link_layer": sysfs.get("link_layer"),
            "operstate": link["operstate"] if link else None,
            "mtu": link["mtu"] if link else None,
            "ipv4": ipv4,
            "gid_index": by_ipv4[gid_ipv4] if gid_ipv4 else None,
            "gid_ipv4": gid_ipv4,
            "gid_index_by_ipv4": by_ipv4,
            "roce_v2_ipv4_gids": v2_gids,
        })
    return result


def _check_args(sysfs_root, source, address, timeout):
    if source not in SOURCES:
        return "source must be one of %s, got %r" % (", ".join(SOURCES), source)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not TIMEOUT_MIN <= timeout <= TIMEOUT_MAX:
        return ("timeout must be a whole number of seconds from %d to %d, got %r; it bounds each of "
                "ibdev2netdev and ip" % (TIMEOUT_MIN, TIMEOUT_MAX, timeout))
    if address:
        try:
            ipaddress.IPv4Address(address)
        except ValueError:
            return ("address must be a plain IPv4 address (the link address the engines use, e.g. 198.18.1.10), "
                    "got %r" % (address,))
    if not os.path.isdir(sysfs_root):
        return ("sysfs_root %s is not a directory: it must hold class/infiniband (/sys on a node); "
                "fix sysfs_root or leave it at the default /sys" % sysfs_root)
    return None


def _run(run_command, argv, timeout, what):
    """Run one command; return ``(rc, out, err, error)`` with ``error`` set on a timeout or exec failure."""
    try:
        rc, out, err = run_command(argv, timeout)
    except CommandTimeout:
        return None, "", "", ("%s did not finish within %s s (timeout) and was killed: %s; check for a hung "
                              "driver or sysfs read, or raise timeout" % (what, timeout, " ".join(argv)))
    except OSError as exc:
        return None, "", "", "could not run %s (%s): %s" % (what, " ".join(argv), exc)
    return rc, out or "", err or "", None


def gather_ports(run_command, sysfs_root, source, address, timeout):
    """Build the ``ibdev2netdev`` facts; return ``(facts, None)`` or ``(None, error message)``.

    ``run_command(argv, timeout) -> (rc, stdout, stderr)`` runs a command and
    raises :class:`CommandTimeout` when it outlives ``timeout`` (pass
    :func:`run_command`). ``source``: ``auto`` runs ``ibdev2netdev`` when it is
    installed and falls back to the sysfs walk when it is absent or exits
    non-zero (it exits 255 without /sys/class/infiniband); ``tool`` requires it;
    ``sysfs`` walks ``sysfs_root``. ``address``: see :func:`join_ports`.
    """
    error = _check_args(sysfs_root, source, address, timeout)
    if error:
        return None, error
    ports, unparsed, used, tool_error = None, [], "sysfs", None
    if source != "sysfs":
        tool = which(TOOL)
        if tool is None:
            if source == "tool":
                return None, ("source=tool but %s is not installed (not in PATH or %s); install the MLNX_OFED/DOCA "
                              "userland or use source=auto or source=sysfs" % (TOOL, ":".join(_SBIN_DIRS)))
        else:
            rc, out, err, error = _run(run_command, [tool], timeout, TOOL)
            if error:
                return None, error
            if rc == 0:
                ports, unparsed = parse_ibdev2netdev(out)
                used = "tool"
            else:
                tool_error = "%s exited %d: %s" % (tool, rc, (err or out).strip() or "no output")
                if source == "tool":
                    return None, ("%s; it exits non-zero when /sys/class/infiniband is missing (RDMA driver not "
                                  "loaded): load mlx5_ib or use source=auto to fall back to the sysfs walk" % tool_error)
    if ports is None:
        ports = walk_sysfs(sysfs_root)

    ip_bin = which("ip")
    if ip_bin is None:
        return None, "ip (iproute2) is not installed: install iproute2"
    argv = [ip_bin, "-j", "addr", "show"]
    rc, out, err, error = _run(run_command, argv, timeout, "ip")
    if error:
        return None, error
    if rc != 0:
        return None, "`%s` failed (rc=%d): %s" % (command_string(argv), rc, (err or out).strip())
    try:
        ip_info = parse_ip_addr_json(out)
    except ValueError as exc:
        return None, ("`%s` did not print the JSON list iproute2 prints (iproute2 older than 4.13?): %s"
                      % (command_string(argv), exc))

    sysfs_ports = {}
    for entry in ports:
        key = (entry["hca"], entry["port"])
        if key not in sysfs_ports:
            sysfs_ports[key] = read_sysfs_port(sysfs_root, entry["hca"], entry["port"])
    return {
        "source": used,
        "sysfs_root": sysfs_root,
        "tool_error": tool_error,
        "address": address or None,
        "unparsed": unparsed,
        "ports": join_ports(ports, ip_info, sysfs_ports, address=address or None),
    }, None
