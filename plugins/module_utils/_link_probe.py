# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers for link_probe. Not a public API.

The probes between nodes (DF pings, a TCP listener and connector, ssh) are built on
plain sockets, on ``_deadline.run_with_timeout``, the one way node-side code runs
a command that can wedge, and on ``_ssh.run_ssh``, the one way it reaches a worker.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import socket
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import os_error, run_with_timeout
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ssh import run_ssh

# A refused connect means the listener is not up yet; try again this often.
CONNECT_RETRY = 0.1
# Seconds a ping may run past its own schedule (count * interval + -W) before it counts as wedged.
PING_SLACK = 2.0
PING_INTERVAL = 0.2  # link_probe's default: the least iputils allows an unprivileged user
MAX_PING_THREADS = 16

PING_COUNT_RANGE = (1, 20)
PING_INTERVAL_RANGE = (0.2, 10.0)  # iputils refuses intervals under 0.2 s for non-root users
PING_TIMEOUT_RANGE = (1, 60)
PING_SIZE_RANGE = (0, 65507)  # the largest ICMP payload an IPv4 datagram can carry
PORT_RANGE = (1, 65535)
TIMEOUT_RANGE = (0.1, 3600.0)
EXPECT_RANGE = (1, 128)


def ping_deadline(count, interval, timeout):
    """Seconds a ping may run before it counts as wedged and is killed: its schedule plus PING_SLACK."""
    return count * interval + timeout + PING_SLACK


def ping_argv(netdev, target, size, count, interval, timeout):
    return ["ping", "-M", "do", "-s", str(size), "-c", str(count), "-i", "%g" % interval, "-W", str(timeout),
            "-I", netdev, target]


def ping_error(run):
    """Why a ping failed: a timeout or start failure, ping's errors (not its warnings) and the loss summary."""
    errors = [run["error"]] if run["error"] else []
    errors += [line.strip() for line in run["stderr"].splitlines() if line.strip() and "warning" not in line.lower()]
    errors += [line.strip() for line in run["stdout"].splitlines() if "packet loss" in line]
    return "; ".join(errors) or "rc=%s" % run["rc"]


def run_pings(pings, count, interval, timeout):
    """DF-ping every ``{netdev, target, size, peer}`` in ``pings`` at once.

    Each ping is bounded by its own schedule plus PING_SLACK, so the call takes about as
    long as the slowest ping. Returns one ``{netdev, target, peer, size, rc, ok, command,
    error, timed_out}`` per entry, in order; ``error`` is None when ``ok``.
    """
    deadline = ping_deadline(count, interval, timeout)

    def one(entry):
        argv = ping_argv(netdev=entry["netdev"], target=entry["target"], size=entry["size"], count=count,
                         interval=interval, timeout=timeout)
        run = run_with_timeout(argv, deadline)
        ok = run["rc"] == 0 and not run["timed_out"]
        return {"netdev": entry["netdev"], "target": entry["target"], "peer": entry.get("peer"),
                "size": entry["size"], "rc": run["rc"], "ok": ok, "command": run["command"],
                "error": None if ok else ping_error(run), "timed_out": run["timed_out"]}

    if not pings:
        return []
    with ThreadPoolExecutor(max_workers=min(len(pings), MAX_PING_THREADS)) as pool:
        return list(pool.map(one, pings))


