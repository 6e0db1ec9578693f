# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers for the cluster contract: its file names, its JSON and shell-sourceable
forms, and ``validate``, the one check of its types and relations. The cluster_contract
module runs it before writing and after reading the files on a node, and the controller
code that consumes the contract (the tensorfold site values) runs it too, so a contract
that would become ``spark@None`` downstream stops where it is written or read. Not a
public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import ipaddress
import json
import os
import re
import shlex

SCHEMA = 1
JSON_NAME = "cluster.json"
ENV_NAME = "cluster.env"
REQUIRED = ("path", "head", "workers", "master_address", "master_port", "ssh_user", "nodes")
NODE_REQUIRED = ("rank", "role", "link_address", "netdev", "env")
PATHS = ("tensorfold", "vllm")
# Both serving paths span a head and at least one worker.
MULTI_NODE_PATHS = ("tensorfold", "vllm")
# The range cx7_link accepts for its master port inputs (an unprivileged port: the engines bind it).
PORT_RANGE = (1024, 65535)
# A login name as it goes into user@address and into cluster.env (useradd allows 32 characters).
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NETDEV = re.compile(r"^[^\s/:]{1,15}$")
_IPV4_FIX = ("put an IPv4 address on the CX7 link netdev (glm53_link_address, e.g. 192.168.100.10 with its "
             "prefix; cx7_link_configure: true writes it with netplan) and rerun the preflight")


def shell_quote(value):
    """Quote for POSIX sh, so `. cluster.env` gives back the exact string."""
    return shlex.quote("" if value is None else str(value))


def render_json(contract):
    return json.dumps(contract, indent=2, sort_keys=True) + "\n"


def render_env(contract, node):
    """This node's view of the contract as ``NAME=value`` lines (``. cluster.env`` in a shell)."""
    mine = contract["nodes"][node]
    workers = contract.get("workers") or []
    values = [
        ("GLM53_PATH", contract.get("path")),
        ("GLM53_NODE", node),
        ("GLM53_RANK", mine.get("rank")),
        ("GLM53_ROLE", mine.get("role")),
        ("GLM53_HEAD", contract.get("head")),
        ("GLM53_WORKERS", " ".join(workers)),
        ("GLM53_NODE_COUNT", 1 + len(workers)),
        ("GLM53_LINK_NETDEV", mine.get("netdev")),
        ("GLM53_LINK_ADDRESS", mine.get("link_address")),
        ("GLM53_WORKER_ADDRESSES", " ".join(contract["nodes"][w].get("link_address") or "" for w in workers)),
        ("GLM53_MASTER_ADDR", contract.get("master_address")),
        ("GLM53_MASTER_PORT", contract.get("master_port")),
        ("GLM53_SSH_USER", contract.get("ssh_user")),
    ]
    values += sorted((mine.get("env") or {}).items())
    lines = ["# dgx_spark.glm53 cluster contract for %s; written by the cx7_link preflight. Do not edit." % node]
    lines += ["%s=%s" % (name, shell_quote(value)) for name, value in values]
    return "\n".join(lines) + "\n"


def _digest(text):
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_digests(config_dir):
    """What a node holds now: ``{cluster.json: sha256 or None, cluster.env: ...}`` (None: no
    such file, or unreadable). The preflight reads it in its gather, so a rerun whose contract
    is unchanged writes nothing and costs no round trip to write it."""
    digests = {}
    for name in (JSON_NAME, ENV_NAME):
        try:
            with open(os.path.join(config_dir, name), "rb") as handle:
                digests[name] = hashlib.sha256(handle.read()).hexdigest()
        except (IOError, OSError):
            digests[name] = None
    return digests


def wanted_digests(contract, node):
    """The digests of the files ``cluster_contract state=present`` writes on ``node``."""
    return {JSON_NAME: _digest(render_json(contract)), ENV_NAME: _digest(render_env(contract, node))}


