# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the test suite costs: wall time and CPU seconds per stage of make test and per test
module, the controller's CPU and the Spark lab nodes' CPU apart (cgroup CPU accounting).

    python3 benchmarks/test_cost.py run [--tree DIR] [--out DIR]             # the whole make test
    python3 benchmarks/test_cost.py run [--tree DIR] tests/integration/test_lab.py ...  # modules on lab 1
    python3 benchmarks/test_cost.py compare OLD/summary.json NEW/summary.json
    python3 benchmarks/test_cost.py stages TIMELINE MARKS [--budget FILE]   # make test's own table

`run` measures any checkout (--tree, default this one; an old commit's clone too): a sampler
records the machine's busy CPU and each lab's node CPU every second, and a pytest plugin
(benchmarks/pytest_cost, loaded through PYTEST_ADDOPTS) records each test's controller and node
CPU. Controller CPU per test is the pytest process and the children it reaped (ansible-runner,
ansible-playbook, its forks, ssh clients); the machine's busy CPU less the nodes' also counts
what no test process owns (dockerd, the lab hub, ssh's control masters). The summary is kept in
--out (default .build/test-cost/<commit>) as summary.json. CPU seconds are steadier than wall
time on a busy machine: decide with them.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _cost  # noqa: E402  pylint: disable=wrong-import-position

REPO = os.path.dirname(HERE)


def _stages_from_marks(path):
    """[(stage, start, end)] from make test's marks (one `stage start end` line a stage)."""
    stages = []
    with open(path, encoding="ascii") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) == 3:
                stages.append((parts[0], float(parts[1]), float(parts[2])))
    return stages


def _stages_from_output(text, start):
    """[(stage, start, end)] from the wall-time table an older make test printed at its end."""
    table = text.rsplit("make test: every stage passed", 1)
    if len(table) < 2:
        return []
    stages, now = [], start
    for name, seconds in re.findall(r"^(\S+)\s+(\d+) s$", table[1], re.M):
        if name == "total":
            break
        stages.append((name, now, now + int(seconds)))
        now += int(seconds)
    return stages


def stage_rows(timeline, stages):
    rows = []
    for name, start, end in stages:
        busy, nodes = _cost.span(timeline, start, end)
        rows.append({"stage": name, "wall": round(end - start), "cpu": round(busy), "nodes": round(nodes),
                     "controller": round(busy - nodes)})
    return rows


def print_stages(rows, out=sys.stdout):
    out.write("%-22s %7s %8s %12s %8s\n" % ("stage", "wall s", "CPU s", "controller s", "nodes s"))
    for row in rows:
        out.write("%-22s %7d %8d %12d %8d\n" % (row["stage"], row["wall"], row["cpu"], row["controller"], row["nodes"]))
    totals = tuple(sum(r[key] for r in rows) for key in ("wall", "cpu", "controller", "nodes"))
    out.write("%-22s %7d %8d %12d %8d\n" % (("total",) + totals))


def module_rows(cost_dir):
    modules = collections.OrderedDict()
    for name in sorted(os.listdir(cost_dir)) if os.path.isdir(cost_dir) else []:
        if not (name.startswith("tests-") and name.endswith(".jsonl")):
            continue
        for row in _cost.read_timeline(os.path.join(cost_dir, name)):
            key = (row["module"], row["lab"])
            acc = modules.setdefault(key, {"module": row["module"], "lab": row["lab"], "tests": 0, "wall": 0.0,
                                           "controller": 0.0, "nodes": 0.0})
            acc["tests"] += 1
            for field in ("wall", "controller", "nodes"):
                acc[field] += row[field]
    return sorted(modules.values(), key=lambda r: -(r["controller"] + r["nodes"]))


def print_modules(rows, out=sys.stdout):
    out.write("%-58s %3s %5s %7s %12s %8s\n" % ("module", "lab", "tests", "wall s", "controller s", "nodes s"))
    for row in rows:
        out.write("%-58s %3s %5d %7.0f %12.0f %8.0f\n" % (
            row["module"][-58:], row["lab"], row["tests"], row["wall"], row["controller"], row["nodes"]))
    totals = tuple(sum(r[key] for r in rows) for key in ("tests", "wall", "controller", "nodes"))
    out.write("%-58s %3s %5d %7.0f %12.0f %8.0f\n" % (("total", "") + totals))


def _commit(tree):
    try:
        return subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "tree"


def run(args):
    tree = os.path.abspath(args.tree)
    commit = _commit(tree)
    out = os.path.abspath(args.out or os.path.join(REPO, ".build", "test-cost", commit))
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        os.unlink(os.path.join(out, name))
    env = dict(os.environ, GLM53_TEST_COST_DIR=out,
               PYTHONPATH=os.pathsep.join(p for p in (os.path.join(HERE, "pytest_cost"), os.environ.get("PYTHONPATH"))
                                          if p),
               PYTEST_ADDOPTS=(os.environ.get("PYTEST_ADDOPTS", "") + " -p glm53_test_cost").strip())
    env.setdefault("CI", "true")
    if args.modules:
        command = "make setup lab-up >/dev/null && python -m pytest -p no:cacheprovider -m lab " + " ".join(args.modules)
        command = "export PATH=$PWD/.venv/bin:$PATH; " + command
    else:
        command = "make test"
    timeline = os.path.join(out, "timeline.jsonl")
    stop = os.path.join(out, ".stop")
    sampler = threading.Thread(target=_cost.sample, args=(timeline, 1.0, stop), daemon=True)
    sampler.start()
    start = time.time()
    with open(os.path.join(out, "output.log"), "w", encoding="utf-8") as log:
        proc = subprocess.Popen(["bash", "-c", command], cwd=tree, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            log.write(line)
            if not args.quiet:
                sys.stdout.write(line)
        rc = proc.wait()
    end = time.time()
    time.sleep(1.5)
    with open(stop, "w", encoding="ascii"):
        pass
    sampler.join(5)
    rows = _cost.read_timeline(timeline)
    with open(os.path.join(out, "output.log"), encoding="utf-8") as log:
        text = log.read()
    marks = os.path.join(tree, ".build", "test-cost", "stages.tsv")
    if args.modules:
        stages = [("pytest", start, end)]
    elif os.path.exists(marks) and os.path.getmtime(marks) >= start:
        stages = _stages_from_marks(marks)
    else:
        stages = _stages_from_output(text, start) or [("make test", start, end)]
    busy, nodes = _cost.span(rows, start, end)
    summary = {"commit": commit, "tree": tree, "command": command, "rc": rc, "wall": round(end - start),
               "cpu": round(busy), "nodes": round(nodes), "controller": round(busy - nodes),
               "stages": stage_rows(rows, stages), "modules": module_rows(out)}
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=1)
    report(summary)
    return rc


def report(summary, out=sys.stdout):
    out.write("\n%s (%s): rc %s, %d s wall, %d s CPU (controller %d, lab nodes %d), %d CPUs\n\n" % (
        summary["command"], summary["commit"], summary["rc"], summary["wall"], summary["cpu"],
        summary["controller"], summary["nodes"], os.cpu_count() or 0))
    print_stages(summary["stages"], out)
    if summary["modules"]:
        out.write("\n")
        print_modules(summary["modules"], out)


def compare(args):
    old, new = (json.load(open(p, encoding="utf-8")) for p in (args.old, args.new))
    print("%-24s %10s %10s %7s" % ("CPU s", old["commit"], new["commit"], "new/old"))

    def line(name, a, b):
        print("%-24s %10s %10s %7s" % (name, a if a is not None else "-", b if b is not None else "-",
                                       "%.2f" % (b / a) if a and b is not None else "-"))
    line("whole run: CPU", old["cpu"], new["cpu"])
    line("  controller", old["controller"], new["controller"])
    line("  lab nodes", old["nodes"], new["nodes"])
    line("whole run: wall", old["wall"], new["wall"])
    print()
    olds = {r["stage"]: r for r in old["stages"]}
    news = {r["stage"]: r for r in new["stages"]}
    for name in list(olds) + [n for n in news if n not in olds]:
        line("stage " + name, olds.get(name, {}).get("cpu"), news.get(name, {}).get("cpu"))
    print()
    oldm = collections.defaultdict(float)
    newm = collections.defaultdict(float)
    for rows, acc in ((old["modules"], oldm), (new["modules"], newm)):
        for row in rows:
            acc[row["module"]] += row["controller"] + row["nodes"]
    for name in sorted(set(oldm) | set(newm), key=lambda n: -oldm.get(n, 0)):
        if name.startswith("tests/integration"):
            line(name.split("/")[-1][:24], round(oldm[name]) if name in oldm else None,
                 round(newm[name]) if name in newm else None)
    return 0


def stages_cmd(args):
    """make test's table: each stage's wall and CPU, and with --modules each lab test module's;
    with --budget, exit 1 when a stage's CPU is over its budget by more than the budget's margin,
    or a module over its share says nothing of why in its docstring."""
    rows = stage_rows(_cost.read_timeline(args.timeline), _stages_from_marks(args.marks))
    print_stages(rows)
    modules = [row for row in (module_rows(args.modules) if args.modules else [])
               if row["module"].startswith("tests/integration/")]
    if modules:
        print()
        print_modules(modules)
    if not args.budget:
        return 0
    import _budget  # pylint: disable=import-outside-toplevel
    budget = _budget.load(args.budget)
    problems = _budget.over_budget(rows, budget) + _budget.unexplained_modules(modules, budget, REPO)
    for message in problems:
        print("make test: " + message)
    return 1 if problems else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    one = sub.add_parser("run", help="measure make test, or test modules on lab 1, in a checkout")
    one.add_argument("--tree", default=REPO)
    one.add_argument("--out")
    one.add_argument("--quiet", action="store_true", help="keep the command's output in the log only")
    one.add_argument("modules", nargs="*")
    two = sub.add_parser("compare", help="two summaries side by side")
    two.add_argument("old")
    two.add_argument("new")
    three = sub.add_parser("stages", help="make test's stage table from its timeline and marks")
    three.add_argument("timeline")
    three.add_argument("marks")
    three.add_argument("--budget")
    three.add_argument("--modules", help="the folder of the pytest plugin's per-test lines")
    four = sub.add_parser("sample", help="the sampler alone (make test runs it in the background)")
    four.add_argument("out")
    args = parser.parse_args(argv)
    if args.cmd == "sample":
        _cost.sample(args.out)
        return 0
    return {"run": run, "compare": compare, "stages": stages_cmd}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
