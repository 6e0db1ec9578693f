# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""cx7_link: which netdevs and addresses form the link, and the checks on them
(controller side). Not a public API.

A node's observation (see _cx7_preflight.observation) carries ``ports`` (the
ibdev2netdev_facts port list), ``networks`` ({netdev: [network/prefix]}) and the
configured ``netdev``, ``second_netdev`` and ``address``. Link checks pair the
head with each worker.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_parsers import command_error
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._preflight_result import (
    FAIL,
    OK,
    WARN,
    passed_or,
    result,
    skipped,
    tag,
)

AUTO = "auto"
# The two functions of one QSFP cage: each physical port shows up as a pair of
# netdevs (NVIDIA connect-two-sparks). The second function follows the first.
CX7_PAIRS = {
    "enp1s0f0np0": "enP2p1s0f0np0",
    "enP2p1s0f0np0": "enp1s0f0np0",
    "enp1s0f1np1": "enP2p1s0f1np1",
    "enP2p1s0f1np1": "enp1s0f1np1",
}
# When nothing is configured, the first Up netdev in this order carries the link.
CX7_PRIMARY_ORDER = ("enp1s0f1np1", "enp1s0f0np0", "enP2p1s0f1np1", "enP2p1s0f0np0")
LINK_LOCAL = ipaddress.ip_network(u"169.254.0.0/16")
# What a node-level skip waits for: the port map, which needs the node to answer.
_NEEDS_FACTS = ("node.link_facts", "node.reachable")


# --- views of one node ---------------------------------------------------------------------

def nodes_of(config):
    return [config["head"]] + list(config["workers"])


def has_ports(obs):
    return bool(obs) and obs.get("ports") is not None


def port_for(obs, netdev):
    """The RDMA port behind ``netdev``; an Up one wins when several map to it."""
    matches = [p for p in (obs or {}).get("ports") or [] if p.get("netdev") == netdev]
    for port in matches:
        if port.get("state") == "Up":
            return port
    return matches[0] if matches else None


def up_netdevs(obs):
    return sorted(p["netdev"] for p in (obs or {}).get("ports") or [] if p.get("state") == "Up" and p.get("netdev"))


def addresses(port):
    return [cidr.split("/")[0] for cidr in (port or {}).get("ipv4") or []]


def networks_of(port):
    """``["198.18.1.0/24", ...]`` in the order of the port's IPv4 list."""
    out = []
    for cidr in (port or {}).get("ipv4") or []:
        out.append(str(ipaddress.ip_interface(u"%s" % cidr).network))
    return out


def is_link_local(address):
    return ipaddress.ip_address(u"%s" % address) in LINK_LOCAL


def resolve_netdevs(obs):
    """(primary, second) netdev names of a node: configured ones, or ``auto``.

    auto primary: the Up netdev that carries the configured address, else the first Up
    CX7 netdev. auto second: the other function of the primary's cage. ``""`` second
    means check the primary alone.
    """
    obs = obs or {}
    primary = obs.get("netdev") or AUTO
    if primary == AUTO:
        primary = None
        address = obs.get("address")
        up = [p for p in obs.get("ports") or [] if p.get("state") == "Up" and p.get("netdev")]
        if address:
            # Whatever its state: a Down link must fail as itself, not hand over to another netdev.
            for port in obs.get("ports") or []:
                if port.get("netdev") and address in addresses(port):
                    primary = port["netdev"]
                    break
        if primary is None:
            names = [p["netdev"] for p in up]
            ordered = [n for n in CX7_PRIMARY_ORDER if n in names] + sorted(n for n in names if n not in CX7_PRIMARY_ORDER)
            primary = ordered[0] if ordered else CX7_PRIMARY_ORDER[0]
    second = obs.get("second_netdev")
    if second is None or second == AUTO:
        second = CX7_PAIRS.get(primary, "")
    return primary, ("" if second == primary else second)


def links_of(config, obs_by_node):
    """The link netdevs to check, from the head's resolution: primary first, then the second function."""
    primary, second = resolve_netdevs(obs_by_node.get(config["head"]))
    links = [{"netdev": primary, "primary": True}]
    if second:
        links.append({"netdev": second, "primary": False})
    return links


def link_address(obs, netdev, peer_networks=None):
    """This node's address on a link: the configured one when it is there, else one on a
    subnet shared with every peer, else the first that is not link-local, else the first."""
    port = port_for(obs, netdev)
    found = addresses(port)
    if not found:
        return None
    configured = (obs or {}).get("address") or ""
    if configured and configured in found:
        return configured
    if peer_networks:
        for address, network in zip(found, networks_of(port)):
            if all(network in nets for nets in peer_networks):
                return address
    for address in found:
        if not is_link_local(address):
            return address
    return found[0]