def _shown(value):
    return "missing (null)" if value is None else repr(value)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def address_problem(field, value):
    """Why ``value`` is not a usable IPv4 address on the link (None when it is one).

    IPv6 is refused, a link-local one with a zone (``fe80::1%enp1s0f1np1``) by name: the
    preflight's RoCE v2 GID choice (the IPv4-mapped GID), the ssh targets (``user@address``)
    and the engines' HEAD_IP and MASTER_ADDR all take an IPv4 address, and a zone cannot
    travel in any of them.
    """
    if not isinstance(value, str) or not value:
        return "%s is %s, expected the node's IPv4 address on the CX7 link" % (field, _shown(value))
    if ":" in value:
        bare, _sep, zone = value.partition("%")
        try:
            v6 = ipaddress.IPv6Address(bare)
        except ValueError:
            v6 = None
        if v6 is not None and v6.is_link_local and zone:
            return ("%s is %r, an IPv6 link-local address with a zone (%s), which the engines, NCCL's RoCE GID "
                    "choice and ssh cannot use here; expected an IPv4 address: %s" % (field, value, zone, _IPV4_FIX))
        return "%s is %r, an IPv6 or unknown address; expected an IPv4 address: %s" % (field, value, _IPV4_FIX)
    try:
        address = ipaddress.IPv4Address(value)
    except ValueError:
        return "%s is %r, which is not an IPv4 address (expected four decimal numbers, e.g. 192.168.100.10)" % (
            field, value)
    for kind, bad in (("unspecified", address.is_unspecified), ("loopback", address.is_loopback),
                      ("multicast", address.is_multicast), ("broadcast", value == "255.255.255.255")):
        if bad:
            return "%s is %s, a %s address; expected the node's own IPv4 address on the CX7 link" % (
                field, value, kind)
    return None


def _check_names(contract):
    """path, head, workers and nodes as names, and how they relate."""
    problems = []
    path, head, workers, nodes = (contract.get(key) for key in ("path", "head", "workers", "nodes"))
    if path not in PATHS:
        problems.append("path is %s, expected one of %s" % (_shown(path), ", ".join(PATHS)))
    if not isinstance(head, str) or not head:
        problems.append("head is %s, expected the head's inventory name" % _shown(head))
        head = None
    if not isinstance(workers, list) or not all(isinstance(w, str) and w for w in workers):
        problems.append("workers is %s, expected a list of the workers' inventory names" % _shown(workers))
        workers = []
    elif not workers and path in MULTI_NODE_PATHS:
        problems.append("workers is empty; path %s needs at least one worker (group spark_workers)" % path)
    for worker in sorted(set(w for w in workers if workers.count(w) > 1)):
        problems.append("workers lists %s more than once" % worker)
    if head in workers:
        problems.append("head %s is also listed in workers" % head)
    if not isinstance(nodes, dict):
        problems.append("nodes is %s, expected an object with an entry for the head and each worker" % _shown(nodes))
        return problems
    listed = ", ".join(sorted(nodes)) or "none"
    for name in ([head] if head else []) + workers:
        if name not in nodes:
            problems.append("%s %s has no entry in nodes (it has %s)" % ("head" if name == head else "worker", name,
                                                                         listed))
    for name in sorted(set(nodes) - set([head] + workers)):
        problems.append("nodes has %s, which is neither the head nor a worker" % name)
    return problems


def _check_env(field, env):
    if not isinstance(env, dict):
        return ["%s is %s, expected an object of NCCL/GLOO settings" % (field, _shown(env))]
    problems = []
    for name in sorted(env, key=str):
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            problems.append("%s has the name %r, expected a shell variable name" % (field, name))
        elif not isinstance(env[name], str):
            problems.append("%s.%s is %s, expected a string (NCCL and GLOO read their settings as strings)"
                            % (field, name, _shown(env[name])))
    return problems


