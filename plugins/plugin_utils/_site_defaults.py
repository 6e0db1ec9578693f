# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Collection-wide defaults behind the site variables, in one place so every role that
reads them agrees (the preflight's disk check and hf_weights' space check, the
preflight's idea of this path's weights and what hf_weights fetches).

A site overrides them with ``glm53_models`` and ``glm53_disk_need_bytes``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

# The spec's pinned weights per serving path (seed-README, "Kit and weights"). The
# drafter is licensed CC BY-NC-ND 4.0: hf_weights fetches it only when the operator
# accepts that (hf_weights_accept_noncommercial_drafter).
MODELS = {
    "tensorfold": [
        {"repo_id": "brandonmusic/GLM-5.3-Flash-tr3-4bpw", "revision": "5ab363a8dcf6405955fd5f99671e01a1c9fb124b"},
        {"repo_id": "incoai/GLM-5.3-Flash-DFlash2", "revision": "7d74cdd881ed7e32c31175984a67823127b66cfe",
         "drafter": True, "license": "CC BY-NC-ND 4.0"},
    ],
    "vllm": [
        {"repo_id": "LibertAIDAI/GLM-5.3-Flash-NVFP4", "revision": "9e0d74e3cef17f634e84fb8e2223707e02616290"},
    ],
}

# Bytes each kind of data needs on every node (kit AGENTS: ~165 GB checkpoint, ~84 GB
# prepared weights, up to 64 GiB NVMe session tier; the NVFP4 checkpoint ~181 GiB).
DISK_NEED_BYTES = {
    "tensorfold": {"checkpoint": 165000000000, "prepared": 84000000000, "session": 68719476736},
    "vllm": {"checkpoint": 194347270144},
}

# Where each kind of data lives on a node. The prepared and session folders are where the
# kit's serve.sh puts them by default (``${HEAD_HF%/*}/glm53-tf/{prepared,sessions}``), so
# the disk checks and the page-cache eviction look where the engine writes.
DIRS = {"hf_cache": "~/.cache/huggingface", "prepared": "~/.cache/glm53-tf/prepared",
        "session": "~/.cache/glm53-tf/sessions"}

_DEFAULTS = {"models": MODELS, "disk_need_bytes": DISK_NEED_BYTES, "dirs": DIRS}


def site_default(name):
    """A deep copy of the named default (callers may not mutate the shared one)."""
    if name not in _DEFAULTS:
        raise KeyError("no site default named %r (known: %s)" % (name, ", ".join(sorted(_DEFAULTS))))
    return copy.deepcopy(_DEFAULTS[name])