def link_addresses(config, obs_by_node, netdev):
    """``{node: address}`` on one link: the head's chosen against all workers, each worker's against the head."""
    head = config["head"]
    nets = dict((n, networks_of(port_for(obs_by_node.get(n), netdev))) for n in nodes_of(config))
    out = {head: link_address(obs_by_node.get(head), netdev, [nets[w] for w in config["workers"] if nets[w]])}
    for worker in config["workers"]:
        out[worker] = link_address(obs_by_node.get(worker), netdev, [nets[head]] if nets[head] else None)
    return out


def gid_for(port, address):
    """RoCE v2 GID index of ``address`` on the port (the GID the engines use), or None."""
    for gid in (port or {}).get("roce_v2_ipv4_gids") or []:
        if gid.get("ipv4") == address:
            return gid.get("index")
    return None


# --- checks --------------------------------------------------------------------------------

def check_netdev_names(config, obs_by_node):
    """One NCCL_SOCKET_IFNAME for every rank: each worker's link netdevs match the head's."""
    out = []
    head = config["head"]
    ref = obs_by_node.get(head)
    theirs = list(resolve_netdevs(ref))
    for node in config["workers"]:
        obs = obs_by_node.get(node)
        if not has_ports(obs) or not has_ports(ref):
            out.append(skipped("link.netdev_names", node, FAIL, _NEEDS_FACTS))
            continue
        mine = list(resolve_netdevs(obs))
        ok = mine == theirs
        out.append(result(
            "link.netdev_names", node, passed_or(FAIL, ok), FAIL,
            expected="link netdevs %s as on %s" % (_names(theirs), head), found=_names(mine),
            fix="cable the same CX7 cage on every Spark and set one glm53_link_netdev for the whole group "
                "(NCCL_SOCKET_IFNAME must be the same name on every node); Up netdevs here: %s"
                % (",".join(up_netdevs(obs)) or "none"),
            summary="link netdev names match" if ok else "link netdev names differ from %s" % head))
    return out


def _names(values):
    return ",".join(v for v in values if v) or "none"


def check_link_ports(config, obs_by_node):
    """Per node and link: port Up, IPv4 present, RDMA ACTIVE, GID index of the link address."""
    out = []
    for link in links_of(config, obs_by_node):
        netdev, level = link["netdev"], (FAIL if link["primary"] else WARN)
        chosen = link_addresses(config, obs_by_node, netdev)
        start = len(out)
        for node in nodes_of(config):
            obs = obs_by_node.get(node)
            if not has_ports(obs):
                for name in ("link.port_up", "link.ipv4", "rdma.port_active", "rdma.gid_index"):
                    out.append(skipped(name, node, level, _NEEDS_FACTS, summary="%s: needs node.link_facts" % netdev))
                continue
            port = port_for(obs, netdev)
            up = bool(port) and port.get("state") == "Up"
            if not port:
                found = "no RDMA port maps to %s; Up RDMA netdevs: %s" % (netdev, ",".join(up_netdevs(obs)) or "none")
            else:
                found = "%s -> %s (%s), carrier %s, operstate %s" % (
                    port["hca"], netdev, port.get("state"), _carrier(port), port.get("operstate"))
            fix = ("check the QSFP cable and that it sits in the same cage on every Spark; `ibdev2netdev` must show "
                   "%s (Up) (bring it up with `ip link set %s up` or netplan)" % (netdev, netdev))
            if not link["primary"]:
                fix += "; until then NCCL_IB_HCA uses the first function only (about half the bandwidth)"
            out.append(result("link.port_up", node, passed_or(level, up), level, expected="%s (Up)" % netdev,
                              found=found, fix=fix, summary="%s is %s" % (netdev, "Up" if up else "not Up")))
            if not port:
                for name in ("link.ipv4", "rdma.port_active", "rdma.gid_index"):
                    out.append(skipped(name, node, level, "link.port_up", summary="%s: needs link.port_up" % netdev))
                continue
            out.append(_check_ipv4(config, obs_by_node, node, port, netdev, level, link["primary"]))
            active = port.get("sysfs_state") == "ACTIVE"
            out.append(result(
                "rdma.port_active", node, passed_or(level, active), level,
                expected="%s port %s ACTIVE" % (port["hca"], port["port"]),
                found=port.get("sysfs_state") or "unreadable under %s" % (obs.get("sysfs_root") or "sysfs_root"),
                fix="bring %s up and check the cable; `cat /sys/class/infiniband/%s/ports/%s/state` must say ACTIVE"
                    % (netdev, port["hca"], port["port"]),
                summary="RDMA port %s is %s" % (port["hca"], port.get("sysfs_state") or "unknown")))
            out.append(_check_gid(node, port, netdev, level, chosen.get(node)))
        if link["primary"]:
            out.extend(_check_configured_address(config, obs_by_node, netdev))
        tag(out[start:], netdev)
    return out


