# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Wall time of playbooks/preflight.yml (the cx7_link role) on the Spark lab, per node count.

For each node count it brings the lab to that many nodes (outside the timing), runs
one untimed warm-up (SSH control masters, Ansible's caches), times --runs runs of the
whole `ansible-playbook` process, then runs once more with ansible.posix.profile_tasks
to show where the time goes. Every run must pass; a failed run aborts with its output.
The lab is left at 2 nodes.

    .venv/bin/python benchmarks/preflight.py [--nodes 2,4] [--runs 5] [--path tensorfold] [--target 10]

Exit status 0 when the 2-node median is under --target seconds and the time grows less
than linearly with the node count (median(N) / median(2) < N / 2), 1 otherwise.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAYBOOK = os.path.join(REPO, "playbooks", "preflight.yml")
# "Task name ------- 1.23s" lines of ansible.posix.profile_tasks
PROFILE_LINE = re.compile(r"^(?P<task>.+?)\s+-{3,}\s+(?P<seconds>[0-9.]+)s$")


def lab_up(nodes):
    # lab/ is not a package and never ships: import the lab tool from its folder.
    sys.path.insert(0, os.path.join(REPO, "lab"))
    import spark_lab  # pylint: disable=import-outside-toplevel

    return spark_lab.up(nodes=nodes)


def run_once(inventory, path, report, profile=False):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    # The venv's ansible-playbook, whatever PATH says.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    if profile:
        env.update(ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks", PROFILE_TASKS_TASK_OUTPUT_LIMIT="8",
                   PROFILE_TASKS_SORT_ORDER="descending")
    cmd = ["ansible-playbook", "-i", inventory, PLAYBOOK, "-e", "path=%s" % path,
           "-e", "cx7_link_report_path=%s" % report]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-6000:] + proc.stderr[-2000:])
        raise SystemExit("preflight failed (rc=%d); fix the lab or the role before benchmarking" % proc.returncode)
    top = []
    if profile:
        for line in proc.stdout.splitlines():
            match = PROFILE_LINE.match(line.strip())
            if match:
                top.append((match.group("task"), float(match.group("seconds"))))
    return seconds, top


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="2,4", help="comma-separated node counts")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--path", choices=["tensorfold", "vllm"], default="tensorfold")
    parser.add_argument("--target", type=float, default=10.0, help="seconds the 2-node median must stay under")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.nodes.split(",")]

    rows, profiles = [], {}
    try:
        with tempfile.TemporaryDirectory(prefix="glm53-preflight-bench-") as tmp:
            report = os.path.join(tmp, "report.json")
            for count in counts:
                inventory = lab_up(count).inventory
                run_once(inventory, args.path, report)
                times = [run_once(inventory, args.path, report)[0] for _run in range(args.runs)]
                rows.append((count, times))
                profiles[count] = run_once(inventory, args.path, report, profile=True)[1]
    finally:
        if counts != [2]:
            lab_up(2)

    print("preflight.yml on the Spark lab (path %s, %d CPUs, %d runs each)"
          % (args.path, os.cpu_count() or 0, args.runs))
    print("%-6s %8s %8s %8s" % ("nodes", "min", "median", "max"))
    medians = {}
    for count, times in rows:
        medians[count] = statistics.median(times)
        print("%-6d %8.2f %8.2f %8.2f" % (count, min(times), medians[count], max(times)))
    for count, top in sorted(profiles.items()):
        print("\nwhere the time goes, %d nodes (profile_tasks, slowest first):" % count)
        for task, seconds in top:
            print("  %6.2f s  %s" % (seconds, task))
    ok = True
    if 2 in medians:
        verdict = medians[2] < args.target
        ok &= verdict
        print("\n2-node median %.2f s is %s the %.0f s target" % (medians[2], "under" if verdict else "OVER", args.target))
        for count in sorted(medians):
            if count > 2:
                ratio = medians[count] / medians[2]
                sub = ratio < count / 2.0
                ok &= sub
                print("%d nodes: %.2fx the 2-node time for %.1fx the nodes (%s)" % (
                    count, ratio, count / 2.0, "less than linear" if sub else "NOT less than linear"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
