# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Wall time of playbooks/preflight.yml (the cx7_link role) on the two-node Spark lab.

Brings the lab up first (outside the timing, a no-op when it is up), runs one
untimed warm-up (SSH control masters, Ansible's caches), then times --runs runs of
the whole `ansible-playbook` process and prints a table and the median. Every run
must pass; a failed run aborts with its output.

    .venv/bin/python benchmarks/preflight.py [--runs 5] [--path tensorfold] [--target 20]

Exit status 0 when the median is under --target seconds, 1 otherwise.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAYBOOK = os.path.join(REPO, "playbooks", "preflight.yml")
INVENTORY = os.path.join(REPO, "lab", "inventory")


def lab_up():
    # lab/ is not a package and never ships: import the lab tool from its folder.
    sys.path.insert(0, os.path.join(REPO, "lab"))
    import spark_lab  # pylint: disable=import-outside-toplevel

    return spark_lab.up()


def run_once(path, report):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    # The venv's ansible-playbook, whatever PATH says.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    cmd = ["ansible-playbook", "-i", INVENTORY, PLAYBOOK, "-e", "path=%s" % path,
           "-e", "cx7_link_report_path=%s" % report]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-6000:] + proc.stderr[-2000:])
        raise SystemExit("preflight failed (rc=%d); fix the lab or the role before benchmarking" % proc.returncode)
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--path", choices=["tensorfold", "vllm"], default="tensorfold")
    parser.add_argument("--target", type=float, default=20.0, help="seconds the median must stay under")
    parser.add_argument("--no-lab-up", action="store_true", help="do not bring the lab up first")
    args = parser.parse_args(argv)

    if not args.no_lab_up:
        lab_up()
    with tempfile.TemporaryDirectory(prefix="glm53-preflight-bench-") as tmp:
        report = os.path.join(tmp, "report.json")
        warmup = run_once(args.path, report)
        times = [run_once(args.path, report) for _run in range(args.runs)]

    median = statistics.median(times)
    print("preflight.yml on the Spark lab (2 nodes, path %s, %d CPUs)" % (args.path, os.cpu_count() or 0))
    print("%-8s %9s" % ("run", "seconds"))
    print("%-8s %9.2f" % ("warm-up", warmup))
    for index, seconds in enumerate(times, 1):
        print("%-8d %9.2f" % (index, seconds))
    print("%-8s %9.2f" % ("min", min(times)))
    print("%-8s %9.2f" % ("median", median))
    print("%-8s %9.2f" % ("max", max(times)))
    verdict = "under" if median < args.target else "OVER"
    print("median %.2f s is %s the %.0f s target" % (median, verdict, args.target))
    return 0 if median < args.target else 1


if __name__ == "__main__":
    sys.exit(main())
