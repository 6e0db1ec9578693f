# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: one watchdog tick on the head, and its heal. Not a public API.

A tick (issue 18; the kit's ``serve.sh watch --once``, kit §6.3, with its gaps closed):
  1. DISABLED (stop.yml) -> stand down; a spent budget or a fatal state (``halted``) -> stand down.
  2. The kit's lock held (a start, stop, restart or heal runs) -> stand down.
  3. Judge with wait_for_slots' own code: every rank's container on its node (workers over ssh),
     ``/health`` ok, the slots (tensorfold) or every rank (vllm), and a canary answered in time,
     a busy engine passing while its counters advance.
  4. No answer while rank 0 is younger than the grace -> loading. An engine ``fatal`` -> alert,
     no heal (a restart cannot fix it). Else healthy, or one more unhealthy tick in a row.
  5. ``fails`` unhealthy ticks in a row -> heal: under the lock, evidence first, then the start
     of start.yml (``_ops.start``), at most ``heals_per_hour``; past it alert only until an
     operator starts the engine.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import re
import socket
import time

from urllib.request import ProxyHandler, Request, build_opener

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import run_with_timeout
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops import Cluster, start, wait_params
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_state import Lock, utc
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_status import save_evidence
from ansible_collections.dgx_spark.glm53.plugins.module_utils._readiness import short
from ansible_collections.dgx_spark.glm53.plugins.module_utils._readiness_poll import HTTP_TIMEOUT, Waiter

# Seconds the state checks of a tick may take (the canary has its own timeout on top).
JUDGE_SECONDS = 5.0
HOUR = 3600.0
DEFAULTS = {"interval": 15, "fails": 3, "grace_seconds": 1800, "heals_per_hour": 3, "canary_timeout": 30,
            "tick_timeout": 60,
            "alert_command": [], "alert_webhook": ""}
_STARTED_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z$")
# A rank failure carries its log tail (": last lines: ... | ..."): the evidence keeps the logs,
# the log line and the alert keep the verdict.
_TAIL_RE = re.compile(r": last lines: .*?(?=; rank [0-9]+ \(|$)", re.S)
REASON_CHARS = 400


def brief(reason):
    """One log line's worth of a verdict's reason: without log tails, at most REASON_CHARS."""
    return short(_TAIL_RE.sub("", reason or ""), REASON_CHARS)


def started_epoch(started_at):
    """Docker's ``State.StartedAt`` (RFC 3339, nanoseconds, UTC) as epoch seconds, or None."""
    match = _STARTED_RE.match(started_at or "")
    if not match or match.group(1).startswith("0001"):
        return None
    seconds = calendar.timegm(time.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S"))
    return seconds + float(match.group(2) or 0)


def judge(result, message, now, grace):
    """The tick's verdict from a Waiter result: ``{kind, reason}`` with kind healthy, loading,
    fatal or unhealthy."""
    health = result.get("health")
    if isinstance(health, dict) and health.get("fatal"):
        return {"kind": "fatal", "reason": brief("the engine reports a fatal error: %s" % health["fatal"])}
    if result.get("ready"):
        return {"kind": "healthy", "reason": "busy, counters advancing" if result.get("busy") else None}
    head = next((r for r in result.get("ranks") or [] if r.get("rank") == 0), None)
    started = started_epoch((head or {}).get("started_at"))
    answered = health is not None
    if head and head.get("state") == "running" and started is not None and now - started < grace and not answered:
        return {"kind": "loading", "reason": "rank 0 started %.0f s ago and does not answer yet (grace %g s)" % (
            now - started, grace)}
    return {"kind": "unhealthy", "reason": brief(message or result.get("reason") or "not ready")}


def heals_in_last_hour(heals, now):
    return [heal for heal in heals if isinstance(heal.get("at"), (int, float)) and heal["at"] > now - HOUR]


def alert(settings, state, message, event="alert"):
    """Log ``ALERT: message`` and send it to the alert command and the webhook, when set. The
    webhook's URL may carry a token: it is never logged."""
    line = state.log("ALERT: %s" % message)
    command = settings.get("alert_command") or []
    if command:
        run = run_with_timeout(list(command) + [message], 30)
        if run["error"] or run["rc"] != 0:
            state.log("alert command failed: %s" % (run["error"] or "exit %s" % run["rc"]))
    hook = settings.get("alert_webhook")
    if hook:
        body = json.dumps({"text": line, "event": event, "host": socket.gethostname(), "message": message})
        request = Request(hook, data=body.encode("utf-8"), headers={"Content-Type": "application/json"},
                          method="POST")
        try:
            build_opener(ProxyHandler({})).open(request, timeout=10).close()
        except Exception as exc:  # pylint: disable=broad-except
            state.log("alert webhook failed: %s" % type(exc).__name__)


def heal(config, settings, state, reason, now):
    """Evidence, then a full restart under the lock, within the budget. Returns the tick's outcome."""
    recent = heals_in_last_hour(state.heals(), now)
    budget = int(settings["heals_per_hour"])
    if len(recent) >= budget:
        why = "heal budget spent (%d heal(s) in the last hour, at most %d): alert only until an operator runs " \
              "start.yml or restart.yml" % (len(recent), budget)
        state.halt(why)
        alert(settings, state, "%s; unhealthy: %s" % (why, reason), event="budget")
        return {"verdict": "halted", "reason": why}
    lock = Lock(config["lock"])
    if not lock.acquire(0):
        state.log("watch: stand down: a start, stop or heal took the lock")
        return {"verdict": "busy"}
    cluster = Cluster(config)
    try:
        if state.disabled():  # a stop came between the judgment and the lock
            return {"verdict": "disabled"}
        stamp = utc(now)
        evidence = save_evidence(cluster, state, reason, stamp)
        state.add_heal({"at": now, "utc": stamp, "reason": reason, "evidence": evidence, "result": "running"})
        alert(settings, state, "healing after %d unhealthy ticks: %s (evidence: %s)" % (
            state.fails(), reason, evidence), event="heal")
        began = time.time()
        result = start(config, state, by="watchdog heal", lock=lock)
        state.update_last_heal(result="ready" if result["ok"] else "failed", detail=result["msg"],
                               seconds=round(time.time() - began, 1))
        # The next heal needs `fails` more unhealthy ticks: never one restart on the heels of another.
        state.set_fails(0)
        if result["ok"]:
            state.log("heal: %s" % result["msg"])
            return {"verdict": "healed", "reason": reason, "detail": result["msg"]}
        alert(settings, state, "heal failed: %s" % result["msg"], event="heal-failed")
        return {"verdict": "heal-failed", "reason": reason, "detail": result["msg"]}
    finally:
        cluster.close()
        lock.release()


def tick(config, settings, state, now=time.time):
    """One tick. Returns ``{verdict, reason}``; writes the log, the counter and heals.json."""
    settings = dict(DEFAULTS, **(settings or {}))
    if state.disabled():
        return {"verdict": "disabled"}
    halted = state.halted()
    if halted:
        return {"verdict": "halted", "reason": halted}
    if Lock(config["lock"]).held_elsewhere():
        return {"verdict": "busy"}
    # A tick judges within tick_timeout: the state checks, the canary, and the two reads that tell a
    # busy engine from a wedged one when the canary got nothing (they have their own time after it).
    budget = float(settings.get("tick_timeout") or 60)
    judging = min(JUDGE_SECONDS, budget / 3)
    busy_reads = min(HTTP_TIMEOUT, budget / 3)
    canary = min(float(settings["canary_timeout"]), budget - judging - busy_reads)
    params = wait_params(config, judging, canary_timeout=canary, busy_ok=True, busy_read_timeout=busy_reads)
    result, message = Waiter(params, head_node=config["ranks"][0]["node"]).run()
    verdict = judge(result, message, now(), float(settings["grace_seconds"]))
    kind = verdict["kind"]
    if kind == "healthy":
        if state.fails():
            state.log("watch: healthy again after %d unhealthy tick(s)" % state.fails())
            state.set_fails(0)
        return {"verdict": "healthy", "reason": verdict["reason"]}
    if kind == "loading":
        state.log("watch: loading: %s" % verdict["reason"])
        return {"verdict": "loading", "reason": verdict["reason"]}
    if kind == "fatal":
        state.halt("fatal: %s" % verdict["reason"])
        alert(settings, state, "%s: no heal (a restart cannot fix it); run start.yml once it is fixed" %
              verdict["reason"], event="fatal")
        return {"verdict": "fatal", "reason": verdict["reason"]}
    count = state.fails() + 1
    state.set_fails(count)
    threshold = int(settings["fails"])
    state.log("watch: unhealthy tick %d of %d: %s" % (count, threshold, verdict["reason"]))
    if count < threshold:
        return {"verdict": "unhealthy", "reason": verdict["reason"], "fails": count}
    return heal(config, settings, state, verdict["reason"], now())


def watch_for(config, settings, state, seconds, interval, lock_path, clock=time.time, sleep=time.sleep):
    """cron's way: ticks every ``interval`` s for ``seconds`` s; one runner at a time (its own lock)."""
    runner = Lock(lock_path)
    if not runner.acquire(0):
        return []
    try:
        began, outcomes, k = clock(), [], 0
        while True:
            outcomes.append(tick(config, settings, state, now=clock))
            k += 1
            next_at = began + k * interval
            if next_at > began + seconds - 1:
                return outcomes
            sleep(max(0.0, next_at - clock()))
    finally:
        runner.release()
