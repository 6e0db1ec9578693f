# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How soon a start is known to be READY: dgx_spark.glm53.wait_for_slots against the seed's
way (tf-prod.sh: serve.sh start, then one check), on the Spark lab's simulated engine.

Needs a lab deployed with path=tensorfold (make lab). Each of --starts rounds: stop both
ranks, evict the weights on both nodes (so all 8 slots fit), then (after --head-start
seconds, so the module is already polling) start both ranks
with the kit's `serve.sh start` on the head (which returns after its /v1/models poll and
slot check; the seed then checks once) and run wait_for_slots through ansible-runner. The
reference instant is the engine's own: the container-log timestamp (docker logs -t) of
rank 0's `serving ...` line, printed once every slot is loaded. Latencies are measured to
the instant each way knows: the runner event of the module's result on the controller, and
the head's clock right after serve.sh start returned plus one check. Controller and nodes
share one clock (the lab's nodes are containers).

    .venv/bin/python benchmarks/readiness.py [--starts 10] [--target 1.5]
    .venv/bin/python benchmarks/readiness.py --path vllm [--starts 10] [--target 1.0]

With --path vllm (a lab deployed with path=vllm): each round stops both ranks and parks them
under another name (the role's containers stay), evicts, then - while wait_for_slots in vLLM
mode already polls - starts the worker's rank and then the head's (docker start, as the role
orders them). The reference
instant is rank 0's `Application startup complete.` (its API answers only after every rank
joined and the simulated load finished); the recipe's way is start-tp2.sh's loop, a
`curl /health` every 15 s from the start.

Exit 0 when the p95 of wait_for_slots is under --target seconds.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KIT = "~/glm53-tensorfold-spark"
EVICT = ("python3 -c \"import os,sys\nfor root,_d,fs in os.walk(os.path.expanduser('~/.cache/huggingface/hub')):\n"
         " for f in fs:\n  p=os.path.join(root,f)\n  fd=os.open(p,os.O_RDONLY)\n"
         "  os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED); os.close(fd)\"")


def node(spark_lab, name, script, check=True):
    return spark_lab.node_exec(name, script, user="spark", check=check).stdout


def engine_ready(spark_lab, container="glm53-tf-r0", line="\\[tensorfold\\] serving "):
    """Epoch seconds of rank 0's ready line (all slots loaded; the vLLM API up), from docker's log
    timestamps of the container's current run."""
    out = node(spark_lab, "spark-head", "docker logs -t --since \"$(docker inspect -f '{{.State.StartedAt}}' %s)\" %s 2>&1 "
               "| grep -m1 '%s'" % (container, container, line))
    stamp = out.split()[0]  # RFC 3339 with nanoseconds
    whole, frac = stamp.rstrip("Z").split(".")
    base = datetime.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return base.timestamp() + float("0." + frac)


def wait_for_slots(private, inventory, module_args):
    """Run wait_for_slots on the head through ansible-runner; the epoch instant its result arrived."""
    import ansible_runner  # pylint: disable=import-outside-toplevel
    runner = ansible_runner.run(
        private_data_dir=private, inventory=inventory, host_pattern="spark-head", quiet=True,
        module="dgx_spark.glm53.wait_for_slots", module_args=json.dumps(module_args),
        envvars={"ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg")})
    done = [ev for ev in runner.events if ev.get("event") in ("runner_on_ok", "runner_on_failed")]
    if not done or done[-1]["event"] != "runner_on_ok":
        raise SystemExit("wait_for_slots failed: %s" % (done[-1]["event_data"]["res"].get("msg") if done else "?"))
    return datetime.datetime.fromisoformat(done[-1]["created"]).replace(tzinfo=datetime.timezone.utc).timestamp()


def seed_instant(spark_lab, timeout, failure):
    """The head's clock when the seed's (or recipe's) way knew the service was up (/tmp/seed-done)."""
    deadline = time.time() + timeout
    while not node(spark_lab, "spark-head", "cat /tmp/seed-done 2>/dev/null; true").strip():
        if time.time() > deadline:
            raise SystemExit(failure)
        time.sleep(0.2)
    return float(node(spark_lab, "spark-head", "cat /tmp/seed-done").strip())


