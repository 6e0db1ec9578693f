# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make test's CPU budget (tests/cost_budget.yml): each stage's CPU seconds against its budget,
and each lab test module's against its share. Pure but for load() and docstring()."""

import ast
import os


def load(path):
    # The venv's PyYAML: make test runs this with the venv's python.
    import yaml  # pylint: disable=import-outside-toplevel
    with open(path, encoding="utf-8") as handle:
        budget = yaml.safe_load(handle)
    problems = []
    if not isinstance(budget, dict):
        raise ValueError("%s: expected a mapping, found %r" % (path, type(budget).__name__))
    margin = budget.get("margin")
    if not isinstance(margin, (int, float)) or margin < 1:
        problems.append("margin: expected a number >= 1, found %r" % (margin,))
    share = budget.get("module_share")
    if not isinstance(share, (int, float)) or not 0 < share <= 1:
        problems.append("module_share: expected a number in (0, 1], found %r" % (share,))
    stages = budget.get("stages")
    if not isinstance(stages, dict) or not stages:
        problems.append("stages: expected a mapping of stage name to CPU seconds")
    else:
        for name, seconds in stages.items():
            if not isinstance(seconds, (int, float)) or seconds <= 0:
                problems.append("stages.%s: expected CPU seconds > 0, found %r" % (name, seconds))
    if problems:
        raise ValueError("%s: %s" % (path, "; ".join(problems)))
    return budget


def over_budget(rows, budget):
    """Messages for each stage whose CPU is over its budget times the margin, and for a stage
    measured that the budget does not name (a new stage must say what it may cost)."""
    messages = []
    stages, margin = budget["stages"], budget["margin"]
    for row in rows:
        allowed = stages.get(row["stage"])
        if allowed is None:
            messages.append("stage %s (%d s of CPU) has no budget in tests/cost_budget.yml: add one"
                            % (row["stage"], row["cpu"]))
        elif row["cpu"] > allowed * margin:
            messages.append("stage %s took %d s of CPU, over its budget of %d s by more than %.0f%% "
                            "(tests/cost_budget.yml; benchmarks/test_cost.py says where it went)"
                            % (row["stage"], row["cpu"], allowed, 100 * (margin - 1)))
    return messages


COST_MARK = "Cost:"


def docstring(path):
    with open(path, encoding="utf-8") as handle:
        return ast.get_docstring(ast.parse(handle.read())) or ""


def unexplained_modules(modules, budget, repo, read=docstring):
    """Messages for each test module whose CPU (controller + nodes) is over module_share of the
    integration stage's budget and whose docstring has no `Cost:` paragraph saying why."""
    limit = budget["module_share"] * budget["stages"].get("integration+molecule", 0)
    messages = []
    for row in modules:
        cpu = row["controller"] + row["nodes"]
        if not limit or cpu <= limit or not row["module"].startswith("tests/integration/"):
            continue
        path = os.path.join(repo, row["module"])
        if os.path.exists(path) and COST_MARK not in read(path):
            messages.append("%s took %d s of CPU, over %.0f%% of the lab stage's budget (%d s), and its docstring "
                            "has no '%s' paragraph saying why" % (row["module"], cpu, 100 * budget["module_share"],
                                                                  limit, COST_MARK))
    return messages