def _check_node(name, entry, rank, role):
    """One node's entry: its rank and role where the head and workers put it, its address,
    netdev and settings."""
    field = "nodes.%s" % name
    if not isinstance(entry, dict):
        return ["%s is %s, expected an object" % (field, _shown(entry))]
    problems = ["%s.%s missing" % (field, key) for key in NODE_REQUIRED if key not in entry]
    if "rank" in entry and (not _is_int(entry["rank"]) or entry["rank"] != rank):
        problems.append("%s.rank is %s, expected %d (the head is 0, then the workers in order)"
                        % (field, _shown(entry["rank"]), rank))
    if "role" in entry and entry["role"] != role:
        problems.append("%s.role is %s, expected %r" % (field, _shown(entry["role"]), role))
    if "link_address" in entry:
        problems += [p for p in [address_problem(field + ".link_address", entry["link_address"])] if p]
    if "netdev" in entry and (not isinstance(entry["netdev"], str) or not _NETDEV.match(entry["netdev"])):
        problems.append("%s.netdev is %s, expected the link netdev's name (e.g. enp1s0f1np1)"
                        % (field, _shown(entry["netdev"])))
    if "env" in entry:
        problems += _check_env(field + ".env", entry["env"])
    hcas = entry.get("hcas", [])
    if not isinstance(hcas, list) or not all(isinstance(h, str) and h for h in hcas):
        problems.append("%s.hcas is %s, expected a list of RDMA device names" % (field, _shown(hcas)))
    gids = entry.get("gid_index", {})
    if not isinstance(gids, dict) or not all(g is None or (_is_int(g) and g >= 0) for g in gids.values()):
        problems.append("%s.gid_index is %s, expected {device: GID index or null}" % (field, _shown(gids)))
    return problems


def _check_cluster(contract):
    """The master address and port, the ssh user and the links."""
    problems = []
    head, nodes = contract.get("head"), contract.get("nodes")
    head = head if isinstance(head, str) else None
    master = contract.get("master_address")
    wrong = address_problem("master_address", master)
    if wrong:
        problems.append(wrong)
    elif isinstance(nodes, dict) and isinstance(nodes.get(head), dict) and nodes[head].get("link_address") != master:
        problems.append("master_address is %s, expected the head's link address %s"
                        % (master, _shown(nodes[head].get("link_address"))))
    port = contract.get("master_port")
    if not _is_int(port) or not PORT_RANGE[0] <= port <= PORT_RANGE[1]:
        problems.append("master_port is %s, expected an integer port in %d-%d (cx7_link_master_port_<path>)"
                        % (_shown(port), PORT_RANGE[0], PORT_RANGE[1]))
    user = contract.get("ssh_user")
    if not isinstance(user, str) or not user:
        problems.append("ssh_user is %s, expected the user the head logs in to the workers as (cx7_link_ssh_user, "
                        "by default the workers' ansible_user): set ansible_user for the workers and rerun the "
                        "preflight" % ("empty" if user == "" else _shown(user)))
    elif not _USER.match(user):
        problems.append("ssh_user is %r, expected a login name (letters, digits, '_', '.', '-'; at most 32)" % user)
    links = contract.get("links", [])
    if not isinstance(links, list) or not all(isinstance(link, dict) for link in links):
        return problems + ["links is %s, expected a list of {netdev, primary, addresses}" % _shown(links)]
    for index, link in enumerate(links):
        addresses = link.get("addresses") or {}
        if not isinstance(addresses, dict):
            problems.append("links[%d].addresses is %s, expected {node: address}" % (index, _shown(addresses)))
            continue
        for name in sorted(addresses):
            if addresses[name] is not None:
                problems += [p for p in [address_problem("links[%d].addresses.%s" % (index, name),
                                                         addresses[name])] if p]
    return problems


def validate(contract):
    """Problems that make a contract unusable: ``[message]``, each naming the field, what was
    expected and what was found; empty when the contract is usable."""
    if not isinstance(contract, dict):
        return ["the contract is not a JSON object"]
    problems = []
    if contract.get("schema") != SCHEMA:
        problems.append("schema %r, expected %d" % (contract.get("schema"), SCHEMA))
    missing = [key for key in REQUIRED if key not in contract]
    problems += ["key %s missing" % key for key in missing]
    if missing:
        return problems
    problems += _check_names(contract)
    nodes, head = contract["nodes"], contract["head"]
    workers = contract["workers"] if isinstance(contract["workers"], list) else []
    if isinstance(nodes, dict) and isinstance(head, str) and all(isinstance(w, str) for w in workers):
        order = [head] + [w for w in workers if w != head]
        for rank, name in enumerate(order):
            if name in nodes:
                problems += _check_node(name, nodes[name], rank, "head" if rank == 0 else "worker")
    return problems + _check_cluster(contract)
