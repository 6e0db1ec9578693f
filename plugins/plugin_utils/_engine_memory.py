# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What eviction before an engine start made of each node's MemFree, for both paths.

On GB10 memory is unified: the engine counts MemFree, not MemAvailable, as free when it fits
its slots (kit reference §5), so every page of page cache counts as used. The shared eviction
(roles/engine, tasks/evict.yml) evicts what the path names with fadvise, then, on a node still
under the path's memory gate, runs page_cache_evict's balloon to a MemFree target. This turns
both loops' results into one line per node and the list of nodes still short."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.dgx_spark.glm53.plugins.module_utils._meminfo import balloon_target, free_after_balloon

GIB = float(1 << 30)


def evict_paths(weights_by_node, extra=None):
    """``{node: [paths]}`` to evict before a start: each node's weights (the model's whole cache
    folder, blobs included, from hf_weights' glm53_weights facts) and the path's own folders."""
    paths = {}
    for node, weights in (weights_by_node or {}).items():
        models = (weights or {}).get("models") or [] if isinstance(weights, dict) else []
        found = []
        for model in models:
            host_path = str((model or {}).get("host_path") or "").rstrip("/")
            # .../models--org--name/snapshots/<revision>: the model's folder is two up.
            folder = host_path.rsplit("/", 2)[0] if host_path.count("/") >= 2 else host_path
            if folder and folder not in found:
                found.append(folder)
        paths[str(node)] = found + [str(path) for path in extra or [] if path and str(path) not in found]
    return paths


def _by_node(results):
    found = {}
    for res in results or []:
        if isinstance(res, dict) and not res.get("skipped") and isinstance(res.get("memory_before"), dict):
            found[str(res.get("item", "?"))] = res
    return found


def _gib(value):
    return "%.1f" % (value / GIB)


def memory_gates(named, gate_gib=0, fraction=0):
    """``{node: GiB}``: the MemFree each node's engine waits for at load. ``gate_gib`` for every
    node (the kit's MEM_GATE_GIB), or, with ``fraction`` above 0, that share of the node's own
    MemTotal (vLLM allocates --gpu-memory-utilization x total memory at load and fails when that
    much is not free), rounded up to 0.01 GiB. Nodes come from page_cache_evict's loop results."""
    gates = {}
    for node, res in _by_node(named).items():
        total = res["memory_before"].get("mem_total") or 0
        if float(fraction or 0) > 0:
            gates[node] = math.ceil(float(fraction) * total / GIB * 100) / 100.0
        else:
            gates[node] = float(gate_gib or 0)
    return gates


def balloon_targets(named, gates, margin_gib=0):
    """``{node: GiB}``: the MemFree the balloon aims at on each node (module_utils/_meminfo's
    balloon_target: the gate plus the larger of the margin and three quarters of what the gate
    leaves of MemTotal), rounded up to 0.01 GiB. ``gates``: memory_gates' ``{node: GiB}``."""
    targets = {}
    for node, res in _by_node(named).items():
        total = res["memory_before"].get("mem_total") or 0
        target = balloon_target(float((gates or {}).get(node) or 0) * GIB, total, float(margin_gib or 0) * GIB)
        targets[node] = math.ceil(target / GIB * 100) / 100.0
    return targets


def memory_report(named, ballooned=None, gate_gib=0):
    """``{"lines": [...], "short": [{"node", "free", "gate"}], "msg": str}`` from page_cache_evict's
    loop results: ``named`` (method fadvise, one per node) and ``ballooned`` (method balloon with
    free_target_gib, one per node, or skipped). ``gate_gib``: the MemFree the engine waits for
    (0: no gate, nothing is short), one number or ``{node: GiB}`` (memory_gates)."""
    named, ballooned = _by_node(named), _by_node(ballooned)
    lines, short = [], []
    for node in list(named) + [node for node in ballooned if node not in named]:
        node_gate_gib = float((gate_gib.get(node) if isinstance(gate_gib, dict) else gate_gib) or 0)
        gate = node_gate_gib * GIB
        first = named.get(node) or ballooned[node]
        before = first["memory_before"].get("mem_free", 0)
        parts = ["%s: MemFree %s GiB" % (node, _gib(before))]
        after = before
        if node in named:
            after = (named[node].get("memory_after") or {}).get("mem_free", before)
            parts.append("-> %s GiB after evicting %s GiB it names" % (
                _gib(after), _gib(named[node].get("evicted_bytes") or 0)))
        if node in ballooned:
            touched = ballooned[node].get("balloon_bytes") or 0
            after = free_after_balloon(after, ballooned[node])
            if touched:
                parts.append("-> %s GiB after a %s GiB balloon (page cache no name reaches: image layers, "
                             "other files)" % (_gib(after), _gib(touched)))
        if gate > 0:
            parts.append("(the engine waits for %g GiB)" % node_gate_gib)
            if after < gate:
                short.append({"node": node, "free": after, "gate": gate})
        lines.append(" ".join(parts))
    if not lines:
        lines = ["MemFree not measured"]
    return {"lines": lines, "short": short, "msg": "; ".join(lines)}


def short_message(report, variable):
    """The failure for nodes that eviction could not bring to the gate: which, how far, the fix."""
    nodes = ", ".join("%s has %s GiB of the %g GiB" % (item["node"], _gib(item["free"]), round(item["gate"] / GIB, 2))
                      for item in report["short"])
    return ("MemFree stays under what the engine's memory gate waits for after evicting every page the role "
            "can name and the balloon: %s. What is left is held by processes, not the page cache: stop other "
            "workloads on those nodes (another engine, a large job), or lower the gate with %s. Nothing was "
            "started." % (nodes, variable))
