# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers behind engine_stop: what to remove and how a docker failure is told. Not a public API.

Which container is whose engine is ``_engines``' judgment; reading ``docker ps`` is
``_docker_probe``'s. Here: the commands, the selection, and the failure message, which names
the node, the command, what docker said and the fix.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dgx_spark.glm53.plugins.module_utils._docker_probe import (
    classify_docker_error,
    parse_docker_ps,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._engines import engines_of

# -a: a stopped or exited engine still holds its name (a start would clash with it) and, on
# a restart policy, could come back; --no-trunc: full ids, so rm names exactly what was seen.
PS_ARGS = ["ps", "-a", "--no-trunc", "--format", "{{json .}}"]
# Docker's wording when a container went away between ps and rm (someone else removed it).
_GONE_RE = re.compile(r"no such container:\s*(\S+)", re.IGNORECASE)

FIXES = {
    "permission": ("add %(user)s to the docker group on %(node)s (sudo usermod -aG docker %(user)s) and log in "
                   "again: a session opened before joining the group still lacks it"),
    "unreachable": ("start Docker on %(node)s (sudo systemctl start docker) and check that `docker info` "
                    "answers"),
    "timeout": ("the Docker daemon on %(node)s is wedged: check `systemctl status docker` and `journalctl -u "
                "docker`, restart it (sudo systemctl restart docker), then rerun"),
    "other": "fix what docker says on %(node)s, then rerun",
}


def to_remove(ps_stdout, paths):
    """``[{name, id, path}]``: the containers in ``docker ps`` output that are an engine of one
    of ``paths``, in docker's order; nothing else."""
    containers = list(parse_docker_ps(ps_stdout).values())
    return [{"name": c["name"], "id": c["id"], "path": c["path"]} for c in engines_of(containers, paths)]


def rm_args(victims):
    """``docker rm -f`` of exactly these containers, by full id (a name could be reused meanwhile)."""
    return ["rm", "-f"] + [victim["id"] for victim in victims]


def gone_before_rm(stderr, victims):
    """Ids of ``victims`` that a failed docker rm says no longer exist, or None when ``stderr``
    says anything else, or nothing (a real failure)."""
    gone = []
    for line in (stderr or "").splitlines():
        if not line.strip():
            continue
        match = _GONE_RE.search(line)
        if not match:
            return None
        gone.append(match.group(1))
    if not gone:
        return None
    return [v["id"] for v in victims if v["id"] in gone or v["name"] in gone]


def failure(node, run, user, removing=None):
    """The message for a docker command that failed: the node, the command, what it said, the fix.

    ``run`` is a ``_deadline.run_with_timeout`` result; ``removing`` the containers an rm was
    removing (None for the listing, when nothing was touched)."""
    if run.get("timed_out"):
        kind, said = "timeout", "no answer within %g s (its process group was killed)" % run.get("timeout")
    elif run.get("rc") is None:
        # Not started at all (the binary itself): no daemon was asked, so no socket fix applies.
        kind, said = "other", run.get("error") or "could not run"
    else:
        said = (run.get("stderr") or "").strip() or (run.get("stdout") or "").strip() or (
            "exit code %s and no output" % run.get("rc"))
        kind = classify_docker_error(said)
    said = " ".join(said.split())
    fix = FIXES[kind] % {"node": node, "user": user}
    if removing is None:
        touched = "nothing was removed"
    else:
        touched = "it was removing %s; run `docker ps -a` there to see what is left" % ", ".join(
            "%s (%s)" % (v["name"], v["path"]) for v in removing)
    return "engine_stop on %s: `%s` failed: %s; fix: %s; %s" % (node, run.get("command"), said, fix, touched)