def percentile(values, pct):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100.0 * (len(ordered) - 1))))]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--target", type=float, default=1.5)
    parser.add_argument("--head-start", type=int, default=10, help="seconds the module polls before the start begins")
    parser.add_argument("--path", choices=("tensorfold", "vllm"), default="tensorfold")
    args = parser.parse_args(argv)
    if args.path == "vllm":
        return vllm_main(args)
    sys.path.insert(0, os.path.join(REPO, "lab"))
    import spark_lab  # pylint: disable=import-outside-toplevel
    inventory = spark_lab.up(nodes=2).inventory
    module_args = {"url": "http://127.0.0.1:8000", "slots": 8, "timeout": 120, "interval": 1,
                   "workers": [{"ssh": "spark@198.18.1.11", "container": "glm53-tf-r1", "node": "spark-worker"}]}
    ours, seeds = [], []
    private = tempfile.mkdtemp(prefix="glm53-readiness-")
    try:
        for _round in range(args.starts):
            node(spark_lab, "spark-head", "cd %s && scripts/serve.sh stop >/dev/null 2>&1; true" % KIT)
            for name in ("spark-head", "spark-worker"):
                node(spark_lab, name, EVICT)
            # The start begins a few seconds later, so the module is already polling (ansible's own
            # start-up and the ssh connection are not what this measures).
            node(spark_lab, "spark-head", "rm -f /tmp/seed-done; (sleep %d; cd %s && scripts/serve.sh start >/dev/null 2>&1; "
                 "curl -s -m 10 127.0.0.1:8000/health >/dev/null; date +%%s.%%N > /tmp/seed-done) "
                 ">/dev/null 2>&1 </dev/null & disown" % (args.head_start, KIT))
            returned = wait_for_slots(private, inventory, module_args)
            seed_done = seed_instant(spark_lab, 120, "serve.sh start did not return")
            ready = engine_ready(spark_lab)
            ours.append(returned - ready)
            seeds.append(seed_done - ready)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return report(args, ours, seeds, "the simulated engine loaded all 8 slots",
                  ("wait_for_slots (interval 1 s, canary incl.)", "seed: serve.sh start, then one check"))


# The ranks are parked under another name while stopped, so the module waits for a rank that
# does not exist yet (an exited one is a failure). After --head-start seconds: the worker's rank
# back and started (over ssh, as the recipe's start-tp2.sh does), then the head's; then the
# recipe's readiness loop (rank-tp2.sh sleeps 2 s, then a /health curl every 15 s).
PARK = "docker stop -t 10 glm53-vllm >/dev/null && docker rename glm53-vllm glm53-vllm-parked && "
UNPARK = "docker rename glm53-vllm-parked glm53-vllm && docker start glm53-vllm >/dev/null"
VLLM_SEED = ("rm -f /tmp/seed-done; (sleep %d; ssh -o BatchMode=yes spark@198.18.1.11 '" + UNPARK + "'; " + UNPARK
             + "; sleep 2; until curl -fs -m 5 127.0.0.1:8000/health >/dev/null; do sleep 15; done; "
             "date +%%s.%%N > /tmp/seed-done) >/dev/null 2>&1 </dev/null & disown")


def vllm_main(args):
    """The --path vllm rounds: wait_for_slots (vLLM mode) against the recipe's 15 s /health loop."""
    sys.path.insert(0, os.path.join(REPO, "lab"))
    import spark_lab  # pylint: disable=import-outside-toplevel
    inventory = spark_lab.up(nodes=2).inventory
    module_args = {"mode": "vllm", "url": "http://127.0.0.1:8000", "timeout": 180, "interval": 1,
                   "served_name": "glm-5.3-flash-nvfp4-sm121",
                   "workers": [{"ssh": "spark@198.18.1.11", "container": "glm53-vllm", "node": "spark-worker"}]}
    ours, seeds = [], []
    private = tempfile.mkdtemp(prefix="glm53-readiness-")
    try:
        for _round in range(args.starts):
            for name in ("spark-head", "spark-worker"):
                node(spark_lab, name, PARK + EVICT)
            node(spark_lab, "spark-head", VLLM_SEED % args.head_start)
            returned = wait_for_slots(private, inventory, module_args)
            seed_done = seed_instant(spark_lab, 180, "the recipe's /health loop never saw 200")
            ready = engine_ready(spark_lab, "glm53-vllm", "Application startup complete")
            ours.append(returned - ready)
            seeds.append(seed_done - ready)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return report(args, ours, seeds, "vLLM TP2 API up after every rank joined and the simulated load",
                  ("wait_for_slots vllm (1 s, canary incl.)", "recipe: start-tp2.sh /health every 15 s"))


def report(args, ours, seeds, what, labels):
    print("READY latency after %s (%d starts, lab, %d CPUs)" % (what, args.starts, os.cpu_count() or 0))
    print("%-44s %7s %7s %7s" % ("way", "p50 s", "p95 s", "max s"))
    for label, values in zip(labels, (ours, seeds)):
        print("%-44s %7.2f %7.2f %7.2f" % (label, statistics.median(values), percentile(values, 95), max(values)))
    p95 = percentile(ours, 95)
    print("\nwait_for_slots p95 %.2f s: %s the %.1f s target" % (p95, "under" if p95 < args.target else "OVER", args.target))
    return 0 if p95 < args.target else 1


if __name__ == "__main__":
    sys.exit(main())