def _carrier(port):
    carrier = port.get("carrier")
    return "?" if carrier is None else str(carrier)


def _check_ipv4(config, obs_by_node, node, port, netdev, level, primary):
    have = port.get("ipv4") or []
    head = config["head"]
    if have:
        return result("link.ipv4", node, OK, level, expected="an IPv4 on %s" % netdev, found=",".join(have),
                      summary="%s has %s" % (netdev, ",".join(have)))
    configured = obs_by_node[node].get("address")
    if primary and configured:
        hint = "give it the configured link address %s (glm53_link_address) with its prefix" % configured
    elif node == head:
        hint = "give it an address (one subnet per link)"
    else:
        head_ipv4 = (port_for(obs_by_node.get(head), netdev) or {}).get("ipv4") or []
        hint = ("give it one on the same /%s as %s's %s" % (head_ipv4[0].split("/")[1], head, head_ipv4[0].split("/")[0])
                if head_ipv4 else "give it one on the same subnet as %s's address on %s" % (head, netdev))
    return result("link.ipv4", node, level, level, expected="an IPv4 on %s" % netdev, found="none",
                  fix="%s (netplan) and rerun" % hint, summary="%s has no IPv4 address" % netdev)


def _check_gid(node, port, netdev, level, address):
    if not port.get("ipv4") or not address:
        return skipped("rdma.gid_index", node, level, "link.ipv4", summary="%s: needs link.ipv4" % netdev)
    index = gid_for(port, address)
    table = ",".join("%s@%s" % (g["ipv4"], g["index"]) for g in port.get("roce_v2_ipv4_gids") or []) or "none"
    return result(
        "rdma.gid_index", node, passed_or(level, index is not None), level,
        expected="a RoCE v2 GID embedding %s (the link address) on %s" % (address, port["hca"]),
        found="index %s" % index if index is not None else "none; RoCE v2 IPv4 GIDs: %s" % table,
        fix="the GID table follows the netdev's addresses: make sure %s carries %s, wait a second and rerun; "
            "if it stays missing, reload the mlx5 driver or reboot" % (netdev, address),
        summary="GID index %s for %s" % (index, address) if index is not None else "no RoCE v2 GID for %s" % address)


def _check_configured_address(config, obs_by_node, netdev):
    """The configured link address (HEAD_IP on the head) must sit on the link netdev, not the LAN."""
    out = []
    head = config["head"]
    chosen = link_addresses(config, obs_by_node, netdev)
    for node in nodes_of(config):
        obs = obs_by_node.get(node)
        if not has_ports(obs):
            continue
        configured = obs.get("address") or ""
        port = port_for(obs, netdev)
        label = "HEAD_IP" if node == head else "worker link address"
        if not configured:
            out.append(result("link.address", node, OK, FAIL, expected="glm53_link_address on %s" % netdev,
                              found="not set; using %s" % (chosen.get(node) or "none"),
                              summary="%s derived from %s" % (label, netdev)))
            continue
        ok = configured in addresses(port)
        out.append(result(
            "link.address", node, passed_or(FAIL, ok), FAIL,
            expected="%s (glm53_link_address) on %s" % (configured, netdev),
            found="%s has %s" % (netdev, ",".join((port or {}).get("ipv4") or []) or "no IPv4"),
            fix="put %s on %s (netplan), not on the LAN interface, or set glm53_link_address to the address %s "
                "really has on %s" % (configured, netdev, node, netdev),
            summary="%s %s is %s %s" % (label, configured, "on" if ok else "not on", netdev)))
    return out


