# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for what the cx7_link preflight gathers on the nodes (controller side).

Commands on the nodes are run with a deadline and come back as
``{rc, stdout, stderr, timed_out, command, timeout}``; these turn them into data
and short human reasons. Not a public API.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

GB = 1000 ** 3
GIB = 1 << 30


def parse_gpus(text):
    """``nvidia-smi --query-gpu=name,driver_version --format=csv,noheader`` -> [{name, driver}]."""
    gpus = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        name, sep, driver = line.rpartition(",")
        if not sep:
            name, driver = line, ""
        gpus.append({"name": name.strip(), "driver": driver.strip()})
    return gpus


def parse_compute_apps(text):
    """``nvidia-smi --query-compute-apps=pid,name --format=csv,noheader`` -> [{pid, name}]."""
    apps = []
    for line in (text or "").splitlines():
        if not line.strip() or line.strip().lower().startswith("no running"):
            continue
        pid, _sep, name = line.partition(",")
        pid = pid.strip()
        apps.append({"pid": int(pid) if pid.isdigit() else pid, "name": name.strip()})
    return apps


def timed_out(registered):
    return bool((registered or {}).get("timed_out"))


def command_error(registered):
    """Short human reason a command failed: the deadline it missed, else stderr, msg or rc."""
    if not registered:
        return "not run"
    if timed_out(registered):
        command = registered.get("command") or "the command"
        return "`%s` did not answer within %s s (wedged)" % (command, seconds(registered.get("timeout")))
    for key in ("stderr", "msg", "stdout"):
        text = (registered.get(key) or "").strip()
        if text:
            return text.splitlines()[-1].strip()
    return "rc=%s" % registered.get("rc")


def seconds(value):
    """``5`` for 5.0, ``2.5`` for 2.5: how a deadline reads in a message."""
    try:
        return "%g" % float(value)
    except (TypeError, ValueError):
        return str(value)
