# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""CPU accounting for the test-cost benchmark and make test's stage table: the machine's busy
CPU from /proc/stat and the Spark lab nodes' CPU from their cgroups (cgroup v1 cpuacct or v2
cpu.stat), split by lab. Standard library only: make test runs it with the system python too.

A node's cgroup counts everything that ran on the node: systemd, sshd, the modules Ansible ran
there, its own Docker engine and that engine's containers (glm53-lab-docker-cgroup puts them
under the node). The controller's share is the machine's busy CPU less the nodes'."""

import glob
import json
import os
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
# Where each lab's Docker engine keeps its containers: lab 1 the machine's engine, lab N its own
# (lab/sparklab/host.py: --data-root ENGINE_DATA/docker).
ENGINE_ROOTS = {1: "/var/lib/docker"}
ENGINE_ROOTS.update({n: "/var/lib/glm53-lab-%d/docker" % n for n in range(2, 5)})


def machine_busy_s():
    """Seconds of CPU the whole machine spent busy (every state but idle and iowait)."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = stat.readline().split()[1:]
    ticks = [int(f) for f in fields]
    # user nice system idle iowait irq softirq steal guest guest_nice; guest is inside user.
    busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + (ticks[7] if len(ticks) > 7 else 0)
    return busy / CLK_TCK


def _container_cgroups():
    """{container id: path of a file whose number is its CPU in ns (v1) or usage_usec (v2)}."""
    found = {}
    for path in glob.glob("/sys/fs/cgroup/cpuacct/docker/*/cpuacct.usage") + \
            glob.glob("/sys/fs/cgroup/cpu,cpuacct/docker/*/cpuacct.usage"):
        found[os.path.basename(os.path.dirname(path))] = path
    for path in glob.glob("/sys/fs/cgroup/system.slice/docker-*.scope/cpu.stat") + \
            glob.glob("/sys/fs/cgroup/docker/*/cpu.stat"):
        name = os.path.basename(os.path.dirname(path))
        found[name.removeprefix("docker-").removesuffix(".scope")] = path
    return found


def _read_cpu_s(path):
    try:
        with open(path, encoding="ascii") as handle:
            if path.endswith("cpuacct.usage"):
                return int(handle.read()) / 1e9
            for line in handle:
                key, _sep, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
    except (OSError, ValueError):
        return None
    return None


def _lab_of(container_id, cache):
    """Which lab's engine holds this container (None: not a lab node, or not known)."""
    if container_id not in cache:
        cache[container_id] = None
        for lab, root in ENGINE_ROOTS.items():
            config = os.path.join(root, "containers", container_id, "config.v2.json")
            try:
                with open(config, encoding="utf-8") as handle:
                    labels = json.load(handle).get("Config", {}).get("Labels") or {}
            except (OSError, ValueError):
                continue
            if labels.get("glm53-lab") == "1":
                cache[container_id] = lab
            break
    return cache[container_id]


class NodeMeter:
    """Cumulative CPU seconds of each lab's nodes. A node removed between two reads keeps the
    CPU last read for it (a reading is lost only for the time since the last call)."""

    def __init__(self):
        self._labs = {}
        self._last = {}

    def read(self):
        for container_id, path in _container_cgroups().items():
            lab = _lab_of(container_id, self._labs)
            if lab is None:
                continue
            seconds = _read_cpu_s(path)
            if seconds is not None:
                self._last[container_id] = (lab, seconds)
        totals = {}
        for lab, seconds in self._last.values():
            totals[lab] = totals.get(lab, 0.0) + seconds
        return totals


def sample(out_path, interval=1.0, stop_path=None):
    """Append one JSON line per interval: {"t", "busy", "nodes": {lab: s}} until killed (or
    until stop_path exists)."""
    meter = NodeMeter()
    with open(out_path, "a", encoding="utf-8") as out:
        while stop_path is None or not os.path.exists(stop_path):
            row = {"t": round(time.time(), 2), "busy": round(machine_busy_s(), 2),
                   "nodes": {str(k): round(v, 2) for k, v in meter.read().items()}}
            out.write(json.dumps(row) + "\n")
            out.flush()
            time.sleep(interval)


def read_timeline(path):
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    return rows


def _at(rows, when):
    """The last sample at or before `when` (the first one when none is)."""
    best = rows[0]
    for row in rows:
        if row["t"] > when:
            break
        best = row
    return best


def span(rows, start, end):
    """(busy, nodes) CPU seconds between two times, from the timeline."""
    first, last = _at(rows, start), _at(rows, end)
    busy = last["busy"] - first["busy"]
    # NodeMeter's totals only grow (a removed node keeps what it had used).
    nodes = sum(last["nodes"].values()) - sum(first["nodes"].values())
    return busy, max(0.0, nodes)
