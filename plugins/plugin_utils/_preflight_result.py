# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Result records of a preflight (controller side). Not a public API.

Every preflight of the collection (link, weights, engines) reports checks in this
one shape, so reports, tables and gates read the same everywhere:

    {check, node, netdev, status, level, expected, found, fix, summary, needs, message}

``level`` is what a problem costs (fail stops the play, warn does not); ``status``
is what happened (ok, warn, fail, skip). A skipped check names the checks it
``needs``; :func:`enforce_skips` turns a skipped fail-level check into a failure
unless a failed check explains the skip, so a broken node can never pass by
having its checks skipped.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
RANK = {SKIP: 0, OK: 0, WARN: 1, FAIL: 2}


def result(check, node, status, level, expected="", found="", fix="", summary="", netdev=None, needs=None):
    """One check outcome. Call with keywords past ``level``."""
    entry = {
        "check": check,
        "node": node,
        "netdev": netdev,
        "status": status,
        "level": level,
        "expected": expected,
        "found": found,
        "fix": fix if status in (WARN, FAIL) else "",
        "summary": summary,
        "needs": list(needs or []),
    }
    entry["message"] = format_message(entry)
    return entry


def skipped(check, node, level, needs, summary="", netdev=None):
    """A check that could not run because the ``needs`` checks did not pass."""
    needs = [needs] if isinstance(needs, str) else list(needs)
    return result(check, node, SKIP, level, summary=summary or "needs %s" % ", ".join(needs), netdev=netdev,
                  needs=needs)


def passed_or(level, ok):
    """``ok`` when the condition holds, else the check's level."""
    return OK if ok else level


def format_message(entry):
    """``[check] node: summary; expected X, found Y; fix: Z`` (empty parts left out)."""
    parts = ["[%s] %s: %s" % (entry["check"], entry["node"], entry["summary"] or entry["status"])]
    if entry["expected"] or entry["found"]:
        parts.append("expected %s, found %s" % (entry["expected"] or "-", entry["found"] or "-"))
    if entry.get("fix"):
        parts.append("fix: %s" % entry["fix"])
    return "; ".join(parts)


def tag(entries, netdev):
    """Tie link checks to their link."""
    for entry in entries:
        entry["netdev"] = netdev
    return entries


def enforce_skips(checks):
    """A skipped fail-level check passes only when a failure explains it.

    The explanation is a failed check named in ``needs`` (on any node: pair checks
    depend on both ends), directly or through other explained skips. An
    unexplained skip becomes a failure naming what it waited for.
    """
    failed = set(c["check"] for c in checks if c["status"] == FAIL)
    explained = set()
    changed = True
    while changed:
        changed = False
        for index, entry in enumerate(checks):
            if entry["status"] != SKIP or index in explained:
                continue
            needs = entry.get("needs") or []
            if any(need in failed for need in needs) or any(
                    checks[i]["check"] in needs for i in explained):
                explained.add(index)
                changed = True
    out = []
    for index, entry in enumerate(checks):
        if entry["status"] == SKIP and entry["level"] == FAIL and index not in explained:
            entry = result(
                entry["check"], entry["node"], FAIL, FAIL,
                expected="the check runs, or a failed check it needs (%s) explains why not"
                % (", ".join(entry.get("needs") or []) or "none named"),
                found="skipped (%s) with nothing failed to explain it" % (entry["summary"] or "no reason"),
                fix="rerun with -v and look at the node's gathered facts; this state is unexpected, report it",
                summary="skipped without a failing cause", netdev=entry.get("netdev"), needs=entry.get("needs"))
        out.append(entry)
    return out


def summarize(checks, nodes):
    """``{status, nodes, checks, failures, warnings}`` with the worst status per node."""
    per_node = {}
    for node in nodes:
        worst = max([RANK[c["status"]] for c in checks if c["node"] == node] or [0])
        per_node[node] = {0: OK, 1: WARN, 2: FAIL}[worst]
    failures = [c for c in checks if c["status"] == FAIL]
    warnings = [c for c in checks if c["status"] == WARN]
    return {
        "status": FAIL if failures else (WARN if warnings else OK),
        "nodes": per_node,
        "checks": checks,
        "failures": failures,
        "warnings": warnings,
    }
