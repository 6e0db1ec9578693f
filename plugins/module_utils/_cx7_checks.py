# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers for the cx7_link role: pure check functions. Not a public API.

The role gathers one observation dict per node and calls :func:`evaluate` on
the controller (through the ``cx7_link_*`` filters). Everything here is data in,
data out, so each check is unit-tested without nodes.

Observation of one node (keys the role fills; any may be missing)::

    netdev, second_netdev   configured link netdevs on this node
    address                 configured link address (glm53_link_address) or ""
    ibdev                   registered result of ibdev2netdev_facts
    networks                {netdev: ["198.18.1.0/24", ...]} (ansible.utils.ipaddr)
    gpu, apps               registered nvidia-smi results (rc, stdout, stderr, msg)
    meminfo                 /proc/meminfo text
    disk                    registered disk probe result (stdout is JSON)
    pings                   registered ping loop results (item = {netdev, target, size})
    port_probe              registered port probe result (stdout is JSON)
    ssh                     registered head->worker ssh result (head only)

Config keys: head, workers, path, master_port, mtu, gpu_name,
driver_warn_prefixes, gpu_process_allow, mem_free_gib, mem_available_gib.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.dgx_spark.glm53.plugins.module_utils._meminfo import (
    GIB,
    memory_summary,
    parse_meminfo,
)

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
_RANK = {SKIP: 0, OK: 0, WARN: 1, FAIL: 2}
GB = 1000 ** 3
SSH_FAILED_RC = 255


def result(check, node, status, level, expected="", found="", fix="", summary="", netdev=None):
    """One check outcome. ``level`` is what a problem costs (fail stops the play, warn
    does not); ``status`` is what happened; ``netdev`` ties link checks to their link."""
    entry = {
        "check": check,
        "node": node,
        "netdev": netdev,
        "status": status,
        "level": level,
        "expected": expected,
        "found": found,
        "fix": fix if status in (WARN, FAIL) else "",
        "summary": summary,
    }
    entry["message"] = format_message(entry)
    return entry


def format_message(entry):
    """``[check] node: summary; expected X, found Y; fix: Z`` (parts that are empty are left out)."""
    head = "[%s] %s: %s" % (entry["check"], entry["node"], entry["summary"] or entry["status"])
    parts = [head]
    if entry["expected"] or entry["found"]:
        parts.append("expected %s, found %s" % (entry["expected"] or "-", entry["found"] or "-"))
    if entry.get("fix"):
        parts.append("fix: %s" % entry["fix"])
    return "; ".join(parts)


def _bad(level, ok):
    return OK if ok else level


# --- small parsers -------------------------------------------------------------------------

def parse_gpus(text):
    """``nvidia-smi --query-gpu=name,driver_version --format=csv,noheader`` -> [{name, driver}]."""
    gpus = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        name, _sep, driver = line.rpartition(",")
        if not _sep:
            name, driver = line, ""
        gpus.append({"name": name.strip(), "driver": driver.strip()})
    return gpus


def parse_compute_apps(text):
    """``nvidia-smi --query-compute-apps=pid,name --format=csv,noheader`` -> [{pid, name}]."""
    apps = []
    for line in (text or "").splitlines():
        if not line.strip() or line.strip().lower().startswith("no running"):
            continue
        pid, _sep, name = line.partition(",")
        pid = pid.strip()
        apps.append({"pid": int(pid) if pid.isdigit() else pid, "name": name.strip()})
    return apps


def parse_json_stdout(registered):
    """JSON printed by a probe script, or None when the task did not run or printed garbage."""
    if not registered or not registered.get("stdout"):
        return None
    try:
        return json.loads(registered["stdout"])
    except ValueError:
        return None


def command_error(registered):
    """Short human reason a registered command failed (stderr, msg or rc)."""
    if not registered:
        return "not run"
    for key in ("stderr", "msg", "stdout"):
        text = (registered.get(key) or "").strip()
        if text:
            return text.splitlines()[-1].strip()
    return "rc=%s" % registered.get("rc")


def ping_error(registered):
    """Why a ping failed: its errors (not the source-address warning) and the loss summary."""
    errors = [line.strip() for line in (registered.get("stderr") or "").splitlines()
              if line.strip() and "warning" not in line.lower()]
    loss = [line.strip() for line in (registered.get("stdout") or "").splitlines() if "packet loss" in line]
    return "; ".join(errors + loss) or command_error(registered)


def human_bytes(value):
    """Decimal GB with one decimal (the unit the weight sizes are quoted in)."""
    return "%.1f GB" % (float(value) / GB)


def human_gib(value):
    return "%.1f GiB" % (float(value) / GIB)


# --- per-node views ------------------------------------------------------------------------

