# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers for spark_node_facts: disk needs and which container a GPU
process runs in. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

_CONTAINER_ID = re.compile(r"[0-9a-f]{64}")


# --- disk ----------------------------------------------------------------------------------

def mount_point(path):
    dev = os.stat(path).st_dev
    while path != os.path.dirname(path):
        parent = os.path.dirname(path)
        if os.stat(parent).st_dev != dev:
            break
        path = parent
    return path


def _allocated(path, seen):
    """Allocated bytes of the file at ``path`` (links followed), once per inode."""
    try:
        info = os.stat(path)
    except OSError:
        return 0
    key = (info.st_dev, info.st_ino)
    if key in seen or not os.path.isfile(path):
        return 0
    seen.add(key)
    return info.st_blocks * 512


def tree_bytes(path, seen):
    """Allocated bytes of regular files under ``path``; symlinks are not followed."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                total += _allocated(full, seen)
    return total


def model_dirs(cache_root, repo_id):
    """Where the hub keeps one repo under an HF cache root (``<root>/hub`` or the hub dir itself)."""
    name = "models--" + repo_id.replace("/", "--")
    return [os.path.join(cache_root, "hub", name), os.path.join(cache_root, name)]


def model_bytes(cache_root, models):
    """Bytes of the pinned revisions of ``models`` ([{repo_id, revision}]) in an HF cache.

    Only files a snapshot of one of those revisions points at count (the blobs behind
    ``snapshots/<revision>/``), each inode once, so other models in the same cache
    and older revisions never count as this path's data.
    """
    seen = set()
    total = 0
    for model in models or []:
        for repo_dir in model_dirs(cache_root, model["repo_id"]):
            snapshot = os.path.join(repo_dir, "snapshots", model["revision"])
            for root, _dirs, files in os.walk(snapshot):
                for name in files:
                    total += _allocated(os.path.join(root, name), seen)
    return total


def disk_entry(name, path, need, models=None):
    """Free space where ``name`` lives, and how much of its data is already there."""
    out = {"name": name, "path": path, "need": int(need)}
    full = os.path.realpath(os.path.expanduser(path))
    checked = full
    while not os.path.isdir(checked) and checked != os.path.dirname(checked):
        checked = os.path.dirname(checked)
    try:
        stats = os.statvfs(checked)
        if not os.path.isdir(full):
            present = 0
        elif models is not None:
            present = model_bytes(full, models)
        else:
            present = tree_bytes(full, set())
        out.update(checked=checked, dev=os.stat(checked).st_dev, mount=mount_point(checked),
                   free=stats.f_bavail * stats.f_frsize, present=present)
    except OSError as exc:
        out.update(checked=checked, error="%s: %s" % (checked, exc.strerror))
    return out


def disk_entries(needs, dirs, models):
    """One entry per kind of data; the ``checkpoint`` kind counts only ``models``."""
    return [disk_entry(name, dirs.get(name, name), need, models if name == "checkpoint" else None)
            for name, need in sorted((needs or {}).items())]


# --- containers ----------------------------------------------------------------------------

def container_ids_in_cgroup(text):
    """Container ids named in a /proc/<pid>/cgroup text, innermost last."""
    return _CONTAINER_ID.findall(text or "")


def containers_of_pids(pids, containers, read_cgroup):
    """{pid: container} for the GPU processes that run in one of ``containers``."""
    out = {}
    for pid in pids:
        text = read_cgroup(pid)
        for cid in reversed(container_ids_in_cgroup(text)):
            if cid in containers:
                out[str(pid)] = containers[cid]
                break
    return out


def read_cgroup(pid):
    try:
        with open("/proc/%s/cgroup" % int(pid)) as handle:
            return handle.read()
    except (OSError, ValueError):
        return ""
