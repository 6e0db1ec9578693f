# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: the one table of our serving engines, per path, as pure functions. Not a public API.

Each serving path (``tensorfold``, ``vllm``) runs its engine in containers. What names them,
which one is rank 0 and what labels them is written here once; wait_for_slots (which
containers to watch), engine_stop (which to remove) and the cx7_link preflight (whose GPU
processes are ours while the model serves) all read it.

A container belongs to a path by its label ``dgx_spark.glm53.engine=<path>``, else by its
name. The label wins: it is set on purpose, a name can be chosen by anyone. Names are matched
whole (anchored), so ``glm53-tf-r0-backup`` is nobody's engine.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# The label key; its value is the path name.
LABEL = "dgx_spark.glm53.engine"

ENGINES = {
    # The TensorFold kit (serve.sh) names its ranks ${NAME:-glm53-tf}-r<rank>: r0 on the head,
    # r1.. on the workers. It sets no label, so the name is how its containers are known.
    "tensorfold": {
        "names": (r"^glm53-tf-r[0-9]+$",),
        "head": "glm53-tf-r0",
        "worker": "glm53-tf-r%(rank)d",
    },
    # vLLM tensor parallel: one container per node, the same name on each (-r<rank> allowed
    # for a layout that numbers them).
    "vllm": {
        "names": (r"^glm53-vllm(-r[0-9]+)?$",),
        "head": "glm53-vllm",
        "worker": "glm53-vllm",
    },
}
PATHS = tuple(sorted(ENGINES))

_NAME_RES = dict((path, [re.compile(p) for p in engine["names"]]) for path, engine in ENGINES.items())


def head_container(path):
    """The rank-0 container's default name on the head for ``path``."""
    return ENGINES[path]["head"]


def worker_container(path, rank):
    """The default container name of rank ``rank`` (1, 2, ...) on its worker for ``path``."""
    return ENGINES[path]["worker"] % {"rank": rank}


def path_of(name, labels=None):
    """The path whose engine the container ``name`` with ``labels`` ({key: value}) is, or None.

    The label's value when it names a path, else the path one of whose name patterns matches
    the whole name. A label with a value that names no path is ignored (the name decides)."""
    value = (labels or {}).get(LABEL)
    if value in ENGINES:
        return value
    for path in PATHS:
        if any(pattern.search(name or "") for pattern in _NAME_RES[path]):
            return path
    return None


def engines_of(containers, paths):
    """The containers (dicts with ``name`` and ``labels``) that are an engine of one of
    ``paths``, in the given order, each with its ``path`` added; nothing else."""
    out = []
    for container in containers:
        path = path_of(container.get("name"), container.get("labels"))
        if path is not None and path in paths:
            out.append(dict(container, path=path))
    return out