def ports_of(obs):
    ibdev = (obs or {}).get("ibdev") or {}
    facts = (ibdev.get("ansible_facts") or {}).get("ibdev2netdev") or {}
    return facts.get("ports") or []


def port_for(obs, netdev):
    """The RDMA port behind ``netdev``; an Up one wins when several map to it."""
    matches = [p for p in ports_of(obs) if p.get("netdev") == netdev]
    for port in matches:
        if port.get("state") == "Up":
            return port
    return matches[0] if matches else None


def links_of(config, obs_by_node):
    """Link netdevs to check, in order: the primary (NCCL_SOCKET_IFNAME) then the second function."""
    head = obs_by_node.get(config["head"]) or {}
    primary = head.get("netdev") or config.get("netdev")
    second = head.get("second_netdev") if "second_netdev" in head else config.get("second_netdev")
    links = [{"netdev": primary, "primary": True}]
    if second and second != primary:
        links.append({"netdev": second, "primary": False})
    return links


def addresses(port):
    return [cidr.split("/")[0] for cidr in (port or {}).get("ipv4") or []]


def link_address(obs, netdev, primary, peer_networks=None):
    """This node's address on a link: the configured one for the primary link when it is
    really there, else the first IPv4 on a subnet shared with the peer, else the first."""
    port = port_for(obs, netdev)
    found = addresses(port)
    configured = (obs or {}).get("address") or ""
    if primary and configured and configured in found:
        return configured
    networks = ((obs or {}).get("networks") or {}).get(netdev) or []
    if peer_networks:
        for address, network in zip(found, networks):
            if network in peer_networks:
                return address
    return found[0] if found else None


def node_nodes(config):
    return [config["head"]] + list(config["workers"])


def _node_ok(obs):
    return bool(obs) and bool((obs.get("ibdev") or {}).get("ansible_facts"))


# --- checks --------------------------------------------------------------------------------

def check_nodes(config, obs_by_node):
    out = []
    for node in node_nodes(config):
        obs = obs_by_node.get(node)
        if not obs:
            out.append(result(
                "node.reachable", node, FAIL, FAIL, "node answers over Ansible", "unreachable or not in the play",
                "make %s reachable (ssh as the deploy user) and run the play on both nodes (no --limit)" % node,
                "no observations from this node"))
            continue
        out.append(result("node.reachable", node, OK, FAIL, "node answers over Ansible", "answered",
                          summary="reachable"))
        if not _node_ok(obs):
            reason = command_error(obs.get("ibdev"))
            out.append(result(
                "node.link_facts", node, FAIL, FAIL, "ibdev2netdev_facts succeeds", reason,
                "install rdma-core/iproute2 or fix the error above, then rerun",
                "could not read the RDMA port map"))
        else:
            source = obs["ibdev"]["ansible_facts"]["ibdev2netdev"].get("source")
            out.append(result("node.link_facts", node, OK, FAIL, "ibdev2netdev_facts succeeds",
                              "%d RDMA port(s) via %s" % (len(ports_of(obs)), source), summary="port map read"))
    return out


def check_netdev_names(config, obs_by_node):
    """The kit needs one NCCL_SOCKET_IFNAME for both ranks: the configured names must agree."""
    out = []
    head = config["head"]
    ref = obs_by_node.get(head) or {}
    for node in config["workers"]:
        obs = obs_by_node.get(node)
        if not obs or not ref:
            out.append(result("link.netdev_names", node, SKIP, FAIL, summary="needs node.reachable"))
            continue
        mine = [obs.get("netdev"), obs.get("second_netdev") or ""]
        theirs = [ref.get("netdev"), ref.get("second_netdev") or ""]
        ok = mine == theirs
        out.append(result(
            "link.netdev_names", node, _bad(FAIL, ok),
            FAIL, "link netdevs %s as on %s" % (_names(theirs), head), _names(mine),
            "cable the same CX7 port on both Sparks and set one glm53_link_netdev for the whole group "
            "(NCCL_SOCKET_IFNAME must be the same name on every node)",
            "link netdev names match" if ok else "link netdev names differ from %s" % head))
    return out


def _names(values):
    return ",".join(v for v in values if v) or "none"


def _up_ports(obs):
    return sorted(p["netdev"] for p in ports_of(obs) if p.get("state") == "Up" and p.get("netdev"))


def _tag(entries, netdev):
    for entry in entries:
        entry["netdev"] = netdev


