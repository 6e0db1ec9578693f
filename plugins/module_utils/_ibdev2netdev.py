# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers for the ibdev2netdev_facts module. Not a public API.

Pure parsers (text in, data out) plus a small sysfs reader; the module joins
them. Everything here runs on the target with the system python3.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

# Plain form: `rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)`. The verbose form (-v)
# adds the PCI address before the name and board, firmware and RDMA state
# around "port N": `0000:01:00.1 rocep1s0f1 (MT4129 - ...) fw 28.x port 1 (ACTIVE) ==> ...`.
_LINE_RE = re.compile(
    r"^(?P<hca>\S+)\s+port\s+(?P<port>\d+)\s*==>\s*(?P<netdev>\S+)\s*\((?P<state>[^)]*)\)$"
)
_VERBOSE_RE = re.compile(
    r"^\S+\s+(?P<hca>\S+)\s+\(.*\bport\s+(?P<port>\d+)\s+\([^)]*\)"
    r"\s*==>\s*(?P<netdev>\S+)\s*\((?P<state>[^)]*)\)$"
)
_GID_V2 = "roce v2"


def parse_ibdev2netdev(text):
    """Parse ``ibdev2netdev`` output into a list of port dicts.

    Returns ``(ports, unparsed)``: each port is ``{hca, port, netdev, state}``
    with ``port`` an int and ``state`` as printed (``Up``/``Down``); lines that
    match neither the plain nor the ``-v`` form are returned in ``unparsed`` so
    the caller can surface them instead of silently dropping a device.
    """
    ports = []
    unparsed = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        match = _VERBOSE_RE.match(line) or _LINE_RE.match(line)
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
    """Map each IPv4 found in RoCE v2 GIDs to its lowest GID index.

    ``gids`` is a list of ``{index, gid, type}``. The lowest index wins because
    that is what NCCL and the TensorFold RoCE path pick when auto-detecting.
    """
    result = {}
    for entry in sorted(gids, key=lambda item: item["index"]):
        if (entry.get("type") or "").strip().lower() != _GID_V2:
            continue
        ipv4 = gid_to_ipv4(entry.get("gid"))
        if ipv4 and ipv4 not in result:
            result[ipv4] = entry["index"]
    return result


def parse_ip_json(addr_text=None, link_text=None):
    """Join ``ip -j addr`` and ``ip -j link`` output into ``{ifname: info}``.

    ``info`` holds ``operstate``, ``mtu``, ``flags`` and ``ipv4`` (list of
    ``address/prefix``). Either input may be empty: ``ip -j addr`` already
    carries the link fields, ``ip -j link`` alone gives no addresses.
    """
    result = {}
    for text in (link_text, addr_text):
        if not text or not text.strip():
            continue
        for item in json.loads(text):
            name = item.get("ifname")
            if not name:
                continue
            info = result.setdefault(name, {"operstate": None, "mtu": None, "flags": [], "ipv4": []})
            if item.get("operstate") is not None:
                info["operstate"] = item["operstate"]
            if item.get("mtu") is not None:
                info["mtu"] = int(item["mtu"])
            if item.get("flags"):
                info["flags"] = list(item["flags"])
            for addr in item.get("addr_info") or []:
                if addr.get("family") != "inet" or not addr.get("local"):
                    continue
                cidr = "%s/%s" % (addr["local"], addr.get("prefixlen", 32))
                if cidr not in info["ipv4"]:
                    info["ipv4"].append(cidr)
    return result


def operstate_to_state(operstate):
    """ibdev2netdev prints ``Up`` only for operstate ``up``; mirror that."""
    if operstate is None:
        return None
    return "Up" if operstate.lower() == "up" else "Down"


def _read(path):
    try:
        with open(path, "r") as handle:
            return handle.read()
    except (IOError, OSError):
        # Unpopulated GID slots fail with EINVAL on recent kernels; treat as absent.
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except (IOError, OSError):
        return []


def read_sysfs_port(sysfs_root, hca, port):
    """Read one RDMA port: state, phys_state, link_layer, GID table, GID netdevs."""
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
        ndev = _read(os.path.join(base, "gid_attrs", "ndevs", name))
        if ndev and ndev.strip():
            ndevs.add(ndev.strip())
        gids.append({"index": int(name), "gid": gid.strip(), "type": (gid_type or "").strip() or None})
    link_layer = _read(os.path.join(base, "link_layer"))
    return {
        "exists": os.path.isdir(base),
        "state": parse_port_state(_read(os.path.join(base, "state"))),
        "phys_state": parse_port_state(_read(os.path.join(base, "phys_state"))),
        "link_layer": link_layer.strip() if link_layer else None,
        "gids": gids,
        "ndevs": sorted(ndevs),
    }


def walk_sysfs(sysfs_root):
    """List ``{hca, port, netdev}`` from the RDMA sysfs tree (ibdev2netdev's own source).

    The netdev comes from the GID table's ``ndevs`` when populated, else from
    ``device/net`` (one netdev per PCI function on ConnectX, matched by
    ``dev_port`` when there are several).
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
            ports.append({"hca": hca, "port": port, "netdev": netdev})
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


def join_ports(ports, ip_info, sysfs_ports):
    """Combine the port list, the ``ip`` data and the sysfs data into the module's result.

    ``ports``: ``{hca, port, netdev, state}`` (``state`` None when the tool was
    absent); ``ip_info``: from :func:`parse_ip_json`; ``sysfs_ports``:
    ``{(hca, port): read_sysfs_port(...)}``.
    """
    result = []
    for entry in ports:
        netdev = entry.get("netdev")
        link = ip_info.get(netdev) if netdev else None
        sysfs = sysfs_ports.get((entry["hca"], entry["port"])) or {}
        ipv4 = list(link["ipv4"]) if link else []
        by_ip = roce_v2_ipv4_gids(sysfs.get("gids") or [])
        gid_by_ipv4 = {}
        for cidr in ipv4:
            address = cidr.split("/")[0]
            if address in by_ip:
                gid_by_ipv4[address] = by_ip[address]
        gid_index = None
        for cidr in ipv4:
            gid_index = gid_by_ipv4.get(cidr.split("/")[0])
            if gid_index is not None:
                break
        state = entry.get("state")
        if state is None and link:
            state = operstate_to_state(link["operstate"])
        result.append({
            "hca": entry["hca"],
            "port": entry["port"],
            "netdev": netdev,
            "state": state,
            "sysfs_state": sysfs.get("state"),
            "phys_state": sysfs.get("phys_state"),
            "link_layer": sysfs.get("link_layer"),
            "operstate": link["operstate"] if link else None,
            "mtu": link["mtu"] if link else None,
            "ipv4": ipv4,
            "gid_index": gid_index,
            "gid_index_by_ipv4": gid_by_ipv4,
            "roce_v2_ipv4_gids": [{"ipv4": ip, "index": idx} for ip, idx in sorted(by_ip.items(), key=lambda kv: kv[1])],
        })
    return result
