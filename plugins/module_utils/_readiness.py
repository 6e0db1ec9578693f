# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: readiness judgments of a serving engine, as pure functions. Not a public API.

One judgment in one place: wait_for_slots polls with these, and a watchdog reuses them.
Inputs are what the node shows (rank-0 log text, ``/health`` and ``/v1/models`` bodies,
``docker inspect`` output, a chat completion); outputs are verdicts whose reason names
the missing piece, the node, what was wanted, what was found and the fix.

Facts behind the rules (kit reference §2.3, §2.6, §4.1-§4.2, §4.6, §6):
  - rank 0's HTTP server starts only after the load, and ``/v1/models`` answering says nothing
    about how many request slots fit;
  - the slot count is the last ``K request slot(s)`` in the rank-0 log (older images: the
    last ``batching K requests``), and ``/health`` ``streams.max`` on images with patch 0600;
  - ``/health`` answers 200 with ``ok: false`` in basic mode (after a fatal engine error, or
    after a rank died), so only ``ok: true`` counts;
  - on GB10 page cache counts as used when the engine decides at load how many slots fit.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import shlex

SLOTS_RE = re.compile(r"([0-9]+) request slot\(s\)")
BATCHING_RE = re.compile(r"batching ([0-9]+) requests")
SHORTFALL_RE = re.compile(r"GLM53_TF_BATCH=([0-9]+): only ([0-9]+) sequence\(s\) fit[^\r\n]*")
# Docker's own wording for a missing container: 20.10 says "No such container" with --type
# container ("No such object" without), newer engines "Error response from daemon: No such container".
ABSENT_RE = re.compile(r"no such (container|object)", re.IGNORECASE)
# Docker's container name rule; anything else would be a flag or a shell word in the command.
CONTAINER_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
IMAGE_ID_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
CONTAINER_ID_RE = re.compile(r"^[0-9a-f]{64}$")

EVICT_HINT = ("page cache counts as used at load on GB10, evict it before starting "
              "(dgx_spark.glm53.page_cache_evict), stop other workloads, then restart the ranks")
OOM_HINT = ("not enough free memory at load: stop other workloads and evict the page cache "
            "(dgx_spark.glm53.page_cache_evict) before starting again; never raise CONTEXT, "
            "SESSION_GIB or prefill rows to fix it")
# A worker unreachable this many checks in a row fails the wait, as the kit's start does.
UNREACHABLE_LIMIT = 3
TEXT_LIMIT = 300