def check_link_ports(config, obs_by_node):
    """Per node and link: port Up, IPv4 present, configured address on it, RDMA ACTIVE, GID index."""
    out = []
    head = config["head"]
    for link in links_of(config, obs_by_node):
        netdev, level = link["netdev"], (FAIL if link["primary"] else WARN)
        start = len(out)
        for node in node_nodes(config):
            obs = obs_by_node.get(node)
            if not _node_ok(obs):
                for name in ("link.port_up", "link.ipv4", "rdma.port_active", "rdma.gid_index"):
                    out.append(result(name, node, SKIP, level, summary="%s: needs node.link_facts" % netdev))
                continue
            port = port_for(obs, netdev)
            up = bool(port) and port.get("state") == "Up"
            if not port:
                found = "no RDMA port maps to %s; Up RDMA netdevs: %s" % (netdev, ",".join(_up_ports(obs)) or "none")
            else:
                found = "%s -> %s (%s), operstate %s" % (port["hca"], netdev, port.get("state"), port.get("operstate"))
            fix = ("check the QSFP cable and that it sits in the same cage on both Sparks; `ibdev2netdev` must show "
                   "%s (Up) (bring it up with `ip link set %s up` or netplan)" % (netdev, netdev))
            if not link["primary"]:
                fix += "; until then NCCL_IB_HCA uses the first function only (about half the bandwidth)"
            out.append(result("link.port_up", node, _bad(level, up), level, "%s (Up)" % netdev, found, fix,
                              "%s is %s" % (netdev, "Up" if up else "not Up")))
            if not port:
                for name in ("link.ipv4", "rdma.port_active", "rdma.gid_index"):
                    out.append(result(name, node, SKIP, level, summary="%s: needs link.port_up" % netdev))
                continue
            out.append(_check_ipv4(config, obs_by_node, node, port, netdev, level, link["primary"]))
            active = port.get("sysfs_state") == "ACTIVE"
            out.append(result(
                "rdma.port_active", node, _bad(level, active), level,
                "%s port %s ACTIVE" % (port["hca"], port["port"]),
                port.get("sysfs_state") or "unreadable under %s" % (obs.get("sysfs_root") or "sysfs_root"),
                "bring %s up and check the cable; `cat /sys/class/infiniband/%s/ports/%s/state` must say ACTIVE"
                % (netdev, port["hca"], port["port"]),
                "RDMA port %s is %s" % (port["hca"], port.get("sysfs_state") or "unknown")))
            out.append(_check_gid(node, port, netdev, level))
        if link["primary"]:
            out.extend(_check_configured_address(config, obs_by_node, netdev, head))
        _tag(out[start:], netdev)
    return out


def _check_ipv4(config, obs_by_node, node, port, netdev, level, primary):
    have = port.get("ipv4") or []
    head = config["head"]
    if have:
        return result("link.ipv4", node, OK, level, "an IPv4 on %s" % netdev, ",".join(have),
                      summary="%s has %s" % (netdev, have[0]))
    if node == head:
        hint = ("give it the configured head link address %s/24" % obs_by_node[node]["address"]
                if primary and obs_by_node[node].get("address") else "give it an address (one /24 per link)")
    else:
        head_port = port_for(obs_by_node.get(head), netdev)
        head_ipv4 = (head_port or {}).get("ipv4") or []
        hint = ("give it one on the same /%s as %s's %s" % (head_ipv4[0].split("/")[1], head, head_ipv4[0].split("/")[0])
                if head_ipv4 else "give it one on the same subnet as %s's address on %s" % (head, netdev))
    return result("link.ipv4", node, level, level, "an IPv4 on %s" % netdev, "none",
                  "%s (netplan) and rerun" % hint, "%s has no IPv4 address" % netdev)


def _check_gid(node, port, netdev, level):
    have = port.get("ipv4") or []
    if not have:
        return result("rdma.gid_index", node, SKIP, level, summary="%s: needs link.ipv4" % netdev)
    index = port.get("gid_index")
    table = ",".join("%s@%s" % (g["ipv4"], g["index"]) for g in port.get("roce_v2_ipv4_gids") or []) or "none"
    return result(
        "rdma.gid_index", node, _bad(level, index is not None), level,
        "a RoCE v2 GID embedding %s on %s" % (have[0].split("/")[0], port["hca"]),
        "index %s" % index if index is not None else "none; RoCE v2 IPv4 GIDs: %s" % table,
        "the GID table follows the netdev's addresses: make sure %s carries the address, wait a second and rerun; "
        "if it stays missing, reload the mlx5 driver or reboot" % netdev,
        "GID index %s" % index if index is not None else "no RoCE v2 GID for %s" % have[0])


