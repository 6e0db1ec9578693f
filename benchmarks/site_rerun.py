# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Wall time of a cold deploy and of converged reruns of playbooks/site.yml -e path=tensorfold
(or --path vllm) on the Spark lab.

Cold: the ranks stopped, the images and the weights removed from both nodes (outside the
timing), then one timed site.yml run to READY (8 slots; every vLLM rank joined). Rerun: --runs
timed runs on the converged lab, each of which must report changed=0. --no-cold skips the cold
deploy: one untimed run converges the lab instead (to compare two trees' reruns quickly).

    .venv/bin/python benchmarks/site_rerun.py [--path tensorfold|vllm] [--runs 5] [--target 45] [--ratio 0.15]
        [--no-cold]

Exit 0 when the median rerun is under --target seconds and (with the cold deploy) under --ratio x
the cold deploy.
"""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITE = os.path.join(REPO, "playbooks", "site.yml")
CPU = []  # the controller's CPU seconds of each run (ansible-playbook and its forks)
CLEAN = {
    "tensorfold": ("cd ~/glm53-tensorfold-spark 2>/dev/null && scripts/serve.sh stop >/dev/null 2>&1; "
                   "docker rmi -f glm53-tensorfold:lp9001 glm53-tensorfold:dev >/dev/null 2>&1; "
                   "rm -rf ~/.cache/huggingface/hub ~/glm53-tensorfold-spark ~/glm-5.3-flash-2xdgx-spark; true"),
    # The base image stays on the head (a Spark pulls it once); the built image, the recipe and
    # the weights go.
    "vllm": ("docker rm -f glm53-vllm >/dev/null 2>&1; docker rmi -f glm53-sm121:local >/dev/null 2>&1; "
             "rm -rf ~/.cache/huggingface/hub ~/glm-5.3-flash-2xdgx-spark-vllm; true"),
}


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(inventory, env, path):
    """One site.yml run: its wall seconds and changed count; its controller CPU goes to CPU."""
    start, cpu = time.monotonic(), _children_cpu()
    proc = subprocess.run(["ansible-playbook", "-i", inventory, SITE, "-e", "path=" + path], cwd=REPO, env=env,
                          capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    CPU.append(_children_cpu() - cpu)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-5000:] + proc.stderr[-2000:])
        raise SystemExit("site.yml failed (rc=%d)" % proc.returncode)
    changed = sum(int(n) for n in re.findall(r"changed=(\d+)", proc.stdout.split("PLAY RECAP")[-1]))
    return seconds, changed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", choices=sorted(CLEAN), default="tensorfold")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", type=float, default=45.0)
    parser.add_argument("--ratio", type=float, default=0.15)
    parser.add_argument("--no-cold", dest="cold", action="store_false",
                        help="converge with one untimed run instead of timing a cold deploy")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.join(REPO, "lab"))
    import spark_lab  # pylint: disable=import-outside-toplevel
    inventory = spark_lab.up(nodes=2).inventory
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    if args.cold:
        for node in ("spark-head", "spark-worker"):
            spark_lab.node_exec(node, CLEAN[args.path], user="spark", check=False)
    cold, _changed = run(inventory, env, args.path)
    reruns = []
    for _run in range(args.runs):
        seconds, changed = run(inventory, env, args.path)
        if changed:
            raise SystemExit("a converged rerun reported changed=%d" % changed)
        reruns.append(seconds)
    median = statistics.median(reruns)
    print("site.yml -e path=%s on the Spark lab (2 nodes, %d CPUs)" % (args.path, os.cpu_count() or 0))
    print("%-22s %8s %8s %8s %14s" % ("run", "min s", "median s", "max s", "controller CPU"))
    if args.cold:
        print("%-22s %8.1f %8.1f %8.1f %12.1f s" % ("cold deploy (1 run)", cold, cold, cold, CPU[0]))
    print("%-22s %8.1f %8.1f %8.1f %12.1f s" % ("converged rerun (%d)" % args.runs, min(reruns), median, max(reruns),
                                                statistics.median(CPU[1:])))
    print("\nrerun median %.1f s: %s %.0f s" % (median, "under" if median < args.target else "OVER", args.target)
          + ("; %.0f%% of the cold deploy (target under %.0f%%)" % (100 * median / cold, 100 * args.ratio)
             if args.cold else ""))
    return 0 if median < args.target and (not args.cold or median < args.ratio * cold) else 1


if __name__ == "__main__":
    sys.exit(main())
