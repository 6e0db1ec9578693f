# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers: the ranks of the operations plan (ops.json) from the cluster contract. Not a public API.

What the head's operations program needs of each rank: its node, how the head reaches it (the
contract's ssh user at the node's link address, as the kit's WORKER_SSH), its container, what to
evict and where to look for disk, its link netdevs, and for each HCA the NCCL ranks use the
netdev and address whose RoCE v2 GID index a heal recomputes (it moves after a link event).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dgx_spark.glm53.plugins.module_utils._engines import head_container, worker_container


def rank_links(contract, node, nccl_ib_hca=None):
    """``(netdevs, gids)`` of ``node``: every link netdev, and ``[{hca, netdev, ipv4}]`` for the HCAs
    NCCL uses there - ``nccl_ib_hca`` (the rank's own NCCL_IB_HCA, e.g. one HCA with
    vllm_nvfp4_single_hca), else the contract's, else all of the node's HCAs. HCA ``i`` serves link ``i``."""
    entry = contract["nodes"][node]
    links = contract.get("links") or []
    hcas = list(entry.get("hcas") or [])
    named = nccl_ib_hca if nccl_ib_hca is not None else (entry.get("env") or {}).get("NCCL_IB_HCA")
    used = [h for h in (named or "").split(",") if h] or hcas
    gids = []
    for index, hca in enumerate(hcas):
        if hca in used and index < len(links) and node in (links[index].get("addresses") or {}):
            gids.append({"hca": hca, "netdev": links[index]["netdev"], "ipv4": links[index]["addresses"][node]})
    return [link["netdev"] for link in links], gids


def ops_ranks(contract, path, evict_paths=None, disk_paths=None, specs=None):
    """The ``ranks`` of ops.json, head first. ``specs``: ``{node: docker_container parameters}`` (vllm)."""
    nodes = [contract["head"]] + list(contract.get("workers") or [])
    ranks = []
    for index, node in enumerate(nodes):
        spec_env = ((specs or {}).get(node) or {}).get("env") or {}
        netdevs, gids = rank_links(contract, node, spec_env.get("NCCL_IB_HCA"))
        entry = {
            "rank": index, "node": node,
            "ssh": None if index == 0 else "%s@%s" % (contract["ssh_user"], contract["nodes"][node]["link_address"]),
            "container": head_container(path) if index == 0 else worker_container(path, index),
            "evict_paths": list((evict_paths or {}).get(node) or []),
            "disk_paths": list((disk_paths or {}).get(node) or ["~"]),
            "netdevs": netdevs, "gids": gids,
        }
        if specs:
            entry["spec"] = specs[node]
        ranks.append(entry)
    return ranks