def _check_configured_address(config, obs_by_node, netdev, head):
    """HEAD_IP (and the worker's address used for ssh) must sit on the link netdev, not the LAN."""
    out = []
    for node in node_nodes(config):
        obs = obs_by_node.get(node)
        if not _node_ok(obs):
            continue
        configured = obs.get("address") or ""
        port = port_for(obs, netdev)
        found = addresses(port)
        label = "HEAD_IP" if node == head else "worker link address"
        if not configured:
            out.append(result("link.address", node, OK, FAIL, "glm53_link_address on %s" % netdev,
                              "not set; using %s" % (found[0] if found else "none"),
                              summary="%s derived from %s" % (label, netdev)))
            continue
        ok = configured in found
        out.append(result(
            "link.address", node, _bad(FAIL, ok), FAIL,
            "%s (glm53_link_address) on %s" % (configured, netdev),
            "%s has %s" % (netdev, ",".join((port or {}).get("ipv4") or []) or "no IPv4"),
            "put %s on %s (netplan), not on the LAN interface, or set glm53_link_address to the address %s really "
            "has on %s" % (configured, netdev, node, netdev),
            "%s %s is %s %s" % (label, configured, "on" if ok else "not on", netdev)))
    return out


def check_link_pairs(config, obs_by_node):
    """Head vs each worker per link: shared subnet, equal MTU, MTU as configured."""
    out = []
    head = config["head"]
    want_mtu = int(config.get("mtu") or 0)
    for link in links_of(config, obs_by_node):
        netdev, level = link["netdev"], (FAIL if link["primary"] else WARN)
        start = len(out)
        head_port = port_for(obs_by_node.get(head), netdev) if _node_ok(obs_by_node.get(head)) else None
        for node in config["workers"]:
            obs = obs_by_node.get(node)
            port = port_for(obs, netdev) if _node_ok(obs) else None
            if not port or not head_port or not port.get("ipv4") or not head_port.get("ipv4"):
                out.append(result("link.subnet", node, SKIP, level, summary="%s: needs link.ipv4 on both ends" % netdev))
            else:
                mine = (obs.get("networks") or {}).get(netdev) or []
                theirs = (obs_by_node[head].get("networks") or {}).get(netdev) or []
                shared = [n for n in mine if n in theirs]
                out.append(result(
                    "link.subnet", node, _bad(level, bool(shared)), level,
                    "a subnet shared with %s (%s)" % (head, ",".join(theirs)),
                    ",".join(port["ipv4"]),
                    "readdress %s on %s into %s's subnet %s (netplan) and rerun" % (netdev, node, head, theirs[0]),
                    "%s shares %s with %s" % (netdev, shared[0], head) if shared else
                    "%s has no subnet in common with %s" % (netdev, head)))
            if not port or not head_port or port.get("mtu") is None or head_port.get("mtu") is None:
                out.append(result("link.mtu_match", node, SKIP, level, summary="%s: needs the netdev on both ends" % netdev))
            else:
                same = port["mtu"] == head_port["mtu"]
                out.append(result(
                    "link.mtu_match", node, _bad(level, same), level,
                    "MTU %s as on %s" % (head_port["mtu"], head), "MTU %s" % port["mtu"],
                    "set the same MTU on %s on both Sparks (netplan `mtu:`, with the rank containers stopped)" % netdev,
                    "%s MTU %s" % (netdev, "matches" if same else "differs from %s" % head)))
        if want_mtu:
            for node in node_nodes(config):
                obs = obs_by_node.get(node)
                port = port_for(obs, netdev) if _node_ok(obs) else None
                if not port or port.get("mtu") is None:
                    out.append(result("link.mtu", node, SKIP, level, summary="%s: needs the netdev" % netdev))
                    continue
                ok = port["mtu"] == want_mtu
                out.append(result(
                    "link.mtu", node, _bad(level, ok), level, "MTU %d (cx7_link_mtu)" % want_mtu, "MTU %s" % port["mtu"],
                    "set `mtu: %d` for %s in netplan on %s (or change cx7_link_mtu)" % (want_mtu, netdev, node),
                    "%s MTU %s" % (netdev, port["mtu"])))
        _tag(out[start:], netdev)
    return out


def ping_plan(config, obs_by_node, node):
    """DF pings this node should send: one per link whose both ends are Up with an IPv4.

    Size = own MTU - 28 (IPv4 + ICMP headers), so the frame is exactly one MTU.
    """
    plan = []
    head = config["head"]
    peers = config["workers"] if node == head else [head]
    obs = obs_by_node.get(node)
    if not _node_ok(obs):
        return plan
    for link in links_of(config, obs_by_node):
        netdev = link["netdev"]
        port = port_for(obs, netdev)
        if not port or port.get("state") != "Up" or not port.get("ipv4") or not port.get("mtu"):
            continue
        for peer in peers:
            peer_obs = obs_by_node.get(peer)
            peer_port = port_for(peer_obs, netdev) if _node_ok(peer_obs) else None
            if not peer_port or not peer_port.get("ipv4"):
                continue
            mine = (obs.get("networks") or {}).get(netdev) or []
            target = link_address(peer_obs, netdev, link["primary"], mine)
            plan.append({"netdev": netdev, "peer": peer, "target": target, "size": int(port["mtu"]) - 28,
                         "primary": link["primary"]})
    return plan


