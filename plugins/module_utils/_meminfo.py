# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers: read /proc/meminfo. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

MEMINFO_PATH = "/proc/meminfo"
GIB = 1 << 30


def parse_meminfo(text):
    """Return /proc/meminfo as a dict of field name -> bytes.

    Lines look like ``MemFree:        1234 kB``; fields without a unit
    (``HugePages_Total``) are kept as plain counts.
    """
    result = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if not parts:
            continue
        try:
            value = int(parts[0])
        except ValueError:
            continue
        if len(parts) > 1 and parts[1].lower() == "kb":
            value *= 1024
        result[name.strip()] = value
    return result


def read_meminfo(path=MEMINFO_PATH):
    """Read and parse /proc/meminfo (or another file of the same format)."""
    with open(path, "r") as handle:
        return parse_meminfo(handle.read())


def free_after_balloon(free, balloon_result):
    """MemFree once a page_cache_evict balloon (method balloon, free_target_gib) let go: what it
    freed is free when it exits, before the node's meminfo shows it - its ``expected_free`` when
    it inflated, else the larger of ``free`` and what it expected (already there)."""
    result = balloon_result or {}
    expected = (result.get("free_target") or {}).get("expected_free")
    if result.get("balloon_bytes"):
        return expected if expected is not None else (result.get("memory_after") or {}).get("mem_free", free)
    return max(free, expected) if expected is not None else free


# The share of what the gate leaves of MemTotal that the balloon keeps free over the gate.
HEADROOM_SHARE = 0.75


def balloon_target(gate, mem_total, margin):
    """The MemFree (bytes) the balloon aims at before an engine start, on a node that eviction
    left under it: the engine's gate plus room for what is read back into the page cache before
    the engine measures (the daemon's and the image's files, Python, the libraries it imports),
    which on GB10 counts as used: the larger of ``margin`` and three quarters of what the gate
    leaves of MemTotal, (MemTotal - gate) * 3 / 4. A balloon that stopped at the gate plus a fixed
    0.25 GiB left a lab vLLM rank 0.01 GiB short once its start had read 0.33 GiB back, and a lab
    worker 3 MB under the kit's gate, which it then waited out; at half of that headroom a lab head
    ballooned to 3.7 GiB read 0.43 GiB back (dockerd, the image, the rank's Python) before vLLM's
    check and failed it at 3.27 of 3.28 GiB. On a Spark the image's libraries are GBs. The balloon
    never goes past keep_gib of MemAvailable, so a target out of reach only means a node that
    starts above the gate but short of the target. The same rule for the kit's gate (GiB) and
    vLLM's (a share of MemTotal). Both start procedures use it (the engine role's eviction and
    glm53-ops' evict)."""
    target = float(gate) + float(margin or 0)
    if mem_total and mem_total > gate:
        target = max(target, float(gate) + (float(mem_total) - float(gate)) * HEADROOM_SHARE)
    return target


def memory_summary(meminfo):
    """The numbers every role and module reports, in bytes. MemTotal sizes what an engine takes
    as a share of the node (vLLM's --gpu-memory-utilization)."""
    return {
        "mem_total": meminfo.get("MemTotal", 0),
        "mem_free": meminfo.get("MemFree", 0),
        "mem_available": meminfo.get("MemAvailable", 0),
        "cached": meminfo.get("Cached", 0),
    }
