# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Wall time of hf_weights' mirror versus download distribution on the Spark lab, with
the lab hub limited to one shared uplink.

The lab hub (lab/hub) serves glm53-lab/bench-1g (8 x 128 MiB, 1 GiB) with one token bucket
for all connections, as an office uplink is one link for both nodes. For each mode and
run it wipes the repo from both nodes' caches (outside the timing), then times the whole
`ansible-playbook playbooks/hf_weights.yml` process until both nodes hold a verified copy.
It also reads the hub's request log: mirror must fetch each file once, download twice.

    .venv/bin/python benchmarks/weights_distribution.py [--rate-mbs 50] [--runs 3] [--target 0.6]

Exit 0 when the median mirror time is at most --target x the median download time.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HUB = "http://198.18.0.1:8090"
PLAYBOOK = os.path.join(REPO, "playbooks", "hf_weights.yml")
NODES = ("spark-head", "spark-worker")


def lab():
    sys.path.insert(0, os.path.join(REPO, "lab"))
    import spark_lab  # pylint: disable=import-outside-toplevel
    os.environ["GLM53_LAB_HUB_BENCH"] = "1"  # the hub serves the 1 GiB repo too
    return spark_lab


def hub(path, payload=None):
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(HUB + path, data=data, method="GET" if data is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        body = resp.read()
    return json.loads(body) if body else None


def run(args, env, extra):
    cmd = ["ansible-playbook", "-i", args.inventory, PLAYBOOK, "-e", "path=tensorfold"]
    for key, value in extra.items():
        cmd += ["-e", json.dumps({key: value})]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-5000:] + proc.stderr[-2000:])
        raise SystemExit("hf_weights failed (rc=%d)" % proc.returncode)
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate-mbs", type=float, default=50.0, help="the shared uplink in MB/s")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--target", type=float, default=0.6)
    args = parser.parse_args(argv)
    spark_lab = lab()
    args.inventory = spark_lab.up(nodes=2).inventory
    sys.path.insert(0, os.path.join(REPO, "lab", "hub"))
    import repos  # pylint: disable=import-outside-toplevel
    bench = {"tensorfold": [{"repo_id": repos.BENCH, "revision": repos.PINNED[repos.BENCH]}]}
    size = sum(f.size for f in repos.catalog(bench=True)[repos.BENCH].files)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    subprocess.run(["ansible-playbook", "-i", args.inventory, os.path.join(REPO, "playbooks", "preflight.yml"),
                    "-e", "path=tensorfold"], cwd=REPO, env=env, capture_output=True, check=True)
    folder = "models--" + repos.BENCH.replace("/", "--")
    results = {}
    fetched = {}
    try:
        for mode in ("download", "mirror"):
            times = []
            for _run in range(args.runs):
                for node in NODES:
                    spark_lab.node_exec(node, "rm -rf ~/.cache/huggingface/hub/%s" % folder, user="spark")
                hub("/_lab/reset", {})
                hub("/_lab/faults", {"rate_bps": int(args.rate_mbs * 1e6)})
                times.append(run(args, env, {"glm53_models": bench, "hf_weights_distribution": mode,
                                             "glm53_disk_need_bytes": {"tensorfold": {}}}))
                log = hub("/_lab/requests")
                log = log["requests"] if isinstance(log, dict) else log
                fetched[mode] = sum(1 for e in log if e.get("method") == "GET" and "/resolve/" in e.get("path", "")
                                    and e.get("status") in (200, 206))
            results[mode] = times
    finally:
        hub("/_lab/reset", {})
    print("hf_weights distribution on the Spark lab: %s (%.2f GiB), hub uplink %.0f MB/s shared, %d runs, %d CPUs"
          % (repos.BENCH, size / 2 ** 30, args.rate_mbs, args.runs, os.cpu_count() or 0))
    print("%-9s %8s %8s %8s %14s" % ("mode", "min s", "median s", "max s", "file GETs/run"))
    for mode, times in results.items():
        print("%-9s %8.1f %8.1f %8.1f %14d" % (mode, min(times), statistics.median(times), max(times), fetched[mode]))
    ratio = statistics.median(results["mirror"]) / statistics.median(results["download"])
    print("\nmirror / download = %.2f (target <= %.2f)" % (ratio, args.target))
    return 0 if ratio <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