def probe_plan(config, obs_by_node, node):
    """What this node probes next, decided from the facts of every node.

    ``pings``: see :func:`ping_plan`. ``port_probe``: ``{mode, address, port}``; the head
    listens and the workers connect on the head's link address, only when both ends have
    the primary link Up with an address. ``ssh_target``: ``user@worker-link-address`` for
    the head, else None.
    """
    head = config["head"]
    primary = links_of(config, obs_by_node)[0]["netdev"]
    head_obs = obs_by_node.get(head)
    head_port = port_for(head_obs, primary) if _node_ok(head_obs) else None
    head_address = link_address(head_obs, primary, True) if head_port else None
    head_nets = ((head_obs or {}).get("networks") or {}).get(primary)
    worker_ready = {}
    for worker in config["workers"]:
        obs = obs_by_node.get(worker)
        port = port_for(obs, primary) if _node_ok(obs) else None
        ready = bool(port) and port.get("state") == "Up" and bool(port.get("ipv4"))
        worker_ready[worker] = link_address(obs, primary, True, head_nets) if ready else None
    head_ready = bool(head_port) and head_port.get("state") == "Up" and bool(head_address)
    probe = None
    if head_ready and any(worker_ready.values()):
        if node == head:
            probe = {"mode": "listen", "address": head_address, "port": int(config["master_port"])}
        elif worker_ready.get(node):
            probe = {"mode": "connect", "address": head_address, "port": int(config["master_port"])}
    ssh_target = None
    if node == head and config["workers"] and worker_ready.get(config["workers"][0]):
        user = config.get("ssh_user") or ""
        ssh_target = ("%s@%s" % (user, worker_ready[config["workers"][0]])) if user else worker_ready[config["workers"][0]]
    return {"pings": ping_plan(config, obs_by_node, node), "port_probe": probe, "ssh_target": ssh_target}


def check_pings(config, obs_by_node):
    out = []
    for node in node_nodes(config):
        obs = obs_by_node.get(node) or {}
        done = {}
        for item in obs.get("pings") or []:
            plan = item.get("item") or {}
            done[(plan.get("netdev"), plan.get("peer"))] = (plan, item)
        for link in links_of(config, obs_by_node):
            netdev, level = link["netdev"], (FAIL if link["primary"] else WARN)
            peers = config["workers"] if node == config["head"] else [config["head"]]
            for peer in peers:
                if (netdev, peer) not in done:
                    out.append(result("link.df_ping", node, SKIP, level,
                                      summary="%s -> %s: needs link.port_up and link.ipv4 on both ends" % (netdev, peer),
                                      netdev=netdev))
                    continue
                plan, item = done[(netdev, peer)]
                ok = item.get("rc") == 0
                cmd = "ping -M do -s %s -I %s %s" % (plan["size"], netdev, plan["target"])
                out.append(result(
                    "link.df_ping", node, _bad(level, ok), level,
                    "replies to `%s`" % cmd, "replies" if ok else ping_error(item),
                    "make the MTU equal on both ends of %s and check nothing on the path drops %d-byte frames "
                    "(a mismatched MTU or a switch in between); a plain `ping -I %s %s` tells MTU from reachability"
                    % (netdev, plan["size"] + 28, netdev, plan["target"]),
                    "DF ping %s -> %s (%s) at %d bytes %s" % (node, peer, plan["target"], plan["size"],
                                                              "ok" if ok else "failed"), netdev=netdev))
    return out


def check_ssh(config, obs_by_node):
    """Head -> worker BatchMode ssh over the link address, and docker there as the same user."""
    out = []
    head = config["head"]
    obs = obs_by_node.get(head) or {}
    reg = obs.get("ssh")
    worker = config["workers"][0] if config["workers"] else None
    if not reg or reg.get("skipped") or "rc" not in reg:
        out.append(result("ssh.head_to_worker", head, SKIP, FAIL, summary="needs the worker's link address"))
        out.append(result("ssh.worker_docker", worker, SKIP, FAIL, summary="needs ssh.head_to_worker"))
        return out
    target = obs.get("ssh_target") or "the worker"
    ssh_ok = reg["rc"] != SSH_FAILED_RC
    reason = command_error(reg)
    if "host key verification failed" in reason.lower():
        fix = "on %s as the deploy user run `ssh %s true` once and accept the host key (or add it with ssh-keyscan)" % (
            head, target)
    else:
        fix = ("on %s as the deploy user run `ssh-copy-id %s` (BatchMode needs key auth, no password prompt) "
               "and check the worker's sshd listens on its link address" % (head, target))
    out.append(result(
        "ssh.head_to_worker", head, _bad(FAIL, ssh_ok), FAIL,
        "`ssh -o BatchMode=yes %s` logs in without a prompt" % target,
        "logged in" if ssh_ok else reason, fix,
        "BatchMode ssh to %s %s" % (target, "works" if ssh_ok else "failed")))
    if not ssh_ok:
        out.append(result("ssh.worker_docker", worker, SKIP, FAIL, summary="needs ssh.head_to_worker"))
        return out
    docker_ok = reg["rc"] == 0
    out.append(result(
        "ssh.worker_docker", worker, _bad(FAIL, docker_ok), FAIL,
        "`docker ps` works for the ssh user on %s" % worker, "works" if docker_ok else reason,
        "add the user to the docker group on %s (`sudo usermod -aG docker <user>`, then log in again) and make sure "
        "dockerd runs (`systemctl status docker`)" % worker,
        "docker over ssh %s" % ("works" if docker_ok else "failed")))
    return out


