# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: what the path in force looks like now (status.yml, ``glm53-ops status``), and
the evidence a heal saves before it restarts anything. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import run_with_timeout
from ansible_collections.dgx_spark.glm53.plugins.module_utils._readiness import log_slots, streams_max
from ansible_collections.dgx_spark.glm53.plugins.module_utils._readiness_poll import http_call

GIB = 1 << 30
TIMEOUT = 30
TIMER = "glm53-watchdog.timer"
CRON_NAME = "dgx_spark.glm53 watchdog"
ROW = "%-14s %-4s %-14s %-11s %-31s %8s %8s %9s  %s"
_VLLM_SEQS = re.compile(r"^vllm:num_requests_(running|waiting)(\{[^}]*\})?\s+([0-9.eE+-]+)", re.M)


def vllm_sequences(metrics_text):
    """``{running, waiting}`` sequences from vLLM's /metrics, or None."""
    found = {}
    for kind, _labels, value in _VLLM_SEQS.findall(metrics_text or ""):
        found[kind] = found.get(kind, 0) + int(float(value))
    return found or None


def _schedule():
    """Which schedule runs the watchdog on this node: the user timer, the crontab line, or none."""
    timer = run_with_timeout(["systemctl", "--user", "is-active", TIMER], 10)
    if (timer["stdout"] or "").strip() == "active":
        return {"schedule": "systemd", "active": True}
    cron = run_with_timeout(["crontab", "-l"], 10)
    if CRON_NAME in (cron["stdout"] or ""):
        return {"schedule": "cron", "active": True}
    return {"schedule": None, "active": False}


def watchdog_status(state):
    heals = state.heals()
    return dict(_schedule(), disabled=state.disabled(), halted=state.halted(), fails=state.fails(),
                last_heals=heals[-5:], log=state.log_tail(5))


def collect(cluster, state):
    """Everything status.yml shows, as one JSON-able dict."""
    config = cluster.config
    states = cluster.each(lambda rank: rank.check(TIMEOUT))

    def facts(rank):
        entry = cluster.entries[rank.rank]
        return cluster.on_node(rank, "node-facts", {"disk_paths": entry.get("disk_paths") or ["~"],
                                                    "netdevs": entry.get("netdevs") or []})

    node_facts = cluster.each(facts)
    health = http_call(config["url"] + "/health", 5)
    metrics = http_call(config["url"] + "/metrics", 5)
    nodes = []
    for rank, judged, (answer, error) in zip(cluster.ranks, states, node_facts):
        answer = answer or {}
        nodes.append({
            "node": rank.node, "rank": rank.rank, "container": rank.container, "state": judged["state"],
            "started_at": judged.get("started_at"), "error": judged.get("error") or error,
            "mem_available": (answer.get("memory") or {}).get("mem_available"),
            "mem_free": (answer.get("memory") or {}).get("mem_free"),
            "disk": answer.get("disk") or [], "links": answer.get("links") or {},
        })
    out = {"path": config["path"], "url": config["url"], "nodes": nodes,
           "health": {"status": health["status"], "body": health["body"], "error": health["error"]},
           "watchdog": watchdog_status(state)}
    if config["path"] == "tensorfold":
        text = None
        if states[0]["state"] == "running":
            text, _error = cluster.head.slot_log(TIMEOUT)
        out["slots"] = {"wanted": config.get("slots"), "log": log_slots(text),
                        "health": streams_max(health["body"]) if isinstance(health["body"], dict) else None}
    else:
        out["sequences"] = vllm_sequences(metrics["body"] if isinstance(metrics["body"], str) else None)
    return out


def _gib(value):
    return "-" if value is None else "%.1f" % (value / GIB)


def table(status):
    """The status as lines for people."""
    lines = ["path %s at %s: /health %s" % (status["path"], status["url"], status["health"]["status"] or
                                            status["health"]["error"])]
    if "slots" in status:
        slots = status["slots"]
        lines.append("slots: %s from the rank-0 log, %s from /health (want %s)" % (
            slots["log"], slots["health"], slots["wanted"]))
    else:
        lines.append("sequences: %s" % (status.get("sequences") or "none reported"))
    lines.append(ROW % ("node", "rank", "container", "state", "started", "MemAvail", "MemFree", "disk free", "links"))
    for node in status["nodes"]:
        disk = node["disk"][0].get("free") if node["disk"] else None
        links = " ".join("%s=%s" % (k, v.get("operstate")) for k, v in sorted(node["links"].items()))
        lines.append(ROW % (
            node["node"], node["rank"], node["container"], node["state"], node["started_at"] or "-",
            _gib(node["mem_available"]), _gib(node["mem_free"]), _gib(disk), links or "-"))
    dog = status["watchdog"]
    lines.append("watchdog: %s%s, fail count %d%s%s" % (
        dog["schedule"] or "not installed", "" if dog["active"] or not dog["schedule"] else " (inactive)",
        dog["fails"], ", DISABLED (stop.yml)" if dog["disabled"] else "",
        ", halted: %s" % dog["halted"] if dog["halted"] else ""))
    for heal in dog["last_heals"]:
        lines.append("  heal %s: %s -> %s" % (heal.get("utc"), heal.get("reason"), heal.get("result")))
    return lines


# --- evidence -----------------------------------------------------------------------------------

def _write(directory, name, text):
    with open(os.path.join(directory, name), "w") as handle:
        handle.write(text if isinstance(text, str) else json.dumps(text, indent=1, sort_keys=True, default=str))


def save_evidence(cluster, state, reason, stamp):
    """Before a heal restarts anything: each rank's last log lines, /health and /metrics, the NCCL
    settings the ranks run with, each node's links, GID tables and memory. Returns the directory."""
    config = cluster.config
    directory = state.evidence_dir(stamp)
    lines = int(config.get("log_lines") or 40)
    _write(directory, "reason.txt", reason + "\n")

    def rank_files(rank):
        name = rank.container
        logs = rank.run("docker logs --tail %d %s 2>&1" % (lines, name), TIMEOUT)
        env = rank.run("docker inspect -f '{{json .Config.Env}}' %s" % name, TIMEOUT)
        entry = cluster.entries[rank.rank]
        facts = cluster.on_node(rank, "node-facts", {"netdevs": entry.get("netdevs") or [],
                                                     "gids": entry.get("gids") or [], "gid_tables": True,
                                                     "sysfs_root": config.get("sysfs_root")})
        return logs, env, facts

    nccl, nodes = {}, {}
    for rank, (logs, env, (facts, error)) in zip(cluster.ranks, cluster.each(rank_files)):
        _write(directory, "rank%d-%s.log" % (rank.rank, rank.node), logs["stdout"] or logs["error"] or "")
        try:
            values = json.loads(env["stdout"] or "null") or []
        except ValueError:
            values = []
        nccl[rank.node] = sorted(v for v in values if v.split("=", 1)[0].startswith(("NCCL_", "GLOO_", "TP_")))
        nodes[rank.node] = facts if facts is not None else {"error": error}
    _write(directory, "nccl.json", nccl)
    _write(directory, "nodes.json", nodes)
    for route in ("health", "metrics"):
        answer = http_call(config["url"] + "/" + route, 5)
        body = answer["body"] if answer["status"] is not None else answer["error"]
        _write(directory, route + (".json" if route == "health" else ".txt"),
               body if isinstance(body, str) else json.dumps(body, indent=1))
    return directory
