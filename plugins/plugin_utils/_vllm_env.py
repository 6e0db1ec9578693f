# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The environment of a vllm_nvfp4 rank: the recipe's (``scripts/rank-tp2.sh`` of
``LimeChain/glm-5.3-flash-2xdgx-spark-vllm``), with the node's link address, netdev, RDMA
devices and RoCE v2 GID index taken from the cluster contract instead of the recipe's config
file, and the operator's additions. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._nccl_env import problems as nccl_problems
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._vllm_profile import PREFIX, found

SINGLE_HCA_VAR = PREFIX + "single_hca"
EXTRA_ENV_VAR = PREFIX + "extra_env"
NCCL_DEBUG_VAR = PREFIX + "nccl_debug"
NCCL_DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "TRACE")
# The rank's writable caches (vLLM, Triton, FlashInfer, CUDA) live under this mount.
CACHE = "/cache"

# Resolved per node from the cluster contract, so refused in vllm_nvfp4_extra_env, with where
# each comes from.
CONTRACT_ENV = {
    "VLLM_HOST_IP": "each node's link address (glm53_link_address)",
    "NCCL_IB_HCA": "the link's RDMA devices found by the preflight (%s: true keeps the first only)" % SINGLE_HCA_VAR,
    "NCCL_IB_GID_INDEX": "the RoCE v2 GID of each node's link address, found by the preflight",
    "NCCL_SOCKET_IFNAME": "the link netdev (glm53_link_netdev)",
    "GLOO_SOCKET_IFNAME": "the link netdev (glm53_link_netdev)",
    "TP_SOCKET_IFNAME": "the link netdev (glm53_link_netdev)",
}
# The recipe's environment in its order, the same on every rank. None: filled per rank (the
# contract's values above; NCCL_DEBUG from vllm_nvfp4_nccl_debug).
RECIPE_ENV = (
    ("VLLM_HOST_IP", None),
    ("HF_HOME", CACHE + "/huggingface"),
    ("HF_HUB_OFFLINE", "1"),
    ("TRANSFORMERS_OFFLINE", "1"),
    ("VLLM_CACHE_ROOT", CACHE + "/vllm"),
    ("TRITON_CACHE_DIR", CACHE + "/triton"),
    ("FLASHINFER_WORKSPACE_BASE", CACHE + "/flashinfer"),
    ("CUDA_CACHE_PATH", CACHE + "/cuda"),
    ("VLLM_NO_USAGE_STATS", "1"),
    ("VLLM_ENGINE_READY_TIMEOUT_S", "3600"),
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
    ("TORCH_CUDA_ARCH_LIST", "12.1a"),
    ("FLASHINFER_CUDA_ARCH_LIST", "12.1a"),
    ("FLASHINFER_DISABLE_VERSION_CHECK", "1"),
    ("VLLM_USE_BREAKABLE_CUDAGRAPH", "0"),
    ("NCCL_NET", "IB"),
    ("NCCL_IB_DISABLE", "0"),
    ("NCCL_IB_HCA", None),
    ("NCCL_IB_GID_INDEX", None),
    ("NCCL_IB_ROCE_VERSION_NUM", "2"),
    ("NCCL_IB_ADDR_FAMILY", "AF_INET"),
    ("NCCL_SOCKET_IFNAME", None),
    ("GLOO_SOCKET_IFNAME", None),
    ("TP_SOCKET_IFNAME", None),
    ("NCCL_NVLS_ENABLE", "0"),
    ("NCCL_CROSS_NIC", "0"),
    ("NCCL_IB_MERGE_NICS", "0"),
    ("NCCL_CUMEM_ENABLE", "0"),
    ("NCCL_IGNORE_CPU_AFFINITY", "1"),
    ("NCCL_DEBUG", None),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
)

DEFAULTS = {"nccl_debug": "WARN", "single_hca": False, "extra_env": {}}
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def _nccl_debug(value):
    if isinstance(value, str) and value.strip().upper() in NCCL_DEBUG_LEVELS:
        return value.strip().upper(), []
    return "", ["%s: expected one of %s, found %s; fix: set it to WARN (the recipe's)" % (
        NCCL_DEBUG_VAR, ", ".join(NCCL_DEBUG_LEVELS), found(value))]


def _single_hca(value):
    try:
        return boolean(value, strict=True), []
    except TypeError:
        return False, ["%s: expected true or false, found %s; fix: set it to false (NCCL on every HCA of the link, "
                       "the default) or true (the first HCA only)" % (SINGLE_HCA_VAR, found(value))]