def check_master_port(config, obs_by_node):
    """A worker -> head TCP connect to the NCCL master port on the head's link address."""
    out = []
    head = config["head"]
    port = config["master_port"]
    listen = parse_json_stdout((obs_by_node.get(head) or {}).get("port_probe"))
    for node in config["workers"]:
        connect = parse_json_stdout((obs_by_node.get(node) or {}).get("port_probe"))
        if not listen or not connect:
            out.append(result("port.master", node, SKIP, FAIL,
                              summary="port %s: needs link.address on %s and both nodes reachable" % (port, head)))
            continue
        target = "%s:%s" % (connect.get("address"), port)
        ok = bool(connect.get("connected"))
        if ok and not listen.get("bound"):
            found = "reachable; already in use on %s (%s)" % (head, listen.get("error"))
        elif ok:
            found = "connected"
        elif not listen.get("bound"):
            found = "%s could not listen: %s" % (head, listen.get("error"))
        else:
            found = connect.get("error") or "no connection"
        out.append(result(
            "port.master", node, _bad(FAIL, ok), FAIL,
            "TCP connect %s -> %s (NCCL master port for path %s)" % (node, target, config.get("path")),
            found,
            "allow TCP %s from %s on %s (e.g. `sudo ufw allow from <worker link address> to any port %s proto tcp`) "
            "and make sure nothing else holds the port" % (port, node, head, port),
            "master port %s %s from %s" % (port, "reachable" if ok else "not reachable", node)))
    return out


def check_gpus(config, obs_by_node):
    out = []
    want = config.get("gpu_name") or "NVIDIA GB10"
    bad_prefixes = config.get("driver_warn_prefixes") or []
    allow = [re.compile(p) for p in config.get("gpu_process_allow") or []]
    drivers = {}
    for node in node_nodes(config):
        obs = obs_by_node.get(node)
        if not obs:
            continue
        reg = obs.get("gpu") or {}
        gpus = parse_gpus(reg.get("stdout")) if reg.get("rc") == 0 else []
        names = sorted(set(g["name"] for g in gpus))
        ok = bool(gpus) and all(g["name"] == want for g in gpus)
        out.append(result(
            "gpu.model", node, _bad(FAIL, ok), FAIL, want,
            ",".join(names) if gpus else "nvidia-smi failed: %s" % command_error(reg),
            "install the NVIDIA driver (stock DGX OS has it) and make sure `nvidia-smi` works as the deploy user",
            "GPU %s" % (names[0] if names else "not visible")))
        if gpus:
            driver = gpus[0]["driver"]
            drivers[node] = driver
            known_bad = [p for p in bad_prefixes if driver.startswith(p)]
            out.append(result(
                "gpu.driver_version", node, _bad(WARN, not known_bad), WARN,
                "a driver outside %s" % ",".join(bad_prefixes), driver,
                "590.x has a reported CUDA-graph deadlock on GB10; 580.x is known good",
                "driver %s" % driver))
        apps_reg = obs.get("apps") or {}
        if apps_reg.get("rc") != 0:
            out.append(result("gpu.idle", node, FAIL, FAIL, "no CUDA compute process",
                              "cannot list: %s" % command_error(apps_reg),
                              "make `nvidia-smi --query-compute-apps=pid,name --format=csv,noheader` work",
                              "GPU process list unreadable"))
            continue
        apps = parse_compute_apps(apps_reg.get("stdout"))
        foreign = [a for a in apps if not any(rx.search(a["name"]) for rx in allow)]
        out.append(result(
            "gpu.idle", node, _bad(FAIL, not foreign), FAIL, "no foreign CUDA compute process",
            ",".join("pid %s (%s)" % (a["pid"], a["name"]) for a in foreign) or "none",
            "stop it first (another engine, a notebook, a benchmark): only one GLM-5.3 stack fits in GPU memory; "
            "`nvidia-smi` on %s shows it" % node,
            "GPU idle" if not foreign else "%d foreign CUDA process(es)" % len(foreign)))
    head = config["head"]
    for node in config["workers"]:
        if head not in drivers or node not in drivers:
            continue
        same = drivers[node] == drivers[head]
        out.append(result(
            "gpu.driver_match", node, _bad(WARN, same), WARN, "driver %s as on %s" % (drivers[head], head),
            drivers[node], "install the same driver version on both Sparks (NCCL across mismatched drivers is untested)",
            "driver %s" % ("matches" if same else "differs from %s" % head)))
    return out


