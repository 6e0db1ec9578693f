# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: start and stop the path in force, from the head. Not a public API.

One code path for playbooks/start.yml, stop.yml, restart.yml and the watchdog's heal: the
operations program (``glm53-ops``) runs these on the head, from the plan the last successful
deploy recorded there (``ops.json``). Everything that changes the engine holds the kit's lock.

Order (issue 18): stop the head first, then the workers; evict every node to the engine's gate;
start the workers first, then the head; READY only of the ranks just started (the readiness
judgments are wait_for_slots' own: ``_readiness_poll.Waiter``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shlex
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import run_with_timeout
from ansible_collections.dgx_spark.glm53.plugins.module_utils._docker_run import run_argv
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_nodes import (
    evict_here,
    node_facts,
    parse_answer,
    remote_command,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_state import Lock
from ansible_collections.dgx_spark.glm53.plugins.module_utils._readiness_poll import Rank, Waiter
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ssh import SharedConnection

GIB = 1 << 30
COMMAND_TIMEOUT = 60
GID_KEY = "NCCL_IB_GID_INDEX"


class Cluster(object):
    """The ranks of the plan: rank 0 here, the others over ssh (one shared connection each)."""

    def __init__(self, config):
        self.config = config
        self.path = config["path"]
        self.shared = SharedConnection(persist=120)
        self.ranks = []
        for entry in config["ranks"]:
            ssh = entry.get("ssh") if entry["rank"] else None
            self.ranks.append(Rank(entry["rank"], entry["node"], entry["container"], ssh=ssh,
                                   ssh_options=config.get("ssh_options") or [], shared=self.shared))
        self.entries = dict((entry["rank"], entry) for entry in config["ranks"])

    def close(self):
        self.shared.close()

    @property
    def head(self):
        return self.ranks[0]

    @property
    def workers(self):
        return self.ranks[1:]

    def on_node(self, rank, action, query, timeout=COMMAND_TIMEOUT):
        """``(answer, error)`` of a node action: here for rank 0, the same program over ssh for a worker."""
        if not rank.ssh:
            try:
                return {"node-facts": node_facts, "evict": evict_here}[action](query), None
            except Exception as exc:  # pylint: disable=broad-except
                return None, "%s: %s" % (type(exc).__name__, exc)
        return parse_answer(rank.run(remote_command(self.config["bin"], action, query), timeout))

    def each(self, function, ranks=None):
        ranks = self.ranks if ranks is None else ranks
        with ThreadPoolExecutor(max_workers=max(1, len(ranks))) as pool:
            return list(pool.map(function, ranks))


# --- stop ---------------------------------------------------------------------------------------

def _stop_command(container, remove, stop_timeout):
    name = shlex.quote(container)
    act = ("docker rm -f %s >/dev/null && echo \"removed $s\"" % name if remove else
           "if [ \"$s\" = running ]; then docker stop -t %d %s >/dev/null && echo stopped; else echo \"left $s\"; fi"
           % (stop_timeout, name))
    return ("s=$(docker inspect -f '{{.State.Status}}' %s 2>/dev/null) || { echo absent; exit 0; }; %s"
            % (name, act))


def stop_ranks(cluster, remove=True):
    """Stop every rank, the head first, then the workers in rank order. ``[{rank, node, container,
    result}]``; ``result`` is ``absent``, ``removed <status>``, ``stopped``, ``left <status>`` or
    ``failed: ...``."""
    done = []
    timeout = int(cluster.config.get("stop_timeout") or 30)
    for rank in cluster.ranks:
        run = rank.run(_stop_command(rank.container, remove, timeout), timeout + COMMAND_TIMEOUT)
        ok = run["rc"] == 0 and not run["error"]
        result = run["stdout"].strip() if ok else "failed: %s" % (run["error"] or (run["stderr"] or run["stdout"]).strip())
        done.append({"rank": rank.rank, "node": rank.node, "container": rank.container, "result": result})
    return done


def still_running(cluster):
    """The ranks whose container still runs (or that cannot be told): ``["node: container state"]``."""
    states = cluster.each(lambda rank: rank.check(COMMAND_TIMEOUT))
    return ["%s: %s %s" % (s["node"], s["container"], s["state"]) for s in states
            if s["state"] not in ("absent", "exited", "oom", "created")]


# --- evict and NCCL -----------------------------------------------------------------------------

def evict_all(cluster):
    """Every node to the engine's gate, at once. ``(results by node, problems)``."""
    gate = cluster.config.get("gate") or {}

    def one(rank):
        query = {"paths": cluster.entries[rank.rank].get("evict_paths") or [], "gate_gib": gate.get("gib"),
                 "gate_fraction": gate.get("fraction"), "keep_gib": gate.get("keep_gib"),
                 "margin_gib": gate.get("margin_gib")}
        return cluster.on_node(rank, "evict", query, timeout=600)

    results, problems = {}, []
    for rank, (answer, error) in zip(cluster.ranks, cluster.each(one)):
        results[rank.node] = answer or {"error": error}
        if error or (answer or {}).get("error"):
            problems.append("%s: eviction failed: %s" % (rank.node, error or answer["error"]))
        elif not answer["reached"]:
            problems.append("%s: MemFree is %.1f GiB after eviction, under the engine's gate of %.1f GiB: stop other "
                            "workloads on it" % (rank.node, answer["mem_free_after"] / GIB, answer["gate"] / GIB))
    return results, problems


def nccl_overrides(cluster):
    """Recompute each rank's NCCL GID index from the node's GID table now (it moves after a link
    event) and return ``({rank: {NCCL_IB_GID_INDEX: index}}, notes, problems)`` for ranks whose spec
    sets one."""
    overrides, notes, problems = {}, [], []

    def one(rank):
        entry = cluster.entries[rank.rank]
        if not entry.get("gids") or GID_KEY not in ((entry.get("spec") or {}).get("env") or {}):
            return None, None
        return cluster.on_node(rank, "node-facts", {"gids": entry["gids"],
                                                    "sysfs_root": cluster.config.get("sysfs_root")})

    for rank, (answer, error) in zip(cluster.ranks, cluster.each(one)):
        if answer is None and error is None:
            continue
        if error:
            problems.append("%s: could not read its GID table: %s" % (rank.node, error))
            continue
        found = set(answer["gid_index"].values())
        was = str(cluster.entries[rank.rank]["spec"]["env"][GID_KEY])
        if None in found or len(found) != 1:
            problems.append("%s: no single RoCE v2 GID index carries its link address on %s now (%s): check the link "
                            "(preflight)" % (rank.node, ", ".join(sorted(answer["gid_index"])), answer["gid_index"]))
            continue
        now = str(found.pop())
        overrides[rank.rank] = {GID_KEY: now}
        if now != was:
            notes.append("%s: %s moved from %s to %s; the rank starts with %s" % (rank.node, GID_KEY, was, now, now))
    return overrides, notes, problems


# --- start --------------------------------------------------------------------------------------

def _kit_start(cluster, log_path):
    kit = cluster.config["kit"]
    env = dict(os.environ, GLM53_TF_LOCKED="1", STATE_DIR=os.path.expanduser(kit["state_dir"]))
    env.update(dict((k, str(v)) for k, v in (kit.get("env") or {}).items()))
    kit_dir = shlex.quote(os.path.expanduser(kit["dir"]))
    script = "cd %s && exec scripts/serve.sh start >> %s 2>&1" % (kit_dir, shlex.quote(log_path))
    run = run_with_timeout(["sh", "-c", script], float(cluster.config.get("start_timeout") or 1800), env=env)
    # 3: fewer slots than asked, server left running - the wait below says so with the numbers.
    if run["error"] or run["rc"] not in (0, 3):
        return "serve.sh start failed (%s); see %s" % (run["error"] or "exit %s" % run["rc"], log_path)
    return None


def _run_rank(cluster, rank, override):
    spec = cluster.entries[rank.rank]["spec"]
    argv = run_argv(spec, env_override=override)
    command = "docker rm -f %s >/dev/null 2>&1; %s" % (shlex.quote(spec["name"]), " ".join(shlex.quote(a) for a in argv))
    run = rank.run(command, COMMAND_TIMEOUT)
    if run["error"] or run["rc"] != 0:
        return "rank %d on %s could not be started: %s" % (rank.rank, rank.node, " ".join(
            (run["error"] or run["stderr"] or run["stdout"]).split())[-400:])
    return None


def _spec_start(cluster, overrides, sleep):
    """Workers first (each waits for rank 0's rendezvous), then the head after the settle time."""
    for rank in cluster.workers:
        failure = _run_rank(cluster, rank, overrides.get(rank.rank))
        if failure:
            return failure
    if cluster.workers:
        sleep(float(cluster.config.get("settle_seconds") or 0))
    return _run_rank(cluster, cluster.head, overrides.get(0))


def wait_params(config, timeout, previous_ids=(), canary_timeout=None, busy_ok=False, start_finished=True,
                busy_read_timeout=None):
    """wait_for_slots' parameters for this plan: the same judgments for a start and a tick."""
    head = config["ranks"][0]
    return {
        "mode": config["path"], "url": config["url"], "slots": int(config.get("slots") or 1),
        "timeout": float(timeout), "interval": 1.0, "head_container": head["container"],
        "workers": [{"ssh": r["ssh"], "container": r["container"], "node": r["node"]} for r in config["ranks"][1:]],
        "ssh_options": list(config.get("ssh_options") or []), "canary": True,
        "canary_timeout": float(canary_timeout or config.get("canary_timeout") or 60),
        "canary_max_tokens": int(config.get("canary_max_tokens") or 16),
        "served_name": config.get("served_name") or None, "log_lines": int(config.get("log_lines") or 40),
        "previous_ids": list(previous_ids), "start_finished": start_finished, "busy_ok": busy_ok,
        "busy_read_timeout": busy_read_timeout,
    }


def _attempt(cluster, state, sleep):
    """One stop - evict - start - wait. ``(ready, detail)``."""
    config = cluster.config
    before = cluster.each(lambda rank: rank.check(COMMAND_TIMEOUT))
    previous = [s["id"] for s in before if s.get("id")]
    stopped = stop_ranks(cluster, remove=True)
    state.log("stopped, head first: %s" % ", ".join("%s %s" % (s["node"], s["result"]) for s in stopped))
    failed = [s for s in stopped if s["result"].startswith("failed")]
    if failed:
        return False, "could not stop %s" % "; ".join("%s: %s" % (s["node"], s["result"]) for s in failed)
    evicted, problems = evict_all(cluster)
    state.log("evicted: %s" % ", ".join("%s MemFree %.1f GiB" % (node, (r.get("mem_free_after") or 0) / GIB)
                                        for node, r in sorted(evicted.items())))
    if problems:
        return False, "; ".join(problems)
    if cluster.path == "tensorfold":
        failure = _kit_start(cluster, state.path(state.log_name))
        timeout = config.get("confirm_timeout") or 120
    else:
        overrides, notes, problems = nccl_overrides(cluster)
        for note in notes:
            state.log(note)
        if problems:
            return False, "; ".join(problems)
        failure = _spec_start(cluster, overrides, sleep)
        timeout = config.get("start_timeout") or 1800
    if failure:
        return False, failure
    params = wait_params(config, timeout, previous_ids=previous if cluster.path == "tensorfold" else (),
                         start_finished=cluster.path == "tensorfold")
    result, message = Waiter(params, head_node=cluster.head.node).run()
    if result["ready"]:
        slots = (" %s slots" % result["slots"]) if result.get("slots") else ""
        return True, "READY%s in %.0f s" % (slots, result["elapsed"])
    return False, message or result.get("reason") or "not ready"


def start(config, state, by, lock=None, lock_wait=0.0, sleep=time.sleep):
    """The start of start.yml, restart.yml and a heal. Holds the lock (``lock`` when the caller
    holds it already). Returns ``{ok, busy, msg, attempts}``; on READY the stop marker, the fail
    counter and a spent budget's halt are cleared."""
    own = lock is None
    lock = lock or Lock(config["lock"])
    if own and not lock.acquire(lock_wait):
        return {"ok": False, "busy": True, "attempts": 0,
                "msg": "another start, stop or heal holds the lock %s; nothing was changed" % lock.path}
    cluster = Cluster(config)
    try:
        state.log("start (%s): path %s" % (by, config["path"]))
        attempts = int(config.get("start_attempts") or 1)
        detail = None
        for attempt in range(1, attempts + 1):
            state.log("start attempt %d" % attempt)
            ready, detail = _attempt(cluster, state, sleep)
            if ready:
                cleared = state.cleared_by_start()
                state.log("%s%s" % (detail, " (cleared %s)" % ", ".join(cleared) if cleared else ""))
                return {"ok": True, "busy": False, "attempts": attempt, "msg": detail, "cleared": cleared}
            kept = stop_ranks(cluster, remove=False)
            state.log("start attempt %d failed: %s; stopped every rank (%s)" % (
                attempt, detail, ", ".join("%s %s" % (s["node"], s["result"]) for s in kept)))
        state.log("START FAILED: %s" % detail)
        return {"ok": False, "busy": False, "attempts": attempts, "msg": detail}
    finally:
        cluster.close()
        if own:
            lock.release()


def stop(config, state, by, lock_wait=120.0):
    """stop.yml: DISABLED first (no tick starts the engine from now on), then under the lock every
    rank, the head first; then proof that none runs. Returns ``{ok, busy, msg, stopped}``."""
    newly = not state.disabled()
    if newly:  # the first stop's note stays: who stopped it and when
        state.disable("stop (%s)" % by)
    lock = Lock(config["lock"])
    if not lock.acquire(lock_wait):
        return {"ok": False, "busy": True, "stopped": [],
                "msg": "DISABLED is set, but a start or heal held the lock %s for %g s: nothing was stopped; rerun "
                       "stop.yml once it ends" % (lock.path, lock_wait)}
    cluster = Cluster(config)
    try:
        stopped = stop_ranks(cluster, remove=True)
        left = still_running(cluster)
        state.log("stopped (%s; DISABLED marker set): %s" % (by, ", ".join(
            "%s %s" % (s["node"], s["result"]) for s in stopped)))
        if left:
            return {"ok": False, "busy": False, "stopped": stopped,
                    "msg": "ranks still run after the stop: %s" % "; ".join(left)}
        changed = newly or any(s["result"].startswith(("removed", "stopped")) for s in stopped)
        return {"ok": True, "busy": False, "stopped": stopped, "changed": changed,
                "msg": "no %s rank runs on %s" % (config["path"], ", ".join(r.node for r in cluster.ranks))}
    finally:
        cluster.close()
        lock.release()