def check_link_pairs(config, obs_by_node):
    """Head vs each worker per link: shared subnet, equal MTU, MTU as configured."""
    out = []
    head = config["head"]
    want_mtu = int(config.get("mtu") or 0)
    for link in links_of(config, obs_by_node):
        netdev, level = link["netdev"], (FAIL if link["primary"] else WARN)
        start = len(out)
        head_port = port_for(obs_by_node.get(head), netdev)
        theirs = networks_of(head_port)
        for node in config["workers"]:
            port = port_for(obs_by_node.get(node), netdev)
            if not port or not head_port or not port.get("ipv4") or not head_port.get("ipv4"):
                out.append(skipped("link.subnet", node, level, ("link.ipv4",) + _NEEDS_FACTS,
                                   summary="%s: needs link.ipv4 on both ends" % netdev))
            else:
                shared = [n for n in networks_of(port) if n in theirs]
                out.append(result(
                    "link.subnet", node, passed_or(level, bool(shared)), level,
                    expected="a subnet shared with %s (%s)" % (head, ",".join(theirs)), found=",".join(port["ipv4"]),
                    fix="readdress %s on %s into %s's subnet %s (netplan) and rerun" % (netdev, node, head, theirs[0]),
                    summary="%s shares %s with %s" % (netdev, shared[0], head) if shared else
                    "%s has no subnet in common with %s" % (netdev, head)))
            if not port or not head_port or port.get("mtu") is None or head_port.get("mtu") is None:
                out.append(skipped("link.mtu_match", node, level, ("link.port_up",) + _NEEDS_FACTS,
                                   summary="%s: needs the netdev on both ends" % netdev))
            else:
                same = port["mtu"] == head_port["mtu"]
                out.append(result(
                    "link.mtu_match", node, passed_or(level, same), level,
                    expected="MTU %s as on %s" % (head_port["mtu"], head), found="MTU %s" % port["mtu"],
                    fix="set the same MTU on %s on every Spark (netplan `mtu:`, with the rank containers stopped)" % netdev,
                    summary="%s MTU %s" % (netdev, "matches" if same else "differs from %s" % head)))
        if want_mtu:
            for node in nodes_of(config):
                port = port_for(obs_by_node.get(node), netdev)
                if not port or port.get("mtu") is None:
                    out.append(skipped("link.mtu", node, level, ("link.port_up",) + _NEEDS_FACTS, summary="%s: needs the netdev" % netdev))
                    continue
                ok = port["mtu"] == want_mtu
                out.append(result(
                    "link.mtu", node, passed_or(level, ok), level, expected="MTU %d (cx7_link_mtu)" % want_mtu,
                    found="MTU %s" % port["mtu"],
                    fix="set `mtu: %d` for %s in netplan on %s (or change cx7_link_mtu)" % (want_mtu, netdev, node),
                    summary="%s MTU %s" % (netdev, port["mtu"])))
        tag(out[start:], netdev)
    return out


def ping_plan(config, obs_by_node, node):
    """DF pings this node sends: the head to each worker, a worker to the head, per link
    whose both ends are Up with an IPv4. Size = own MTU - 28, so the frame is one MTU."""
    plan = []
    head = config["head"]
    peers = config["workers"] if node == head else [head]
    obs = obs_by_node.get(node)
    if not has_ports(obs):
        return plan
    for link in links_of(config, obs_by_node):
        netdev = link["netdev"]
        port = port_for(obs, netdev)
        if not port or port.get("state") != "Up" or not port.get("ipv4") or not port.get("mtu"):
            continue
        chosen = link_addresses(config, obs_by_node, netdev)
        for peer in peers:
            if not chosen.get(peer) or port_for(obs_by_node.get(peer), netdev) is None:
                continue
            plan.append({"netdev": netdev, "peer": peer, "target": chosen[peer], "size": int(port["mtu"]) - 28})
    return plan


def check_pings(config, obs_by_node):
    out = []
    head = config["head"]
    for node in nodes_of(config):
        done = {}
        for item in (obs_by_node.get(node) or {}).get("pings") or []:
            done[(item.get("netdev"), item.get("peer"))] = item
        for link in links_of(config, obs_by_node):
            netdev, level = link["netdev"], (FAIL if link["primary"] else WARN)
            for peer in (config["workers"] if node == head else [head]):
                item = done.get((netdev, peer))
                if item is None:
                    out.append(skipped("link.df_ping", node, level, ["link.port_up", "link.ipv4", "node.reachable", "node.link_facts"],
                                       summary="%s -> %s: needs link.port_up and link.ipv4 on both ends" % (netdev, peer),
                                       netdev=netdev))
                    continue
                ok = bool(item.get("ok"))
                cmd = "ping -M do -s %s -I %s %s" % (item.get("size"), netdev, item.get("target"))
                if item.get("timed_out"):
                    found = command_error(dict(item, command=item.get("command") or cmd))
                else:
                    found = "replies" if ok else (item.get("error") or "rc=%s" % item.get("rc"))
                out.append(result(
                    "link.df_ping", node, passed_or(level, ok), level, expected="replies to `%s`" % cmd, found=found,
                    fix="make the MTU equal on both ends of %s and check nothing on the path drops %d-byte frames "
                        "(a mismatched MTU or a switch in between); a plain `ping -I %s %s` tells MTU from reachability"
                        % (netdev, int(item.get("size") or 0) + 28, netdev, item.get("target")),
                    summary="DF ping %s -> %s (%s) at %s bytes %s"
                            % (node, peer, item.get("target"), item.get("size"), "ok" if ok else "failed"),
                    netdev=netdev))
    return out
