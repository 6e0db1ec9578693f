# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: what wait_for_slots looks at on the head, and its polling loop. Not a public API.

The looking is here (HTTP with urllib, ``docker inspect`` / ``docker logs`` locally and over
ssh); every judgment is in ``_readiness``. Commands run through ``_deadline.run_with_timeout``
and ``_ssh.run_ssh``; HTTP requests carry short timeouts, so a wedged server cannot hold a
poll past its deadline.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

from http.client import HTTPException
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit
from urllib.request import ProxyHandler, Request, build_opener

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import os_error, run_with_timeout
from ansible_collections.dgx_spark.glm53.plugins.module_utils._engine_activity import (
    busy_verdict,
    in_flight,
    progress_total,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._engines import head_container, worker_container
from ansible_collections.dgx_spark.glm53.plugins.module_utils._readiness import (
    absent_rank_reason,
    canary_failure_message,
    canary_payload,
    canary_verdict,
    inspect_command,
    logs_command,
    logs_since_command,
    model_ids,
    parse_body,
    rank_failure,
    rank_state,
    slot_lines,
    tensorfold_verdict,
    vllm_verdict,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._rank_identity import identity_problems
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ssh import SharedConnection, batch_options, run_ssh

# Seconds: one HTTP request of a poll, one docker command (local or over ssh), ssh's connect.
HTTP_TIMEOUT = 5.0
COMMAND_TIMEOUT = 15.0
SSH_CONNECT_TIMEOUT = 5
# Near the deadline calls get what is left, but never less than this (a 0.1 s ssh would only fail).
HTTP_FLOOR = 1.0
COMMAND_FLOOR = 2.0
# Workers are asked over ssh at most this often (and once more before ready): every ssh login
# costs the worker (the kit checks its worker every 10th tick for the same reason).
WORKER_CHECK_PERIOD = 10.0
# While rank 0 runs but its API does not listen yet (the load), the time between polls is spent
# knocking on the API's port this often: a refused TCP connect costs nothing, and the full poll
# follows as soon as the server listens instead of up to one interval later.
PORT_KNOCK = 0.1
MAX_BODY = 1 << 20


# --- HTTP ---------------------------------------------------------------------------------------

def _read_body(response, deadline):
    """Read at most MAX_BODY bytes, giving up at ``deadline`` even if the server trickles."""
    chunks, size = [], 0
    read = getattr(response, "read1", None) or response.read
    while size < MAX_BODY:
        if time.monotonic() > deadline:
            raise socket.timeout("body not complete at the deadline")
        chunk = read(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _is_timeout(exc):
    return isinstance(exc, socket.timeout) or isinstance(getattr(exc, "reason", None), socket.timeout)


def http_call(url, timeout, payload=None):
    """GET ``url`` (POST ``payload`` as JSON when given) within ``timeout`` seconds, without proxies.

    Returns ``{url, status, body, error, timed_out}``: ``body`` parsed as JSON when it is JSON;
    ``status`` None and ``error`` set when no HTTP answer came.
    """
    out = {"url": url, "status": None, "body": None, "error": None, "timed_out": False}
    deadline = time.monotonic() + timeout
    data = json.dumps(payload).encode("utf-8") if payload is not None else None
    headers = {"Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    # The engine is on this node or the cluster: a proxy from the environment must not sit in between.
    opener = build_opener(ProxyHandler({}))
    response = None
    try:
        try:
            response = opener.open(request, timeout=timeout)
        except HTTPError as exc:  # an answer all the same: keep its status and body
            response = exc
        out["status"] = response.getcode()
        out["body"] = parse_body(_read_body(response, deadline))
    except (URLError, HTTPException, OSError, ValueError) as exc:
        out["status"] = None
        out["timed_out"] = _is_timeout(exc)
        if out["timed_out"]:
            out["error"] = "no answer within %g s" % timeout
        else:
            reason = getattr(exc, "reason", exc)
            out["error"] = os_error(reason) if isinstance(reason, OSError) else str(reason) or type(exc).__name__
    finally:
        if response is not None:
            response.close()
    return out


# --- ranks --------------------------------------------------------------------------------------

class Rank(object):
    """One rank container: rank 0 on this node (docker locally), the others on workers over ssh."""

    def __init__(self, rank, node, container, ssh=None, ssh_options=None, shared=None):
        self.rank, self.node, self.container, self.ssh = rank, node, container, ssh
        self.ssh_options = list(ssh_options or []) if ssh else None
        self.shared = shared
        self.unreachable = 0  # checks in a row
        self.last = None
        # What the slot judgments need from the log, read once and then only what is new:
        # a service that ran for weeks has a long log, and a wait reads it every poll.
        self._slot_log = {"id": None, "lines": [], "mark": None}

    def run(self, command, timeout):
        if self.ssh:
            # The caller's options first (they win), then the wait's shared connection.
            extra = self.ssh_options + (self.shared.options(self.ssh) if self.shared else [])
            return run_ssh(self.ssh, batch_options(SSH_CONNECT_TIMEOUT, extra), command, timeout)
        return run_with_timeout(["sh", "-c", command], timeout)

    def check(self, timeout):
        run = self.run(inspect_command(self.container), timeout)
        judged = rank_state(run["rc"], run["stdout"], run["stderr"], error=run["error"], via_ssh=bool(self.ssh))
        self.unreachable = self.unreachable + 1 if judged["state"] == "unreachable" else 0
        self.last = dict(judged, rank=self.rank, node=self.node, container=self.container, log_tail=None)
        return self.last

    def log(self, timeout, tail=None):
        """``(text, error)`` of ``docker logs [--tail N]``; error None when it worked."""
        run = self.run(logs_command(self.container, tail), timeout)
        if run["error"] or run["rc"] != 0:
            return None, run["error"] or "`%s` exited with %s: %s" % (run["command"], run["rc"], run["stdout"].strip())
        return run["stdout"], None

    def slot_log(self, timeout):
        """``(text, error)``: the slot lines of this container's log, reading only what came since the last read."""
        seen = self._slot_log
        if seen["id"] != (self.last or {}).get("id"):  # another container: its log from the start
            seen.update(id=(self.last or {}).get("id"), lines=[], mark=None)
        run = self.run(logs_since_command(self.container, seen["mark"]), timeout)
        if run["error"] or run["rc"] != 0:
            return None, run["error"] or "`%s` exited with %s: %s" % (run["command"], run["rc"], run["stdout"].strip())
        lines, mark = slot_lines(run["stdout"])
        # --since includes the line at the mark itself: a repeat only repeats a count, last match wins.
        seen["lines"] = (seen["lines"] + lines)[-20:]
        seen["mark"] = mark or seen["mark"]
        return "\n".join(seen["lines"]), None

    def add_tail(self, lines, timeout):
        text, error = self.log(timeout, tail=lines)
        self.last["log_tail"] = text.splitlines()[-lines:] if text is not None else None
        if error:
            self.last["error"] = "docker logs failed: %s" % error
        return self.last


# --- the wait -----------------------------------------------------------------------------------

class Waiter(object):
    """Poll until the engine is ready, a rank fails, the canary fails, or the timeout passes.

    ``run()`` returns ``(result, msg)``: ``result`` is ``{ready, slots, elapsed, health, models,
    ranks, canary, reason, busy}``, ``msg`` None when ready, else the message to fail with.
    """

    def __init__(self, params, head_node=None, clock=time.monotonic, sleep=time.sleep):
        self.params = params
        self.mode = params["mode"]
        self.base = params["url"].rstrip("/")
        self.clock, self.sleep = clock, sleep
        head = params["head_container"]
        if head is None:
            head = head_container(self.mode)
        self.head = Rank(0, head_node or socket.gethostname(), head) if head else None
        # The image id each rank must run (rank number -> id), when the caller knows it.
        self.images = {0: params.get("head_image")} if params.get("head_image") else {}
        self.workers = []
        # Every check of a worker goes over one ssh connection (each login costs the worker).
        self.shared = SharedConnection(persist=max(60, int(params["timeout"]) + 60))
        for index, worker in enumerate(params["workers"] or []):
            rank = index + 1
            container = worker.get("container") or worker_container(self.mode, rank)
            node = worker.get("node") or worker["ssh"].rsplit("@", 1)[-1]
            self.workers.append(Rank(rank, node, container, ssh=worker["ssh"], ssh_options=params["ssh_options"],
                                     shared=self.shared))
            if worker.get("image"):
                self.images[rank] = worker["image"]
        self.started = None
        self.deadline = None
        self.refused = False
        self.last_worker_check = None
        self.state = {"ready": False, "slots": None, "elapsed": 0.0, "health": None, "models": None, "ranks": [],
                      "canary": None, "reason": None, "busy": False}

    # Each call gets what is left of the wait, within its own bounds.
    def _left(self, cap, floor):
        return max(min(cap, self.deadline - self.clock()), floor)

    def _ranks(self):
        return ([self.head] if self.head else []) + self.workers

    def _check_ranks(self, ranks):
        """Inspect ``ranks`` at once; the first failure message (with the log tail), or None."""
        if not ranks:
            return None
        timeout = self._left(COMMAND_TIMEOUT, COMMAND_FLOOR)
        with ThreadPoolExecutor(max_workers=len(ranks)) as pool:
            list(pool.map(lambda rank: rank.check(timeout), ranks))
        messages = []
        for rank in ranks:
            if rank.last["state"] in ("exited", "oom"):
                rank.add_tail(self.params["log_lines"], self._left(COMMAND_TIMEOUT, COMMAND_FLOOR))
            messages.append(rank_failure(rank.last, rank.unreachable))
        return "; ".join(message for message in messages if message) or None

    def _http(self, path, payload=None, timeout=None):
        return http_call(self.base + path, timeout or self._left(HTTP_TIMEOUT, HTTP_FLOOR), payload=payload)

    def _poll(self, check_workers):
        """One round: ranks and HTTP at once; ``(verdict, failure message or None)``."""
        due = ([self.head] if self.head else []) + (self.workers if check_workers else [])
        if check_workers:
            self.last_worker_check = self.clock()
        with ThreadPoolExecutor(max_workers=3) as pool:
            ranks_job = pool.submit(self._check_ranks, due)
            health_job = pool.submit(self._http, "/health")
            models_job = pool.submit(self._http, "/v1/models")
            failure, health, models = ranks_job.result(), health_job.result(), models_job.result()
        self.state["health"] = health["body"]
        self.refused = "refused" in (health["error"] or "").lower()
        self.state["models"] = model_ids(models["body"]) if models["status"] == 200 else None
        self.state["ranks"] = [rank.last for rank in self._ranks() if rank.last]
        if failure:
            return None, failure
        log_text = self._log_text(health)
        if self.workers and not check_workers:
            # Ready on this node: ask the workers now rather than trust a check up to 10 s old
            # (one made before the start would still say "absent" and hold readiness back).
            head_only = [self.head.last] if self.head and self.head.last else []
            if self._verdict(health, models, log_text, ranks=head_only)["ready"]:
                self.last_worker_check = self.clock()
                failure = self._check_ranks(self.workers)
                self.state["ranks"] = [rank.last for rank in self._ranks() if rank.last]
                if failure:
                    return None, failure
        return self._verdict(health, models, log_text), None

    def _log_text(self, health):
        """The rank-0 log's slot lines (tensorfold), once a running rank 0 answers HTTP; else None."""
        if self.mode != "tensorfold" or not self.head or self.head.last["state"] != "running" or health["error"]:
            return None
        log_text, error = self.head.slot_log(self._left(COMMAND_TIMEOUT, COMMAND_FLOOR))
        return None if error else log_text

    def _verdict(self, health, models, log_text, ranks=None):
        ranks = self.state["ranks"] if ranks is None else ranks
        served = self.params["served_name"]
        if self.mode == "vllm":
            verdict = vllm_verdict(ranks, health, models, served_name=served)
        else:
            verdict = tensorfold_verdict(ranks, health, models, self.params["slots"], log_text=log_text,
                                         served_name=served)
        return self._identity(verdict, ranks)

    def _identity(self, verdict, ranks):
        """Take readiness back from ranks a start did not make, or that run another image."""
        problems = identity_problems(ranks, previous_ids=self.params.get("previous_ids") or (),
                                     images=self.images)
        if not problems:
            return verdict
        # Final once no start is under way: the ranks that run now are the ones that will run.
        return dict(verdict, ready=False, reason="; ".join(problems), final=True)

    def _progress(self, timeout=None):
        """The engine's progress counters now (None when /metrics has none)."""
        answer = self._http("/metrics", timeout=timeout)
        body = answer["body"] if answer["status"] == 200 else None
        return progress_total(body if isinstance(body, str) else None, self.mode)

    def _canary(self):
        served = self.params["served_name"] or (self.state["models"] or [None])[0]
        timeout = self.params["canary_timeout"]
        busy_ok = self.params.get("busy_ok") and in_flight(self.state["health"])
        before = self._progress() if busy_ok else None
        started = self.clock()
        answer = self._http("/v1/chat/completions", payload=canary_payload(served, self.params["canary_max_tokens"]),
                            timeout=timeout)
        canary = canary_verdict(answer, self.clock() - started, timeout)
        self.state["canary"] = canary
        if canary["ok"]:
            return None
        message = canary_failure_message(canary, self.mode)
        if busy_ok and answer.get("timed_out"):
            # Every slot may be taken: the canary waited its turn. Busy only if the engine got on with its work.
            # The canary has spent the deadline by now, so these two reads get their own time, as the canary
            # did, and run at once: cut to the 1 s floor, a busy engine's slow /health read made a tick call a
            # busy engine wedged (CI, a loaded machine).
            reads = float(self.params.get("busy_read_timeout") or HTTP_TIMEOUT)
            with ThreadPoolExecutor(max_workers=1) as pool:
                health_job = pool.submit(self._http, "/health", None, reads)
                after = self._progress(reads)
                health = health_job.result()
            # Requests in flight per the read after the canary; where that one did not answer, the read
            # before it (the counters, not this count, tell busy from wedged).
            body = health["body"] if in_flight(health["body"]) is not None else self.state["health"]
            judged = busy_verdict(body, before, after)
            self.state["busy"] = judged["busy"]
            if judged["busy"]:
                return None
            message = "%s (%s)" % (message, judged["reason"])
        return message

    def _pause(self, seconds):
        """Sleep until the next poll; while rank 0 loads, end the pause once its API listens."""
        # Only a refused connection says "not listening yet"; a server that accepts and says
        # nothing must not turn the pause into back-to-back polls.
        loading = self.refused and self.head is not None and (self.head.last or {}).get("state") == "running"
        if not loading:
            self.sleep(seconds)
            return
        parts = urlsplit(self.base)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        until = self.clock() + seconds
        while self.clock() < until:
            try:
                socket.create_connection((parts.hostname, port), timeout=PORT_KNOCK).close()
                return
            except OSError:
                self.sleep(max(0.0, min(PORT_KNOCK, until - self.clock())))

    def _finish(self, ready, reason=None, msg=None):
        self.state.update(ready=ready, reason=reason, elapsed=round(self.clock() - self.started, 3))
        return self.state, msg

    def run(self):
        try:
            return self._run()
        finally:
            self.shared.close()

    def _run(self):
        self.started = self.clock()
        self.deadline = self.started + self.params["timeout"]
        while True:
            due = self.last_worker_check is None or self.clock() - self.last_worker_check >= WORKER_CHECK_PERIOD
            verdict, failure = self._poll(check_workers=due)
            if failure:
                return self._finish(False, reason=failure, msg=failure)
            self.state["slots"] = verdict["slots"]
            if self.params.get("start_finished"):
                # Nothing is starting: a short slot count, a missing rank or an old one stays so.
                reason = verdict["reason"] if verdict.get("final") else absent_rank_reason(self.state["ranks"])
                if reason:
                    return self._finish(False, reason=reason, msg="not ready: %s" % reason)
            if verdict["ready"]:
                failure = self._canary() if self.params["canary"] else None
                if failure:
                    return self._finish(False, reason=failure, msg=failure)
                return self._finish(True)
            left = self.deadline - self.clock()
            if left <= 0:
                message = "not ready after %g s: %s" % (self.params["timeout"], verdict["reason"])
                return self._finish(False, reason=verdict["reason"], msg=message)
            self._pause(min(self.params["interval"], left))