def listen(address, port, timeout, expect=1):
    """Listen on ``address:port`` until ``expect`` connections were accepted or ``timeout`` seconds passed.

    Each connection is closed as soon as it is accepted, and the listening socket before
    returning, so nothing is left listening. Returns ``{address, port, bound, accepted,
    error, elapsed}``; ``accepted`` lists the peers' addresses.
    """
    started = time.time()
    out = {"address": address, "port": port, "bound": False, "accepted": [], "error": None, "elapsed": 0.0}
    try:
        family, socktype, proto, _name, sockaddr = socket.getaddrinfo(address, port, 0, socket.SOCK_STREAM, 0,
                                                                      socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        out["error"] = "cannot resolve %s: %s" % (address, exc)
        return out
    try:
        sock = socket.socket(family, socktype, proto)
    except OSError as exc:
        out["error"] = "cannot open a socket for %s: %s" % (address, os_error(exc))
        return out
    try:
        try:
            # SO_REUSEADDR: a connection of the previous run in TIME_WAIT must not make the port look taken.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
            sock.listen(expect + 4)
        except OSError as exc:
            out["error"] = "cannot listen on %s:%d: %s" % (address, port, os_error(exc))
            return out
        out["bound"] = True
        deadline = started + timeout
        while len(out["accepted"]) < expect:
            remaining = deadline - time.time()
            if remaining <= 0:
                break
            sock.settimeout(remaining)
            try:
                conn, peer = sock.accept()
            except socket.timeout:
                break
            except OSError as exc:
                out["error"] = "accept on %s:%d: %s" % (address, port, os_error(exc))
                break
            conn.close()
            out["accepted"].append(peer[0])
        if len(out["accepted"]) < expect and not out["error"]:
            out["error"] = "accepted %d of %d connection(s) on %s:%d within %gs" % (
                len(out["accepted"]), expect, address, port, timeout)
    finally:
        sock.close()
        out["elapsed"] = round(time.time() - started, 3)
    return out


def connect(address, port, timeout):
    """Connect to ``address:port``, retrying every CONNECT_RETRY seconds until it works or ``timeout`` passes.

    Any failure is retried: a refused connection usually means the listener on the other
    node has not started yet. Returns ``{address, port, connected, error, attempts, elapsed}``.
    """
    started = time.time()
    deadline = started + timeout
    out = {"address": address, "port": port, "connected": False, "error": None, "attempts": 0, "elapsed": 0.0}
    last = None
    while True:
        out["attempts"] += 1
        try:
            sock = socket.create_connection((address, port), timeout=max(deadline - time.time(), CONNECT_RETRY))
        except socket.timeout:
            last = "no answer (packets dropped, e.g. by a firewall)"
        except (OSError, UnicodeError) as exc:
            last = os_error(exc)
        else:
            sock.close()
            out["connected"] = True
            break
        remaining = deadline - time.time()
        if remaining <= 0:
            break
        time.sleep(min(CONNECT_RETRY, remaining))
    out["elapsed"] = round(time.time() - started, 3)
    if not out["connected"]:
        out["error"] = "no connection to %s:%d within %gs (%d attempts); last error: %s" % (
            address, port, timeout, out["attempts"], last)
    return out


def _check_range(errors, name, value, bounds, unit=""):
    low, high = bounds
    if value is not None and not low <= value <= high:
        errors.append("%s must be between %g and %g%s, got %s" % (name, low, high, unit, value))


def _check_name(errors, name, value):
    # These land in argv: an empty value or one that looks like an option would change the command.
    if not value or value.startswith("-"):
        errors.append("%s must be a non-empty value not starting with '-', got %r" % (name, value))


def validate(params):
    """Every problem with the module's input, as messages naming the option; empty when fine."""
    errors = []
    _check_range(errors, "ping_count", params.get("ping_count"), PING_COUNT_RANGE)
    _check_range(errors, "ping_interval", params.get("ping_interval"), PING_INTERVAL_RANGE, " seconds")
    _check_range(errors, "ping_timeout", params.get("ping_timeout"), PING_TIMEOUT_RANGE, " seconds")
    for index, entry in enumerate(params.get("pings") or []):
        _check_name(errors, "pings[%d].netdev" % index, entry["netdev"])
        _check_name(errors, "pings[%d].target" % index, entry["target"])
        _check_range(errors, "pings[%d].size" % index, entry["size"], PING_SIZE_RANGE,
                     " bytes of ICMP payload (MTU - 28 fills one frame)")
    for part in ("listen", "connect"):
        spec = params.get(part)
        if spec:
            _check_name(errors, "%s.address" % part, spec["address"])
            _check_range(errors, "%s.port" % part, spec["port"], PORT_RANGE)
            _check_range(errors, "%s.timeout" % part, spec["timeout"], TIMEOUT_RANGE, " seconds")
    if params.get("listen"):
        _check_range(errors, "listen.expect", params["listen"]["expect"], EXPECT_RANGE)
    for index, entry in enumerate(params.get("ssh") or []):
        _check_name(errors, "ssh[%d].target" % index, entry["target"])
        _check_range(errors, "ssh[%d].timeout" % index, entry["timeout"], TIMEOUT_RANGE, " seconds")
    return errors


def probe(pings=None, ping_count=2, ping_interval=PING_INTERVAL, ping_timeout=2, listen_spec=None, connect_spec=None,
          ssh_spec=None):
    """Run every probe asked for at once; ``{pings, listen, connect, ssh, elapsed}`` with None for those not asked."""
    started = time.time()
    jobs = {}
    with ThreadPoolExecutor(max_workers=4 + len(ssh_spec or [])) as pool:
        if pings is not None:
            jobs["pings"] = pool.submit(run_pings, pings, ping_count, ping_interval, ping_timeout)
        if listen_spec:
            jobs["listen"] = pool.submit(listen, listen_spec["address"], listen_spec["port"], listen_spec["timeout"],
                                         listen_spec["expect"])
        if connect_spec:
            jobs["connect"] = pool.submit(connect, connect_spec["address"], connect_spec["port"],
                                          connect_spec["timeout"])
        ssh_jobs = [(entry, pool.submit(run_ssh, target=entry["target"], options=entry.get("options") or [],
                                        command=entry["command"], timeout=entry["timeout"]))
                    for entry in ssh_spec or []]
    result = dict((key, jobs[key].result() if key in jobs else None) for key in ("pings", "listen", "connect"))
    result["ssh"] = [dict(job.result(), worker=entry.get("worker")) for entry, job in ssh_jobs] if ssh_spec else None
    result["elapsed"] = round(time.time() - started, 3)
    return result
