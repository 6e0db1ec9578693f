# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers: read what ``docker info``, ``docker ps``, ``docker inspect``, ``systemctl show``
and the user database say, as plain data (docker_runtime_info, spark_node_facts, engine_stop).
Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import grp
import json
import os
import pwd
import re
import time

from ansible_collections.dgx_spark.glm53.plugins.module_utils._engines import path_of

# `docker info --format '{{json .}}'`: one JSON object, client and server fields.
DOCKER_INFO_FORMAT = "{{json .}}"


def classify_docker_error(text):
    """What a failed docker CLI call means: ``permission`` (the user cannot open the
    socket: not in the docker group, or a session from before joining it), ``unreachable``
    (no daemon answers the socket) or ``other``."""
    low = (text or "").lower()
    if "permission denied" in low:
        return "permission"
    if "cannot connect to the docker daemon" in low or "is the docker daemon running" in low:
        return "unreachable"
    return "other"


def _json_object(text):
    """The JSON object in ``text`` (the whole text, else its last line that parses), or None."""
    for candidate in [text] + [line for line in reversed(text.splitlines()) if line.startswith("{")]:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_docker_info(rc, stdout, stderr):
    """``{answered, server_version, runtimes, default_runtime, error, error_kind}`` from a
    ``docker info --format '{{json .}}'`` run. The daemon answered when the command
    succeeded and reported no server error; runtimes are the names dockerd loaded."""
    out = {"answered": False, "server_version": None, "runtimes": [], "default_runtime": None,
           "error": None, "error_kind": None}
    text = (stdout or "").strip()
    info = _json_object(text)
    errors = []
    if isinstance(info, dict):
        errors = [str(e) for e in (info.get("ServerErrors") or []) if e]
    if rc == 0 and isinstance(info, dict) and not errors and info.get("ServerVersion"):
        runtimes = info.get("Runtimes") or {}
        out.update(answered=True, server_version=info.get("ServerVersion"),
                   runtimes=sorted(runtimes) if isinstance(runtimes, dict) else [],
                   default_runtime=info.get("DefaultRuntime"))
        return out
    message = "; ".join(errors) or (stderr or "").strip() or text or "docker info exited %s" % rc
    out.update(error=message, error_kind=classify_docker_error(message))
    return out


def parse_docker_ps(text):
    """``docker ps [-a] --no-trunc --format '{{json .}}'`` -> {id: {id, name, labels}}.

    Docker joins the labels as ``k=v,k=v``, so a value holding a comma reads as more pairs;
    the labels we look for (``_engines.LABEL``) carry plain words. The first of several names
    is the container's own (the rest are legacy links)."""
    out = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        labels = {}
        for pair in (entry.get("Labels") or "").split(","):
            key, sep, value = pair.partition("=")
            if sep:
                labels[key] = value
        cid = entry.get("ID") or ""
        out[cid] = {"id": cid, "name": (entry.get("Names") or "").split(",")[0], "labels": labels}
    return out


_STARTED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z$")


def started_seconds(text):
    """Docker's ``State.StartedAt`` (RFC 3339 in UTC, ``2026-12-04T17:53:23.620838138Z``) as
    Unix seconds, or None (never started: ``0001-01-01T00:00:00Z`` reads as long ago)."""
    match = _STARTED.match(text or "")
    if not match:
        return None
    return calendar.timegm(time.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S")) + float("0" + (match.group(2) or ""))


def daemon_started(service, now=None, monotonic=None):
    """When docker.service last became active, in Unix seconds, from ``systemctl show``'s
    ``ActiveEnterTimestampMonotonic`` (microseconds on the kernel's monotonic clock, which every
    systemd has); None when the service is not active or systemd did not say."""
    service = service or {}
    value = service.get("ActiveEnterTimestampMonotonic") or ""
    if service.get("ActiveState") != "active" or not value.isdigit() or int(value) == 0:
        return None
    now = time.time() if now is None else now
    monotonic = time.monotonic() if monotonic is None else monotonic
    return now - (monotonic - int(value) / 1e6)


def _requests_gpu(host_config):
    return any("gpu" in (caps or []) for request in host_config.get("DeviceRequests") or []
               for caps in request.get("Capabilities") or [])


def gpu_engine_proof(inspects, since):
    """The first of ``inspects`` (``docker inspect`` objects) that is a running engine container
    of ours (``_engines.path_of``: by label, else by whole name) started with a GPU request
    (``--gpus``, a device request with the ``gpu`` capability) at or after ``since`` (the
    daemon's start, Unix seconds): ``{name, path, image, started}``; None when there is none.
    Such a container got the GPU from this daemon with its current configuration, so it proves
    what a test container would; one older than the daemon (live restore) proves nothing."""
    if since is None:
        return None
    for entry in inspects or []:
        if not isinstance(entry, dict):
            continue
        name = (entry.get("Name") or "").lstrip("/")
        config, state = entry.get("Config") or {}, entry.get("State") or {}
        path = path_of(name, config.get("Labels") or {})
        started = started_seconds(state.get("StartedAt"))
        if (path and state.get("Running") and not state.get("Restarting") and started is not None
                and started >= since and _requests_gpu(entry.get("HostConfig") or {})):
            return {"name": name, "path": path, "image": config.get("Image"), "started": state.get("StartedAt")}
    return None


def parse_systemctl_show(stdout):
    """``Key=value`` lines of ``systemctl show -p ...`` as a dict."""
    out = {}
    for line in (stdout or "").splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def user_groups(name):
    """``(exists, sorted group names)`` of user ``name`` in the user database, primary
    group included."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return False, []
    names = set()
    try:
        names.add(grp.getgrgid(entry.pw_gid).gr_name)
    except KeyError:
        pass
    for group in grp.getgrall():
        if name in group.gr_mem:
            names.add(group.gr_name)
    return True, sorted(names)


def session_groups():
    """Group names of this process, i.e. of the login session the module runs in: a user
    added to a group sees it only in sessions opened afterwards."""
    names = set()
    for gid in set(os.getgroups()) | set([os.getegid()]):
        try:
            names.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            names.add(str(gid))
    return sorted(names)


def current_user():
    """``(name, uid)`` of the effective user."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name, uid
    except KeyError:
        return str(uid), uid
