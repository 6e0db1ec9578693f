# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers of hf_mirror: its options checked, and the destination they name. Pure
functions, no I/O. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import posixpath
import re

from ansible_collections.dgx_spark.glm53.plugins.module_utils._sha import is_full_sha
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_cache import name_problem

STREAMS_RANGE = (1, 16)
DEFAULT_SSH_OPTIONS = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_TARGET = re.compile(r"^(?:[^@\s:/]+@)?(?:\[[0-9A-Fa-f:.%\w]+\]|[A-Za-z0-9][A-Za-z0-9.-]*)$")


def remote_dir(dest):
    """rsync's path for the worker's cache root: ``~`` and ``~/x`` become paths relative to the
    remote user's home (rsync starts there), absolute paths stay. None for anything else."""
    if not isinstance(dest, str) or "\n" in dest or "\0" in dest:
        return None
    if dest in ("~", "~/"):
        return ""
    if dest.startswith("~/"):
        rel = posixpath.normpath(dest[2:])
        return None if rel == ".." or rel.startswith("../") else ("" if rel == "." else rel)
    if dest.startswith("/"):
        return posixpath.normpath(dest)
    return None


def destination(target, dest):
    """Where the hub directory goes: ``target:<dir>/hub/``, or a local path when ``target`` is empty."""
    if not target:
        return os.path.join(os.path.normpath(os.path.expanduser(dest)), "hub") + "/"
    return "%s:%s/" % (target, posixpath.join(remote_dir(dest), "hub"))


def link_address(target):
    """The address in ``user@address`` (brackets of an IPv6 literal removed)."""
    host = target.rsplit("@", 1)[-1]
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def validate(params):
    """Every problem with the module's input, as messages naming the option; empty when fine."""
    errors = []
    models = params.get("models") or []
    if not models:
        errors.append("models must list at least one {repo_id, revision}")
    seen = set()
    for index, model in enumerate(models):
        repo_id, revision = model.get("repo_id"), model.get("revision")
        if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id) or ".." in repo_id:
            errors.append("models[%d].repo_id must be a model repo id like org/name, got %r" % (index, repo_id))
        if not is_full_sha(revision):
            errors.append("models[%d].revision (%s) must be a full 40-hex commit sha (the snapshot hf_snapshot "
                          "verified), got %r" % (index, repo_id, revision))
        if (repo_id, revision) in seen:
            errors.append("models[%d]: %s@%s is listed twice" % (index, repo_id, revision))
        seen.add((repo_id, revision))
    low, high = STREAMS_RANGE
    if not low <= params.get("streams", 0) <= high:
        errors.append("streams must be between %d and %d, got %s" % (low, high, params.get("streams")))
    if not params.get("timeout") or params["timeout"] <= 0:
        errors.append("timeout must be a positive number of seconds, got %s" % params.get("timeout"))
    if params.get("io_timeout") is not None and params["io_timeout"] < 1:
        errors.append("io_timeout must be at least 1 second, got %s" % params["io_timeout"])
    if params.get("bwlimit") is not None and params["bwlimit"] < 1:
        errors.append("bwlimit must be at least 1 KiB/s when given, got %s" % params["bwlimit"])
    target = params.get("target") or ""
    if target and (target.startswith("-") or not _TARGET.match(target)):
        errors.append("target must be user@address (or address) of the worker, or '' for a local destination, "
                      "got %r" % target)
    dest = params.get("dest")
    if remote_dir(dest) is None:
        errors.append("dest must be an absolute path or start with ~/ (the worker user's home), got %r" % (dest,))
    for index, option in enumerate(params.get("ssh_options") or []):
        if not isinstance(option, str) or not option or "\n" in option:
            errors.append("ssh_options[%d] must be a non-empty string, got %r" % (index, option))
    for index, entry in enumerate(params.get("force") or []):
        problem = name_problem(entry.get("name"))
        if problem:
            errors.append("force[%d]: %s" % (index, problem))
    return errors
