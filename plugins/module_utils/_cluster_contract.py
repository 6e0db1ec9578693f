# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers for the cluster contract on a node: its file names, its JSON and
shell-sourceable forms, and what makes one unusable. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

SCHEMA = 1
JSON_NAME = "cluster.json"
ENV_NAME = "cluster.env"
_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]*$")


def shell_quote(value):
    """Quote for POSIX sh, so `. cluster.env` gives back the exact string."""
    value = "" if value is None else str(value)
    if value and _SAFE.match(value):
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def render_json(contract):
    return json.dumps(contract, indent=2, sort_keys=True) + "\n"


def render_env(contract, node):
    """This node's view of the contract as ``NAME=value`` lines (``. cluster.env`` in a shell)."""
    mine = contract["nodes"][node]
    workers = contract.get("workers") or []
    values = [
        ("GLM53_PATH", contract.get("path")),
        ("GLM53_NODE", node),
        ("GLM53_RANK", mine.get("rank")),
        ("GLM53_ROLE", mine.get("role")),
        ("GLM53_HEAD", contract.get("head")),
        ("GLM53_WORKERS", " ".join(workers)),
        ("GLM53_NODE_COUNT", 1 + len(workers)),
        ("GLM53_LINK_NETDEV", mine.get("netdev")),
        ("GLM53_LINK_ADDRESS", mine.get("link_address")),
        ("GLM53_WORKER_ADDRESSES", " ".join(contract["nodes"][w].get("link_address") or "" for w in workers)),
        ("GLM53_MASTER_ADDR", contract.get("master_address")),
        ("GLM53_MASTER_PORT", contract.get("master_port")),
        ("GLM53_SSH_USER", contract.get("ssh_user")),
    ]
    values += sorted((mine.get("env") or {}).items())
    lines = ["# dgx_spark.glm53 cluster contract for %s; written by the cx7_link preflight. Do not edit." % node]
    lines += ["%s=%s" % (name, shell_quote(value)) for name, value in values]
    return "\n".join(lines) + "\n"


def validate(contract):
    """Problems that make a contract unusable: [message]."""
    problems = []
    if not isinstance(contract, dict):
        return ["the contract is not a JSON object"]
    if contract.get("schema") != SCHEMA:
        problems.append("schema %r, expected %d" % (contract.get("schema"), SCHEMA))
    for key in ("path", "head", "workers", "master_address", "master_port", "nodes"):
        if key not in contract:
            problems.append("key %s missing" % key)
    return problems