def extra_env_problems(extra):
    """``({NAME: str}, errors)`` for ``vllm_nvfp4_extra_env``: added to (or replacing) the
    recipe's environment, except the names the role takes from the cluster contract."""
    if extra is None:
        return {}, []
    if not isinstance(extra, dict):
        return {}, ["%s: expected a dict of NAME: value, found %s; fix: give a YAML mapping, or {} for none" % (
            EXTRA_ENV_VAR, found(extra))]
    env, errors = {}, []
    for name in sorted(extra, key=str):
        value = extra[name]
        if name in CONTRACT_ENV:
            errors.append("%s: %s comes from %s and cannot be set here; fix: drop it from %s" % (
                EXTRA_ENV_VAR, name, CONTRACT_ENV[name], EXTRA_ENV_VAR))
        elif not isinstance(name, str) or not _ENV_NAME.match(name):
            errors.append("%s: %s is not an environment variable name (capitals, digits and _, e.g. NCCL_PROTO); "
                          "fix: rename it" % (EXTRA_ENV_VAR, found(name)))
        elif name.startswith("NCCL_") and nccl_problems([name], EXTRA_ENV_VAR):
            errors += nccl_problems([name], EXTRA_ENV_VAR)
        elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
            errors.append("%s: %s must be a string or a number, found %s; fix: quote it (\"1\" for on, \"0\" for off)"
                          % (EXTRA_ENV_VAR, name, found(value)))
        elif any(char in str(value) for char in "\n\r\0"):
            errors.append("%s: %s must be one line, found %s; fix: drop the newline" % (
                EXTRA_ENV_VAR, name, found(value)))
        else:
            env[name] = str(value)
    return env, errors


def gid_index(node, entry, single_hca=False):
    """``(hcas, index, errors)``: the HCAs NCCL runs on and the one NCCL_IB_GID_INDEX for all of
    them. NCCL applies that one index to every HCA in NCCL_IB_HCA, so it must be the index of
    the node's link address on each; with ``single_hca`` only the first HCA is used."""
    hcas = list(entry.get("hcas") or [])
    address = entry.get("link_address")
    if not hcas:
        return [], "", ["%s: the cluster contract lists no RDMA device (hcas) on the link, so NCCL_NET=IB has "
                        "nothing to run on; fix: rerun the preflight (playbooks/preflight.yml -e path=vllm) with the "
                        "CX7 link up" % node]
    if single_hca:
        hcas = hcas[:1]
    table = entry.get("gid_index") or {}
    errors = []
    for hca in hcas:
        if table.get(hca) is None:
            alternative = "" if hca == hcas[0] else ", or set %s: true to run NCCL on %s only" % (
                SINGLE_HCA_VAR, hcas[0])
            errors.append("%s: no RoCE v2 GID carries %s on %s (NCCL_IB_GID_INDEX needs one on every HCA in "
                          "NCCL_IB_HCA); rerun the preflight after the link has its address%s" % (
                              node, address, hca, alternative))
    if errors:
        return hcas, "", errors
    indexes = sorted(set(table[hca] for hca in hcas))
    if len(indexes) > 1:
        return hcas, "", ["%s: NCCL_IB_GID_INDEX is one value for every HCA in NCCL_IB_HCA, but the RoCE v2 GID "
                          "indexes of %s differ: %s; fix: give both functions the same address layout so their GID "
                          "tables agree, or set %s: true to run NCCL on %s only" % (
                              node, address, " ".join("%s=%s" % (hca, table[hca]) for hca in hcas),
                              SINGLE_HCA_VAR, hcas[0])]
    return hcas, str(indexes[0]), []


def rank_env(contract, node, options):
    """``{env, errors, hcas, gid_index}``: the recipe's environment for ``node``'s rank.

    ``options``: ``nccl_debug`` (WARN), ``single_hca`` (false), ``extra_env`` ({}). ``env``
    is empty when there are errors; errors about the node start with its name.
    """
    options = dict(DEFAULTS, **(options or {}))
    debug, errors = _nccl_debug(options["nccl_debug"])
    single, wrong = _single_hca(options["single_hca"])
    extra, wrong_env = extra_env_problems(options["extra_env"])
    errors += wrong + wrong_env
    entry = ((contract or {}).get("nodes") or {}).get(node)
    if not isinstance(entry, dict):
        return {"env": {}, "errors": errors + ["%s: not in the cluster contract's nodes; fix: rerun the preflight "
                                               "(playbooks/preflight.yml -e path=vllm)" % node],
                "hcas": [], "gid_index": ""}
    hcas, index, wrong = gid_index(node, entry, single_hca=single)
    errors += wrong
    if errors:
        return {"env": {}, "errors": errors, "hcas": hcas, "gid_index": index}
    resolved = {
        "VLLM_HOST_IP": str(entry.get("link_address")),
        "NCCL_IB_HCA": ",".join(hcas),
        "NCCL_IB_GID_INDEX": index,
        "NCCL_SOCKET_IFNAME": str(entry.get("netdev")),
        "GLOO_SOCKET_IFNAME": str(entry.get("netdev")),
        "TP_SOCKET_IFNAME": str(entry.get("netdev")),
        "NCCL_DEBUG": debug,
    }
    env = dict((name, resolved[name] if value is None else value) for name, value in RECIPE_ENV)
    env.update(extra)
    return {"env": env, "errors": [], "hcas": hcas, "gid_index": index}
