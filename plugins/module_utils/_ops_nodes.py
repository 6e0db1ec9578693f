# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: what the operations program does on one node, and how the head asks a node.
Not a public API.

The head runs these itself for rank 0 and asks each worker over ssh to run the same program
(``<bin> node-facts|evict '<json>'``), which prints one JSON object: one code for every node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shlex

from ansible_collections.dgx_spark.glm53.plugins.module_utils._ibdev2netdev import (
    gid_index_for,
    read_sysfs_port,
    roce_v2_ipv4_gids,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._meminfo import (
    balloon_target,
    free_after_balloon,
    memory_summary,
    read_meminfo,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._page_cache import evict
from ansible_collections.dgx_spark.glm53.plugins.module_utils._page_cache_errors import PageCacheError

GIB = 1 << 30
SYSFS = os.environ.get("GLM53_SYSFS_ROOT", "/sys")
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def _read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def link_state(netdev):
    """``{operstate, carrier}`` of a netdev (carrier None when unreadable: admin-down)."""
    base = os.path.join(SYSFS, "class", "net", netdev)
    return {"operstate": _read(os.path.join(base, "operstate")), "carrier": _read(os.path.join(base, "carrier"))}


def gid_table(hca, port=1, root=None):
    """The RoCE entries of an HCA port that are set (index, gid, type, ndev)."""
    entries = read_sysfs_port(root or SYSFS, hca, port)["gids"]
    return [entry for entry in entries if entry["gid"] and entry["gid"] != ZERO_GID]


def gid_index(hca, netdev, ipv4, port=1, root=None):
    """The RoCE v2 GID index that carries ``ipv4`` on ``hca`` now (what NCCL would pick), or None."""
    return gid_index_for(roce_v2_ipv4_gids(read_sysfs_port(root or SYSFS, hca, port)["gids"]), ipv4, netdev)


def disk_free(path):
    """Free bytes for the deploy user on the filesystem of ``path`` (its nearest existing parent)."""
    path = os.path.expanduser(path)
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    stat = os.statvfs(path or "/")
    return {"path": path, "free": stat.f_bavail * stat.f_frsize, "size": stat.f_blocks * stat.f_frsize}


def node_facts(query):
    """Memory, disk, links and GIDs of this node for ``query`` ({disk_paths, netdevs, gids: [{hca,
    netdev, ipv4}], gid_tables: bool, sysfs_root: the RDMA tree's root, glm53_sysfs_root})."""
    root = query.get("sysfs_root") or None
    facts = {"memory": memory_summary(read_meminfo()), "disk": [], "links": {}, "gid_index": {}, "gid_tables": {}}
    for path in query.get("disk_paths") or []:
        try:
            facts["disk"].append(disk_free(path))
        except OSError as exc:
            facts["disk"].append({"path": path, "error": str(exc)})
    for netdev in query.get("netdevs") or []:
        facts["links"][netdev] = link_state(netdev)
    for item in query.get("gids") or []:
        facts["gid_index"][item["hca"]] = gid_index(item["hca"], item["netdev"], item["ipv4"], root=root)
        if query.get("gid_tables"):
            facts["gid_tables"][item["hca"]] = gid_table(item["hca"], root=root)
    return facts


def evict_here(query):
    """Bring MemFree up to the engine's gate with no engine loaded, without sudo: fadvise what the
    path names, then the balloon while MemFree is still short (the engine role's order).

    ``query``: {paths, gate_gib (null: none), gate_fraction (share of MemTotal), keep_gib, margin_gib}.
    Returns ``{mem_free_before, mem_free_after, gate, reached, ballooned}`` in bytes."""
    before = memory_summary(read_meminfo())
    gate = float(query.get("gate_gib") or 0) * GIB
    if query.get("gate_fraction"):
        gate = max(gate, float(query["gate_fraction"]) * before["mem_total"])
    paths = [os.path.expanduser(p) for p in query.get("paths") or []]
    if paths:
        evict(paths=paths, method="fadvise", missing="ignore")
    free = memory_summary(read_meminfo())["mem_free"]
    target = balloon_target(gate, before["mem_total"], float(query.get("margin_gib") or 0) * GIB)
    ballooned = False
    if gate and free < target:
        try:
            result = evict(method="balloon", free_target_gib=target / GIB, keep_gib=float(query.get("keep_gib") or 2.0))
        except PageCacheError as exc:
            return {"mem_free_before": before["mem_free"], "mem_free_after": free, "gate": int(gate),
                    "reached": False, "ballooned": False, "error": str(exc)}
        ballooned = bool(result.get("balloon_bytes"))
        free = free_after_balloon(free, result)  # the engine role's judgment (_engine_memory)
    return {"mem_free_before": before["mem_free"], "mem_free_after": free, "gate": int(gate),
            "reached": free >= gate, "ballooned": ballooned}


def remote_command(program, action, query):
    """The shell command a worker runs: the same program, one action, its query as one JSON word."""
    # A leading ~/ stays outside the quotes, so the worker's shell expands it to the deploy user's home.
    word = "~/" + shlex.quote(program[2:]) if program.startswith("~/") else shlex.quote(program)
    return "%s %s %s" % (word, action, shlex.quote(json.dumps(query, sort_keys=True)))


def parse_answer(run):
    """``(value, error)`` of a worker's ``<bin> <action>`` run (its last stdout line is JSON)."""
    if run.get("error"):
        return None, run["error"]
    lines = (run.get("stdout") or "").strip().splitlines()
    if run.get("rc") != 0 or not lines:
        said = " ".join(((run.get("stderr") or "") + " " + (run.get("stdout") or "")).split())
        return None, "exit %s: %s" % (run.get("rc"), said[-300:])
    try:
        return json.loads(lines[-1]), None
    except ValueError:
        return None, "not JSON: %s" % lines[-1][-300:]
