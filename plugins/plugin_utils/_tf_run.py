# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The message a failed TensorFold start ends with: why, what serve.sh said, and both
ranks' last log lines (they are stopped right after, so this is the operator's record)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# scripts/serve.sh exit codes (kit.md 2.3).
SERVE_EXIT = {0: "ok", 1: "failed", 2: "configuration refused", 3: "fewer slots than GLM53_TF_BATCH"}


def _tail(lines, count=40):
    if isinstance(lines, str):
        lines = lines.splitlines()
    return [str(line) for line in (lines or [])][-count:]


def start_failure(wait, serve, attempt, slots, logs=None, log_path="~/.local/state/glm53-tf-prod/tf-prod.log"):
    """One message from the wait_for_slots result, the serve.sh start job's result, the attempt
    and ``serve.sh logs N`` results (``[{item: N, stdout, stderr}]``), which win over the
    log tails wait_for_slots keeps of exited ranks."""
    wait, serve = wait or {}, serve or {}
    rc = serve.get("rc")
    reason = wait.get("reason") or wait.get("msg") or "not ready"
    parts = ["tensorfold: not READY after %s start attempt(s): %s." % (attempt, reason)]
    if rc is not None:
        parts.append("serve.sh start exited %s (%s)." % (rc, SERVE_EXIT.get(rc, "unexpected")))
    elif serve.get("msg"):
        parts.append("serve.sh start: %s." % serve["msg"])
    if wait.get("slots") is not None and int(wait.get("slots") or 0) < int(slots):
        parts.append("Slots: %s of %s. On GB10 page cache counts as used at load: keep tensorfold_evict true (before "
                     "each start MemFree on both nodes is brought to the kit's memory gate, MEM_GATE_GIB) and stop "
                     "other workloads." % (wait.get("slots"), slots))
    by_rank = {}
    for res in logs or []:
        if res.get("skipped"):
            continue
        text = (res.get("stdout") or "") + (("\n" + res["stderr"]) if res.get("stderr") else "")
        by_rank[int(res.get("item", -1))] = text.strip("\n")
    for index, rank in enumerate(wait.get("ranks") or []):
        tail = _tail(by_rank.get(rank.get("rank", index)) or rank.get("log_tail"))
        parts.append("Last %d lines of %s on %s (%s):\n%s" % (
            len(tail), rank.get("container") or "rank", rank.get("node") or "?", rank.get("state") or "unknown",
            "\n".join(tail) if tail else "(no log)"))
    parts.append("Both ranks were stopped; the log is %s on the head." % log_path)
    return "\n".join(parts)
