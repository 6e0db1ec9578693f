# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rendering of a preflight report (controller side): the table in the play output
and the lines of the gate message. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._preflight_result import RANK, SKIP


def report_table(report):
    """Fixed-width lines: one row per check, one column per node (worst status)."""
    nodes = list(report["nodes"])
    rows = {}
    order = []
    for check in report["checks"]:
        if check["check"] not in rows:
            rows[check["check"]] = {}
            order.append(check["check"])
        cell = rows[check["check"]]
        previous = cell.get(check["node"])
        if previous is None or previous == SKIP or RANK[check["status"]] > RANK[previous]:
            cell[check["node"]] = check["status"]
    width = max([len(name) for name in order] + [5])
    col = max([len(n) for n in nodes] + [4])

    def row(label, cells):
        return ("%-*s  %s" % (width, label, "  ".join("%-*s" % (col, cell) for cell in cells))).rstrip()

    lines = [row("check", nodes)]
    for name in order:
        lines.append(row(name, [rows[name].get(n, "-") for n in nodes]))
    lines.append(row("overall", [report["nodes"][n] for n in nodes]))
    return lines


def report_lines(report, title):
    """The play-output view: a title, the table, then every warning and failure."""
    return ([title] + report_table(report)
            + ["WARN " + c["message"] for c in report["warnings"]]
            + ["FAIL " + c["message"] for c in report["failures"]])


def gate_lines(report, name, report_path, note):
    """The message of a failed gate: which nodes, every failure, what to do."""
    nodes = []
    for check in report["failures"]:
        if check["node"] not in nodes:
            nodes.append(check["node"])
    title = "%s failed on %s (%d check(s); report %s):" % (
        name, ", ".join(nodes), len(report["failures"]), report_path)
    return ([title]
            + [c["message"] for c in report["failures"]]
            + ["Fix the above and rerun%s" % ("; " + note if note else ".")])
