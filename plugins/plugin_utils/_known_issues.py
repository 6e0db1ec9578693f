# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Known-bad node states and their fixes, as data (controller side). Not a public API.

One table, so a new bad kernel or driver is one entry here, not code in a check.
Each entry: ``id`` (the check name), ``level``, what it matches, the ``tell`` that
confirms it where there is one, the ``unless`` that shows it is already fixed, a
one-line ``summary`` and the ``fix``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

KNOWN_KERNELS = [
    {
        "id": "node.kernel",
        "level": "fail",
        "release": "7.0.0-1019-nvidia",
        # KHO on by default: RoCE memory registration fails at NCCL init
        # (`ibv_reg_mr_iova2 ... Cannot allocate memory`) with nothing in dmesg and the
        # ports ACTIVE. /proc/meminfo shows it: CmaFree above CmaTotal (~9.7 GiB vs 0).
        "tell": "cma_free_above_total",
        "unless_cmdline": "kho=off",
        "summary": "kernel 7.0.0-1019-nvidia with kexec handover (KHO) on: RoCE memory registration fails at NCCL "
                   "init (ibv_reg_mr_iova2 ... Cannot allocate memory)",
        "fix": "add kho=off to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, `sudo update-grub`, "
               "reboot) or boot the 6.17 kernel",
    },
]

KNOWN_DRIVERS = [
    {
        "id": "gpu.driver_version",
        "level": "warn",
        "prefix": "590.",
        "summary": "driver 590.x",
        "fix": "590.x has a reported CUDA-graph deadlock on GB10; 580.x is known good",
    },
]


def cma_free_above_total(meminfo):
    """The KHO tell: CmaFree larger than CmaTotal (parsed /proc/meminfo, bytes)."""
    return meminfo.get("CmaFree", 0) > meminfo.get("CmaTotal", 0)


TELLS = {"cma_free_above_total": cma_free_above_total}


def kernel_issues(release, meminfo, cmdline):
    """Known kernel problems present on a node: ``[(entry, found text)]``."""
    out = []
    for entry in KNOWN_KERNELS:
        if release.strip() != entry["release"]:
            continue
        if entry.get("unless_cmdline") and entry["unless_cmdline"] in (cmdline or "").split():
            continue
        tell = TELLS.get(entry.get("tell"))
        if tell is not None and not tell(meminfo):
            continue
        found = "kernel %s, CmaTotal %d kB, CmaFree %d kB, cmdline without %s" % (
            release.strip(), meminfo.get("CmaTotal", 0) // 1024, meminfo.get("CmaFree", 0) // 1024,
            entry.get("unless_cmdline") or "-")
        out.append((entry, found))
    return out


def driver_issues(driver):
    """Known driver problems for a driver version string: ``[entry]``."""
    return [entry for entry in KNOWN_DRIVERS if driver.startswith(entry["prefix"])]