def short(text, limit=TEXT_LIMIT):
    """One line of ``text`` for a message, cut at ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


# --- rank-0 log ---------------------------------------------------------------------------------

def log_slots(text):
    """Request slots the rank-0 log reports: the last ``K request slot(s)`` (patch 0490's boot line),
    else the last ``batching K requests``; None when the log has neither."""
    for pattern in (SLOTS_RE, BATCHING_RE):
        found = pattern.findall(text or "")
        if found:
            return int(found[-1])
    return None


def log_shortfall(text):
    """The last ``GLM53_TF_BATCH=N: only K sequence(s) fit ...`` line as ``{requested, fit, line}``, or None."""
    found = list(SHORTFALL_RE.finditer(text or ""))
    if not found:
        return None
    match = found[-1]
    return {"requested": int(match.group(1)), "fit": int(match.group(2)), "line": match.group(0).strip()}


def slot_shortfall_reason(source, found, wanted, shortfall=None):
    """None when ``found`` reaches ``wanted``, else ``<source> reports K request slot(s), want N[ (the
    engine's shortfall line)]: <eviction fix>``."""
    if found >= wanted:
        return None
    why = " (%s)" % short(shortfall["line"]) if shortfall else ""
    return "%s reports %d request slot(s), want %d%s: %s" % (source, found, wanted, why, EVICT_HINT)


# --- HTTP bodies --------------------------------------------------------------------------------

def parse_body(text):
    """The JSON value of a response body, or the text itself when it is not JSON; None for no body."""
    if text is None or not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def streams_max(body):
    """``streams.max`` of a ``/health`` body (patch 0600: the slots that fit at load), or None."""
    streams = body.get("streams") if isinstance(body, dict) else None
    value = streams.get("max") if isinstance(streams, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def health_verdict(status, body, slots=None, url="/health"):
    """Judge a tensorfold ``/health`` answer: ``{ok, reason, streams_max}``.

    HTTP 200 alone proves nothing (basic mode answers 200 with ``ok: false``); ``ok`` must be
    the JSON ``true``. When the body has ``streams.max`` and ``slots`` is given, it must be at
    least ``slots``. ``reason`` is None when ok.
    """
    found = streams_max(body)
    out = {"ok": False, "reason": None, "streams_max": found}
    details = []
    if isinstance(body, dict):
        if body.get("fatal"):
            details.append("fatal: %s" % short(body["fatal"]))
        if body.get("stalled"):
            details.append("%d stalled request(s)" % len(body["stalled"]))
    tail = " (%s)" % "; ".join(details) if details else ""
    if status != 200:
        out["reason"] = "%s answered HTTP %s%s" % (url, status, tail)
    elif not isinstance(body, dict):
        out["reason"] = "%s answered 200 but not with a JSON object: %r" % (url, short(body or "", 120))
    elif body.get("ok") is not True:
        out["reason"] = "%s answered 200 with ok: %s%s; a fatal engine error never clears, restart the ranks" % (
            url, json.dumps(body.get("ok")), tail)
    elif slots is not None and found is not None:
        out["reason"] = slot_shortfall_reason("%s streams.max" % url, found, slots)
    out["ok"] = out["reason"] is None
    return out


def model_ids(body):
    """The model ids of a ``/v1/models`` body, in order; None when the body is not that shape."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    return [entry["id"] for entry in data if isinstance(entry, dict) and isinstance(entry.get("id"), str)]


# --- ranks --------------------------------------------------------------------------------------

# Id and Image tell the ranks a start just made from older ones (_rank_identity); State says how they run.
INSPECT_FORMAT = '{"Id":{{json .Id}},"Image":{{json .Image}},"State":{{json .State}}}'


def inspect_command(container):
    """The shell command that prints a container's Id, Image and State as one JSON object."""
    return "docker inspect --type container --format %s %s" % (shlex.quote(INSPECT_FORMAT), shlex.quote(container))


def logs_command(container, tail=None):
    """The shell command that prints a container's log, stdout and stderr interleaved as written."""
    tail_args = "--tail %d " % tail if tail is not None else ""
    return "docker logs %s%s 2>&1" % (tail_args, shlex.quote(container))


def logs_since_command(container, since=None):
    """The shell command that prints a container's log with docker's timestamps, from ``since`` on."""
    since_args = "--since %s " % shlex.quote(since) if since else ""
    return "docker logs --timestamps %s%s 2>&1" % (since_args, shlex.quote(container))


def slot_lines(text):
    """``(lines, mark)``: the lines of a ``docker logs --timestamps`` text the slot judgments read
    (``K request slot(s)``, ``batching K requests``, the shortfall line), without their
    timestamps, and the last timestamp seen (None when none)."""
    kept, mark = [], None
    for line in (text or "").splitlines():
        stamp, _sep, rest = line.partition(" ")
        if stamp[:1].isdigit() and "T" in stamp:
            mark = stamp
        else:
            rest = line
        if SLOTS_RE.search(rest) or BATCHING_RE.search(rest) or SHORTFALL_RE.search(rest):
            kept.append(rest)
    return kept, mark


def rank_state(rc, stdout, stderr="", error=None, via_ssh=False):
    """Judge one ``docker inspect`` of a rank (run as inspect_command, over ssh when ``via_ssh``).

    Returns ``{state, exit_code, oom_killed, error, id, image, started_at}`` where ``state`` is:
      running      State.Running is true
      created      created, not started yet (docker run between create and start)
      exited       stopped (exited, dead, removing) and not OOM-killed
      oom          stopped and State.OOMKilled is true
      absent       no container of that name
      unreachable  ssh itself failed (rc 255)
      unknown      the check could not tell (timed out, docker not answering, unreadable output)
    ``error`` says why for the last three, else None. ``id`` and ``image`` (the container's and its
    image's full ids) and ``started_at`` (State.StartedAt) are None when not inspected.
    """
    out = {"state": "unknown", "exit_code": None, "oom_killed": None, "error": None,
           "id": None, "image": None, "started_at": None}
    text = " ".join(((stderr or "") + " " + (stdout or "")).split())
    if error:  # timed out or could not be started
        out["error"] = error
        return out
    if via_ssh and rc == 255:
        out["state"], out["error"] = "unreachable", short(stderr or "ssh exited with 255")
        return out
    if rc != 0:
        if ABSENT_RE.search(text):
            out["state"] = "absent"
        out["error"] = short(text or "docker inspect exited with %s" % rc)
        return out
    try:
        state = json.loads(stdout)
    except ValueError:
        state = None
    if isinstance(state, dict) and isinstance(state.get("State"), dict):
        out["id"], out["image"] = state.get("Id"), state.get("Image")
        state = state["State"]
    if isinstance(state, dict):
        out["started_at"] = state.get("StartedAt")
    if not isinstance(state, dict):
        out["error"] = "unexpected docker inspect output: %r" % short(stdout, 120)
        return out
    out["exit_code"] = state.get("ExitCode")
    out["oom_killed"] = state.get("OOMKilled")
    if state.get("Running") is True:
        out["state"] = "running"
    elif state.get("Status") == "created":
        out["state"] = "created"
    else:
        out["state"] = "oom" if state.get("OOMKilled") is True else "exited"
    return out


def rank_label(rank):
    """``rank 1 (glm53-tf-r1 on spark-worker)``."""
    return "rank %d (%s on %s)" % (rank["rank"], rank["container"], rank["node"])


def tail_text(rank):
    """The rank's last log lines joined on one line for a message (`` | `` between lines)."""
    lines = rank.get("log_tail")
    if lines is None:
        return "no log (%s)" % rank["error"] if rank.get("error") else "no log"
    return " | ".join(line.rstrip() for line in lines) if lines else "(empty log)"


def rank_failure(rank, unreachable_in_a_row=0):
    """The message that fails the wait at once for this rank, or None while waiting may still help.

    A rank that exited or was OOM-killed never comes back by itself (no restart policy); a
    worker ssh cannot reach UNREACHABLE_LIMIT checks in a row is treated as down, as the kit does.
    """
    label = rank_label(rank)
    if rank["state"] == "exited":
        return "%s exited with code %s (OOMKilled: %s): last lines: %s" % (
            label, rank["exit_code"], json.dumps(rank["oom_killed"]), tail_text(rank))
    if rank["state"] == "oom":
        return "%s was OOM-killed (exit code %s, OOMKilled: true): %s: last lines: %s" % (
            label, rank["exit_code"], OOM_HINT, tail_text(rank))
    if rank["state"] == "unreachable" and unreachable_in_a_row >= UNREACHABLE_LIMIT:
        return "%s unreachable over ssh %d checks in a row (%s): the head must reach the worker with BatchMode ssh" % (
            label, unreachable_in_a_row, rank["error"])
    return None


def absent_rank_reason(ranks):
    """Why waiting cannot help once the start has finished: a rank container that does not exist
    (nothing is creating it any more), or None."""
    for rank in ranks:
        if rank and rank["state"] == "absent":
            return rank_waiting_reason(rank)
    return None


def rank_waiting_reason(rank):
    """Why a rank that did not fail is not ready yet, or None when it is running."""
    label = rank_label(rank)
    if rank["state"] == "running":
        return None
    if rank["state"] == "created":
        return "%s is created but not started" % label
    if rank["state"] == "absent":
        return "%s does not exist: start the ranks first, or name the container that runs them" % label
    if rank["state"] == "unreachable":
        return "%s is unreachable over ssh (%s)" % (label, rank["error"])
    return "cannot tell the state of %s: %s" % (label, rank["error"] or rank["state"])


# --- verdicts -----------------------------------------------------------------------------------

def http_reason(answer, what):
    """Why an HTTP answer (``{status, body, error, url}``) is missing or not 200, or None when 200."""
    if answer is None:
        return "%s was not asked" % what
    if answer.get("error"):
        return "%s did not answer at %s: %s" % (what, answer["url"], answer["error"])
    if answer.get("status") != 200:
        return "%s answered HTTP %s at %s: %s" % (what, answer.get("status"), answer["url"], body_text(answer.get("body")))
    return None


def body_text(body, limit=160):
    """A response body on one short line: text as it came, JSON values as JSON."""
    return short(body if isinstance(body, str) else json.dumps(body), limit)


def models_reason(models, served_name):
    """Why ``/v1/models`` does not show the model to serve, or None."""
    reason = http_reason(models, "/v1/models")
    if reason:
        return reason
    ids = model_ids(models["body"])
    if ids is None:
        return "/v1/models answered 200 but not with a model list: %s" % body_text(models["body"])
    if not ids:
        return "/v1/models lists no model"
    if served_name and served_name not in ids:
        return "/v1/models lists %s, not the served name %s" % (", ".join(ids), served_name)
    return None


def _first(reasons):
    for reason in reasons:
        if reason:
            return reason
    return None


def slot_evidence(slots_wanted, log_count=None, shortfall=None, health_max=None, log_read=True):
    """``(found, reason)``: the smallest slot count any source reports, and why it is not enough (None when it is).

    Sources: the rank-0 log (``log_count``, with its ``shortfall`` line) and ``/health`` ``streams.max``.
    Every source that reports must reach ``slots_wanted``. With ``slots_wanted`` above 1 at least one
    must report; a single-slot engine may print no count at all.
    """
    counts = [count for count in (log_count, health_max) if count is not None]
    found = min(counts) if counts else None
    reason = None
    if log_count is not None:
        reason = slot_shortfall_reason("rank-0 log", log_count, slots_wanted, shortfall)
    if health_max is not None:
        reason = reason or slot_shortfall_reason("/health streams.max", health_max, slots_wanted)
    if reason:
        return found, reason
    if found is None and slots_wanted > 1:
        if shortfall:
            return found, slot_shortfall_reason("rank-0 log", shortfall["fit"], slots_wanted, shortfall)
        where = ("the rank-0 log has no 'K request slot(s)' or 'batching K requests' line yet"
                 if log_read else "the rank-0 log is not read (no head container)")
        return found, "no slot count, want %d: %s and /health has no streams.max (images before patch 0600)" % (
            slots_wanted, where)
    return found, None


def tensorfold_verdict(ranks, health, models, slots_wanted, log_text=None, served_name=None):
    """The tensorfold readiness verdict before the canary: ``{ready, reason, slots}``.

    ``ranks`` are judged ranks (rank_state plus rank/node/container), ``health`` and ``models``
    HTTP answers ``{status, body, error, url}``, ``log_text`` the rank-0 log (None when not read).
    The reason names the first missing piece: a rank not running, the HTTP server, ``/health``
    ``ok``, the model list, then the slots.
    """
    out = {"ready": False, "reason": None, "slots": None}
    reason = _first(rank_waiting_reason(rank) for rank in ranks)
    reason = reason or http_reason(health, "/health")
    if not reason:
        judged = health_verdict(health["status"], health["body"], slots=None, url="/health")
        reason = judged["reason"]
    reason = reason or models_reason(models, served_name)
    health_max = streams_max(health["body"]) if health and not health.get("error") else None
    found, slots_reason = slot_evidence(slots_wanted, log_count=log_slots(log_text), shortfall=log_shortfall(log_text),
                                        health_max=health_max, log_read=log_text is not None)
    out["slots"] = found
    out["reason"] = reason or slots_reason
    out["ready"] = out["reason"] is None
    # The engine fits its slots once, at load: serving with a reported count that is short
    # will not grow by waiting, so the verdict is final (fail now, not at the timeout).
    out["final"] = reason is None and slots_reason is not None and found is not None
    return out


def vllm_verdict(ranks, health, models, served_name=None):
    """The vLLM readiness verdict before the canary: ``{ready, reason, slots}`` (slots always None).

    vLLM's ``/health`` has no body worth reading: 200 is all it says (and it stays 200 through a stuck
    collective, hence the canary). ``/v1/models`` must list the served name.
    """
    reason = _first(rank_waiting_reason(rank) for rank in ranks)
    reason = reason or http_reason(health, "/health") or models_reason(models, served_name)
    return {"ready": reason is None, "reason": reason, "slots": None}


# --- canary -------------------------------------------------------------------------------------

CANARY_PROMPT = "Reply with the single word: ready"


def canary_payload(model, max_tokens):
    """A short, greedy, non-streamed chat completion."""
    return {"model": model, "messages": [{"role": "user", "content": CANARY_PROMPT}],
            "max_tokens": max_tokens, "temperature": 0, "stream": False}


def canary_verdict(answer, elapsed, timeout):
    """Judge the canary's answer ``{status, body, error, timed_out}``: ``{ok, elapsed, tokens, text, error}``.

    It must return non-empty ``content`` or reasoning (``reasoning`` / ``reasoning_content``: with
    thinking on, a few tokens may all be reasoning) within its timeout.
    """
    out = {"ok": False, "elapsed": round(elapsed, 3), "tokens": None, "text": None, "error": None}
    body = answer.get("body")
    if answer.get("timed_out"):
        out["error"] = "returned no tokens within %g s" % timeout
        return out
    if answer.get("error"):
        out["error"] = "failed: %s" % answer["error"]
        return out
    if answer.get("status") != 200:
        message = body.get("error") if isinstance(body, dict) else body
        if isinstance(message, dict):
            message = message.get("message")
        out["error"] = "answered HTTP %s: %s" % (answer.get("status"), short(message or "", 200))
        return out
    usage = body.get("usage") if isinstance(body, dict) else None
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        out["tokens"] = usage["completion_tokens"]
    try:
        message = body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        out["error"] = "answered 200 without choices[0].message: %s" % body_text(body, 200)
        return out
    for key in ("content", "reasoning", "reasoning_content"):
        value = message.get(key) if isinstance(message, dict) else None
        if isinstance(value, str) and value.strip():
            out["text"] = value
            out["ok"] = True
            return out
    out["error"] = "returned no content and no reasoning (%s completion token(s))" % out["tokens"]
    return out


def canary_failure_message(canary, mode):
    """``canary chat completion <what went wrong> while /health says ok: the ranks look wedged ...``."""
    health = "/health says ok" if mode == "tensorfold" else "/health answers 200"
    message = "canary chat completion %s while %s" % (canary["error"], health)
    if canary["tokens"] is None and canary["text"] is None and "no tokens" in canary["error"]:
        message += ": the ranks look wedged (silent tensor-parallel hang); restart both ranks"
    return message


# --- input --------------------------------------------------------------------------------------

def _name_error(option, value, allow_empty=False):
    if value == "" and allow_empty:
        return None
    if not CONTAINER_RE.match(value or ""):
        return "%s must be a Docker container name ([a-zA-Z0-9][a-zA-Z0-9_.-]*), got %r" % (option, value)
    return None


def validate(params):
    """Every problem with wait_for_slots' input, as messages naming the option; empty when fine."""
    errors = []
    url = params.get("url") or ""
    if not re.match(r"^https?://[^/\s]+", url):
        errors.append("url must be an http:// or https:// base URL such as http://127.0.0.1:8000, got %r" % url)
    if params["slots"] < 1:
        errors.append("slots must be at least 1, got %d" % params["slots"])
    for option in ("timeout", "interval", "canary_timeout"):
        if not params[option] > 0:  # also refuses nan
            errors.append("%s must be a positive number of seconds, got %s" % (option, params[option]))
    if params["interval"] > 0 and params["timeout"] > 0 and params["interval"] > params["timeout"]:
        errors.append("interval (%g s) must not exceed timeout (%g s)" % (params["interval"], params["timeout"]))
    if params["canary_max_tokens"] < 1:
        errors.append("canary_max_tokens must be at least 1, got %d" % params["canary_max_tokens"])
    if params["log_lines"] < 1:
        errors.append("log_lines must be at least 1, got %d" % params["log_lines"])
    if params.get("head_container") is not None:
        errors.append(_name_error("head_container", params["head_container"], allow_empty=True))
    for index, worker in enumerate(params.get("workers") or []):
        target = worker.get("ssh") or ""
        if not target or target.startswith("-") or any(char.isspace() for char in target):
            errors.append("workers[%d].ssh must be user@host or host, got %r" % (index, target))
        if worker.get("container") is not None:
            errors.append(_name_error("workers[%d].container" % index, worker["container"]))
    images = [("head_image", params.get("head_image"))] + [
        ("workers[%d].image" % index, worker.get("image")) for index, worker in enumerate(params.get("workers") or [])]
    for option, value in images:
        if value is not None and not IMAGE_ID_RE.match(value):
            errors.append("%s must be a full image id (sha256: and 64 hex digits, as docker image inspect -f "
                          "'{{.Id}}' prints), got %r" % (option, value))
    for value in params.get("previous_ids") or []:
        if not CONTAINER_ID_RE.match(value):
            errors.append("previous_ids must hold full container ids (64 hex digits), got %r" % value)
    if params.get("served_name") == "":
        errors.append("served_name must not be empty; leave it out to use the first id of /v1/models")
    return [error for error in errors if error]
