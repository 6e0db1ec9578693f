# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""cx7_link: NCCL settings and the cluster contract, from what the checks proved
(controller side). Not a public API.

The cluster contract is the one document later roles read (head, workers, link
addresses, master address and port, per-node NCCL/GLOO environment). The
preflight publishes it as the ``glm53_cluster`` fact and persists it on every node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_links import (
    gid_for,
    link_addresses,
    links_of,
    nodes_of,
    port_for,
)
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._preflight_result import OK, WARN, passed_or, result

SCHEMA = 1


def usable_links(config, obs_by_node, checks):
    """The primary link, plus the second function when all its checks passed on every node."""
    nodes = nodes_of(config)
    usable = []
    for link in links_of(config, obs_by_node):
        related = [c for c in checks if c.get("netdev") == link["netdev"] and c["node"] in nodes]
        if link["primary"] or (related and all(c["status"] == OK for c in related)):
            usable.append(link)
    return usable


def nccl_settings(config, obs_by_node, links):
    """``{node: {hcas, gid_index: {hca: index}, env}}`` for the usable links.

    NCCL_IB_GID_INDEX is the GID of the address the engines use on the link (the
    configured link address), not of the netdev's first IPv4.
    """
    addresses = dict((link["netdev"], link_addresses(config, obs_by_node, link["netdev"])) for link in links)
    primary = links[0]["netdev"]
    out = {}
    for node in nodes_of(config):
        obs = obs_by_node.get(node)
        hcas, gids = [], {}
        for link in links:
            port = port_for(obs, link["netdev"])
            if port:
                hcas.append(port["hca"])
                gids[port["hca"]] = gid_for(port, addresses[link["netdev"]].get(node))
        first = gids.get(hcas[0]) if hcas else None
        out[node] = {
            "hcas": hcas,
            "gid_index": gids,
            "env": {
                "NCCL_SOCKET_IFNAME": primary,
                "GLOO_SOCKET_IFNAME": primary,
                "NCCL_IB_HCA": ",".join(hcas),
                "NCCL_IB_GID_INDEX": "" if first is None else str(first),
            },
        }
    return out


def check_gid_uniform(config, settings):
    """NCCL_IB_GID_INDEX is one value for all HCAs; warn when a node's HCAs disagree."""
    out = []
    for node in nodes_of(config):
        gids = settings[node]["gid_index"]
        if len(gids) < 2:
            continue
        ok = len(set(v for v in gids.values() if v is not None)) <= 1
        out.append(result(
            "rdma.gid_index_uniform", node, passed_or(WARN, ok), WARN, expected="one RoCE v2 GID index for all HCAs",
            found=",".join("%s=%s" % kv for kv in sorted(gids.items())),
            fix="NCCL_IB_GID_INDEX takes the first HCA's index; pin per-HCA indexes (GLM53_TF_ROCE_HCA=name:gid) or "
                "give both functions the same address layout",
            summary="GID indexes %s" % ("agree" if ok else "differ")))
    return out


def cluster_contract(config, obs_by_node, links, settings):
    """The contract every later role reads. Holds no timestamps or measurements, so a
    rerun on an unchanged cluster writes the same bytes (and reports no change)."""
    head = config["head"]
    addresses = dict((link["netdev"], link_addresses(config, obs_by_node, link["netdev"])) for link in links)
    primary = links[0]["netdev"]
    user = config.get("ssh_user") or ""
    nodes = {}
    for rank, node in enumerate(nodes_of(config)):
        nodes[node] = {
            "rank": rank,
            "role": "head" if node == head else "worker",
            "link_address": addresses[primary].get(node),
            "netdev": primary,
            "hcas": settings[node]["hcas"],
            "gid_index": settings[node]["gid_index"],
            "env": settings[node]["env"],
        }
    return {
        "schema": SCHEMA,
        "path": config.get("path"),
        "head": head,
        "workers": list(config["workers"]),
        "master_address": addresses[primary].get(head),
        "master_port": int(config["master_port"]),
        "links": [{"netdev": link["netdev"], "primary": link["primary"], "addresses": addresses[link["netdev"]]}
                  for link in links],
        "ssh_user": user,
        "nodes": nodes,
    }