def check_memory(config, obs_by_node):
    out = []
    gates = (("memory.mem_free", "mem_free", "MemFree", config.get("mem_free_gib")),
             ("memory.mem_available", "mem_available", "MemAvailable", config.get("mem_available_gib")))
    for node in node_nodes(config):
        obs = obs_by_node.get(node)
        if not obs:
            continue
        text = obs.get("meminfo")
        summary = memory_summary(parse_meminfo(text)) if text else None
        for name, key, label, gate in gates:
            if gate is None:
                continue
            if not summary or not summary.get(key):
                out.append(result(name, node, WARN, WARN, ">= %s GiB %s" % (gate, label), "unreadable",
                                  "make /proc/meminfo readable", "%s unknown" % label))
                continue
            ok = summary[key] >= float(gate) * GIB
            out.append(result(
                name, node, _bad(WARN, ok), WARN, ">= %s GiB %s" % (gate, label), human_gib(summary[key]),
                "close desktop sessions, browsers and containers on %s; the model needs the memory when it loads "
                "(page cache is dropped right before the engine starts)" % node,
                "%s %s" % (label, human_gib(summary[key]))))
    return out


def disk_groups(entries):
    """Group probe entries by filesystem (st_dev) and sum what each filesystem must still hold.

    Bytes already under a directory (``present``, e.g. the downloaded checkpoint on a
    rerun) count toward that directory's need, up to the need.
    """
    groups = {}
    order = []
    for entry in entries:
        key = entry.get("dev")
        if key not in groups:
            groups[key] = {"mount": entry.get("mount"), "free": entry.get("free"), "need": 0, "present": 0,
                           "names": [], "paths": []}
            order.append(key)
        group = groups[key]
        need = int(entry.get("need") or 0)
        present = min(need, int(entry.get("present") or 0))
        group["need"] += need - present
        group["present"] += present
        group["names"].append(entry.get("name"))
        group["paths"].append(entry.get("path"))
    return [groups[k] for k in order]


def check_disk(config, obs_by_node):
    out = []
    for node in node_nodes(config):
        obs = obs_by_node.get(node)
        if not obs:
            continue
        probe = parse_json_stdout(obs.get("disk"))
        if probe is None:
            out.append(result("disk.free", node, FAIL, FAIL, "free space readable", command_error(obs.get("disk")),
                              "check that python3 runs on %s" % node, "disk probe failed"))
            continue
        errors = [e for e in probe if e.get("error")]
        for entry in errors:
            out.append(result("disk.free", node, FAIL, FAIL, "free space at %s readable" % entry.get("path"),
                              entry["error"], "create the directory or fix its permissions", "cannot stat %s" % entry.get("path")))
        for group in disk_groups([e for e in probe if not e.get("error")]):
            ok = group["free"] >= group["need"]
            what = "+".join(group["names"])
            expected = ">= %s free on %s for %s (path %s)" % (
                human_bytes(group["need"]), group["mount"], what, config.get("path"))
            out.append(result(
                "disk.free", node, _bad(FAIL, ok), FAIL, expected,
                "%s free" % human_bytes(group["free"]) + (
                    " (%s already there counted)" % human_bytes(group["present"]) if group["present"] else ""),
                "free %s on %s (%s) or point the %s directories at a larger disk"
                % (human_bytes(group["need"] - group["free"]), group["mount"], ", ".join(group["paths"]), what),
                "%s: %s free for %s" % (group["mount"], human_bytes(group["free"]), what)))
    return out


# --- outputs -------------------------------------------------------------------------------


