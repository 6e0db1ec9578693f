# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How fast the watchdog finds and heals a fault, per fault kind, on the Spark lab: the role's
systemd schedule beside the spec's cron contract (a tick each minute, a restart after 3 failed
ticks), both run for real by the role (watchdog_schedule systemd / cron) on the same lab.

Needs a lab deployed with path=tensorfold (make lab) and linger for spark (the benchmark enables
it as root, the admin's step). For each schedule and fault kind, --runs rounds: make the fault,
then read the head's UTC log: detection = the first "unhealthy tick" line after the fault,
ready = the heal's READY line. Also counts double restarts: a heal's start beginning while
another start has not ended (from the log), which must be 0.

    .venv/bin/python benchmarks/watchdog_mttr.py [--runs 3] [--interval 15] [--cron-runs 1]

Fault kinds: kill rank 1 (docker kill on the worker), kill rank 0, a silent hang (the
simulated engine's lab-hang switch: /health stays ok, no token comes). Exit 0 when every
systemd detection is under --target seconds (60) and no restart overlapped.
"""

import argparse
import calendar
import json
import os
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "lab"))
import spark_lab  # noqa: E402  pylint: disable=wrong-import-position

LOG = "/home/spark/.local/state/glm53-tf-prod/tf-prod.log"
SESSIONS = "/home/spark/.cache/glm53-tf/sessions"
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)Z (.*)$")
FAULTS = {
    "kill rank 1": ("spark-worker", "docker kill glm53-tf-r1 >/dev/null"),
    "kill rank 0": ("spark-head", "docker kill glm53-tf-r0 >/dev/null"),
    "silent hang": ("spark-head", f"mkdir -p {SESSIONS} && echo once > {SESSIONS}/lab-hang"),
}


def spark(node, script, check=True):
    return spark_lab.node_exec(node, f"export XDG_RUNTIME_DIR=/run/user/$(id -u); {script}", user="spark",
                               check=check).stdout


def events():
    """``[(epoch, text)]`` of the head's log lines with a stamp."""
    out = []
    for line in spark("spark-head", f"cat {LOG} 2>/dev/null || true").splitlines():
        match = STAMP.match(line)
        if match:
            out.append((calendar.timegm(time.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S")), match.group(2)))
    return out


def playbook(path, extravars):
    args = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "lab/inventory", path]
    for key, value in extravars.items():
        args += ["-e", "%s=%s" % (key, json.dumps(value))]
    subprocess.run(args, cwd=REPO, check=True, stdout=subprocess.DEVNULL)


def one_round(kind, deadline):
    node, script = FAULTS[kind]
    before = len(events())
    fault_at = time.time()
    spark(node, script)
    detected = ready = None
    while time.time() < fault_at + deadline:
        new = events()[before:]
        detected = detected or next((t for t, text in new if "unhealthy tick" in text), None)
        ready = next((t for t, text in new if text.startswith("heal: READY")), None)
        if ready:
            break
        time.sleep(0.5)
    spark("spark-head", f"rm -f {SESSIONS}/lab-hang")
    # Whole seconds in the log: the fault's instant to the second below.
    base = int(fault_at)
    return (detected - base if detected else None), (ready - base if ready else None)


def overlaps():
    """Starts that began while another start had not ended (READY / START FAILED)."""
    count, open_start = 0, False
    for _t, text in events():
        if text.startswith("start ("):
            count += open_start
            open_start = True
        elif text.startswith(("READY", "START FAILED")):
            open_start = False
    return count


def summary(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-", "-", "-"
    return "%.0f" % statistics.median(values), "%.0f" % min(values), "%.0f" % max(values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cron-runs", type=int, default=1)
    parser.add_argument("--interval", type=int, default=15)
    parser.add_argument("--target", type=float, default=60.0)
    args = parser.parse_args()
    spark_lab.node_exec("spark-head", "loginctl enable-linger spark")
    rows, ok = [], True
    schedules = [("systemd every %d s" % args.interval, {"watchdog_schedule": "systemd",
                                                         "watchdog_interval": args.interval}, args.runs),
                 ("cron, 3 x 60 s (spec)", {"watchdog_schedule": "cron", "watchdog_interval": 60}, args.cron_runs)]
    for name, settings, runs in schedules:
        if runs < 1:
            continue
        playbook("playbooks/watchdog.yml", dict(settings, watchdog_canary_timeout=5, watchdog_heals_per_hour=60,
                                                watchdog_grace_seconds=600))
        time.sleep(5)
        for kind in FAULTS:
            detected, ready = [], []
            for _round in range(runs):
                found, healed = one_round(kind, deadline=4 * settings["watchdog_interval"] + 180)
                detected.append(found)
                ready.append(healed)
                time.sleep(settings["watchdog_interval"] + 2)
            rows.append((name, kind, runs) + summary(detected) + summary(ready))
            if name.startswith("systemd") and any(d is None or d >= args.target for d in detected):
                ok = False
    playbook("playbooks/watchdog.yml", {"watchdog_state": "absent"})
    doubles = overlaps()
    ok = ok and doubles == 0
    print("%-24s %-12s %4s | %-22s | %-22s" % ("schedule", "fault", "runs", "detection s (p50 min max)",
                                               "fault to ready s"))
    for row in rows:
        print("%-24s %-12s %4d | %6s %6s %6s        | %6s %6s %6s" % row)
    print("double restarts (a start beginning before the last one ended): %d" % doubles)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