def nccl_settings(config, obs_by_node, checks):
    """Per-node NCCL environment plus the link addresses, from what the checks proved.

    The second CX7 function joins NCCL_IB_HCA only when all its link checks passed on
    every node; otherwise NCCL uses the first function alone.
    """
    head = config["head"]
    nodes = node_nodes(config)
    links = links_of(config, obs_by_node)
    usable = []
    for link in links:
        related = [c for c in checks if c.get("netdev") == link["netdev"] and c["node"] in nodes]
        if link["primary"] or (related and all(c["status"] == OK for c in related)):
            usable.append(link)
    head_obs = obs_by_node.get(head) or {}
    worker = config["workers"][0] if config["workers"] else None
    primary = links[0]["netdev"]
    head_net = (head_obs.get("networks") or {}).get(primary) or []
    head_address = link_address(head_obs, primary, True)
    worker_address = link_address(obs_by_node.get(worker), primary, True, head_net) if worker else None
    env = {}
    for node in nodes:
        obs = obs_by_node.get(node)
        hcas, gids = [], {}
        for link in usable:
            port = port_for(obs, link["netdev"]) if _node_ok(obs) else None
            if port:
                hcas.append(port["hca"])
                gids[port["hca"]] = port.get("gid_index")
        first_gid = gids.get(hcas[0]) if hcas else None
        env[node] = {
            "NCCL_SOCKET_IFNAME": primary,
            "GLOO_SOCKET_IFNAME": primary,
            "NCCL_IB_HCA": ",".join(hcas),
            "NCCL_IB_GID_INDEX": "" if first_gid is None else str(first_gid),
        }
    return {
        "env": env,
        "gid_index": dict((n, _gid_map(obs_by_node.get(n), usable)) for n in nodes),
        "head_address": head_address,
        "worker_address": worker_address,
        "links": [
            {"netdev": link["netdev"],
             "head_address": link_address(head_obs, link["netdev"], link["primary"]),
             "worker_address": link_address(obs_by_node.get(worker), link["netdev"], link["primary"],
                                            (head_obs.get("networks") or {}).get(link["netdev"])) if worker else None}
            for link in usable
        ],
    }


def _gid_map(obs, links):
    out = {}
    for link in links:
        port = port_for(obs, link["netdev"]) if _node_ok(obs) else None
        if port:
            out[port["hca"]] = port.get("gid_index")
    return out


def check_gid_uniform(config, obs_by_node, usable_links):
    """NCCL_IB_GID_INDEX is one value for all HCAs; warn when the HCAs of a node disagree."""
    out = []
    for node in node_nodes(config):
        gids = _gid_map(obs_by_node.get(node), usable_links)
        values = set(v for v in gids.values() if v is not None)
        if len(gids) < 2:
            continue
        ok = len(values) <= 1
        out.append(result(
            "rdma.gid_index_uniform", node, _bad(WARN, ok), WARN, "one RoCE v2 GID index for all HCAs",
            ",".join("%s=%s" % kv for kv in sorted(gids.items())),
            "NCCL_IB_GID_INDEX takes the first HCA's index; pin per-HCA indexes (GLM53_TF_ROCE_HCA=name:gid) or "
            "give both functions the same address layout", "GID indexes %s" % ("agree" if ok else "differ")))
    return out


def evaluate(obs_by_node, config):
    """Run every check; return ``{checks, status, nodes, failures, warnings, nccl}``."""
    checks = []
    checks += check_nodes(config, obs_by_node)
    checks += check_netdev_names(config, obs_by_node)
    checks += check_link_ports(config, obs_by_node)
    checks += check_link_pairs(config, obs_by_node)
    checks += check_pings(config, obs_by_node)
    checks += check_ssh(config, obs_by_node)
    checks += check_master_port(config, obs_by_node)
    checks += check_gpus(config, obs_by_node)
    checks += check_memory(config, obs_by_node)
    checks += check_disk(config, obs_by_node)
    nccl = nccl_settings(config, obs_by_node, checks)
    usable = [link for link in links_of(config, obs_by_node) if link["netdev"] in [l["netdev"] for l in nccl["links"]]]
    checks += check_gid_uniform(config, obs_by_node, usable)
    nodes = {}
    for node in node_nodes(config):
        worst = max([_RANK[c["status"]] for c in checks if c["node"] == node] or [0])
        nodes[node] = {0: OK, 1: WARN, 2: FAIL}[worst]
    failures = [c for c in checks if c["status"] == FAIL]
    warnings = [c for c in checks if c["status"] == WARN]
    overall = FAIL if failures else (WARN if warnings else OK)
    return {"status": overall, "nodes": nodes, "checks": checks, "failures": failures, "warnings": warnings,
            "nccl": nccl}


def report_table(report):
    """A short fixed-width table: one row per check, one column per node (worst status)."""
    nodes = list(report["nodes"])
    rows = {}
    order = []
    for check in report["checks"]:
        if check["check"] not in rows:
            rows[check["check"]] = {}
            order.append(check["check"])
        cell = rows[check["check"]]
        previous = cell.get(check["node"])
        if previous is None or _RANK[check["status"]] > _RANK[previous] or previous == SKIP:
            cell[check["node"]] = check["status"]
    width = max([len(name) for name in order] + [5])
    col = max([len(n) for n in nodes] + [4])

    def row(label, cells):
        return ("%-*s  %s" % (width, label, "  ".join("%-*s" % (col, cell) for cell in cells))).rstrip()

    lines = [row("check", nodes)]
    for name in order:
        lines.append(row(name, [rows[name].get(n, "-") for n in nodes]))
    lines.append(row("overall", [report["nodes"][n] for n in nodes]))
    return lines
