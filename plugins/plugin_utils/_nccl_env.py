# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL's documented environment variables, and the check of ``NCCL_*`` names an operator
gives (controller side). NCCL ignores a variable it does not know, so a misspelt
``NCCL_IB_GID_INDX`` would reach the ranks and do nothing; it is refused here instead,
naming the closest documented name. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib

PREFIX = "NCCL_"

# Every variable with a section of its own on NCCL's "Environment Variables" page for NCCL 2.32
# (https://docs.nvidia.com/deeplearning/nccl/archives/nccl_2323/user-guide/docs/env.html; the page's
# source is docs/userguide/source/env.rst in github.com/NVIDIA/nccl, read at 0186f08, whose newest
# "since" is 2.32), in the page's order. Deprecated and removed ones stay: the page still documents
# them, and the NCCL inside an engine image may be older than 2.32.
DOCUMENTED = (
    # System configuration
    "NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_SOCKET_MAGIC", "NCCL_SOCKET_RETRY_CNT",
    "NCCL_SOCKET_RETRY_SLEEP_MSEC", "NCCL_SOCKET_POLL_TIMEOUT_MSEC", "NCCL_PSK", "NCCL_SOCKET_NTHREADS",
    "NCCL_NSOCKS_PERTHREAD", "NCCL_CROSS_NIC", "NCCL_IB_HCA", "NCCL_IB_RAIL_POLICY", "NCCL_IB_TIMEOUT",
    "NCCL_IB_RETRY_CNT", "NCCL_IB_GID_INDEX", "NCCL_IB_ADDR_FAMILY", "NCCL_IB_ADDR_RANGE",
    "NCCL_IB_ROCE_VERSION_NUM", "NCCL_IB_PKEY", "NCCL_IB_PKEY_VALUE", "NCCL_IB_SL", "NCCL_IB_TC",
    "NCCL_IB_FIFO_TC", "NCCL_IB_RETURN_ASYNC_EVENTS", "NCCL_IB_EVENT_BASED_LB", "NCCL_OOB_NET_ENABLE",
    "NCCL_OOB_NET_IFNAME", "NCCL_UID_STAGGER_THRESHOLD", "NCCL_UID_STAGGER_RATE", "NCCL_NET", "NCCL_NET_PLUGIN",
    "NCCL_GIN_PLUGIN", "NCCL_RMA_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN",
    "NCCL_IGNORE_CPU_AFFINITY", "NCCL_CONF_FILE", "NCCL_DEBUG", "NCCL_DEBUG_LEVELS", "NCCL_DEBUG_FILE",
    "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_TIMESTAMP_FORMAT", "NCCL_DEBUG_TIMESTAMP_LEVELS", "NCCL_COLLNET_ENABLE",
    "NCCL_COLLNET_NODE_THRESHOLD", "NCCL_CTA_POLICY", "NCCL_NETDEVS_POLICY", "NCCL_MULTI_RANK_GPU_ENABLE",
    "NCCL_TOPO_FILE", "NCCL_TOPO_DUMP_FILE", "NCCL_SET_THREAD_NAME",
    # Debugging
    "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_P2P_DIRECT_DISABLE", "NCCL_SHM_DISABLE", "NCCL_BUFFSIZE",
    "NCCL_NTHREADS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_CHECKS_DISABLE", "NCCL_CHECK_POINTERS",
    "NCCL_CHECK_MODE", "NCCL_LAUNCH_MODE", "NCCL_IB_DISABLE", "NCCL_IB_AR_THRESHOLD", "NCCL_IB_OOO_RQ",
    "NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_SPLIT_DATA_ON_QPS", "NCCL_IB_CUDA_SUPPORT",
    "NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_ADAPTIVE_ROUTING", "NCCL_IB_ECE_ENABLE", "NCCL_MEM_SYNC_DOMAIN",
    "NCCL_CUMEM_ENABLE", "NCCL_CUMEM_HOST_ENABLE", "NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_C2C", "NCCL_NET_GDR_READ",
    "NCCL_GDRCOPY_ENABLE", "NCCL_GDRCOPY_FIFO_ENABLE", "NCCL_GDRCOPY_SYNC_ENABLE", "NCCL_GDRCOPY_FLUSH_ENABLE",
    "NCCL_NET_SHARED_BUFFERS", "NCCL_NET_SHARED_COMMS", "NCCL_IGNORE_NET_MISMATCH",
    "NCCL_IGNORE_COLLNET_MISMATCH", "NCCL_SINGLE_RING_THRESHOLD", "NCCL_LL_THRESHOLD", "NCCL_TREE_THRESHOLD",
    "NCCL_ALGO", "NCCL_PROTO", "NCCL_NVB_DISABLE", "NCCL_PXN_DISABLE", "NCCL_P2P_PXN_LEVEL", "NCCL_PXN_C2C",
    "NCCL_RUNTIME_CONNECT", "NCCL_GRAPH_REGISTER", "NCCL_LOCAL_REGISTER", "NCCL_LEGACY_CUDA_REGISTER",
    "NCCL_WIN_ENABLE", "NCCL_SET_STACK_SIZE", "NCCL_GRAPH_MIXING_SUPPORT", "NCCL_GRAPH_STREAM_ORDERING",
    "NCCL_RMA_EAGER_INIT", "NCCL_DMABUF_ENABLE", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_P2P_LL_THRESHOLD",
    "NCCL_ALLOC_P2P_NET_LL_BUFFERS", "NCCL_COMM_BLOCKING", "NCCL_CGA_CLUSTER_SIZE", "NCCL_MAX_CTAS",
    "NCCL_MIN_CTAS", "NCCL_NVLS_ENABLE", "NCCL_IB_MERGE_NICS", "NCCL_NET_MERGE_POLICY", "NCCL_MNNVL_ENABLE",
    "NCCL_MNNVL_UUID", "NCCL_MNNVL_CLIQUE_ID", "NCCL_RAS_ENABLE", "NCCL_RAS_ADDR", "NCCL_RAS_TIMEOUT_FACTOR",
    "NCCL_LAUNCH_ORDER_IMPLICIT", "NCCL_LAUNCH_RACE_FATAL", "NCCL_IPC_USE_ABSTRACT_SOCKET",
    "NCCL_SYM_GIN_KERNELS_ENABLE",
)

# Names the same page gives inside other sections: old names it says NCCL still reads
# (NCCL_MAX_NRINGS and NCCL_MIN_NRINGS as aliases; NCCL_IB_GDR_LEVEL before 2.4.0's rename),
# and variables it refers to (NCCL_COMM_ID under NCCL_SOCKET_MAGIC, NCCL_NET_MERGE_LEVEL under
# NCCL_NET_MERGE_POLICY).
ALSO_NAMED = ("NCCL_MAX_NRINGS", "NCCL_MIN_NRINGS", "NCCL_IB_GDR_LEVEL", "NCCL_COMM_ID", "NCCL_NET_MERGE_LEVEL")

KNOWN = frozenset(DOCUMENTED + ALSO_NAMED)

# Names are compared without the shared NCCL_ prefix, which would make any two look alike
# (NCCL_FOO and NCCL_NET score 0.62 whole). 0.75 keeps NCCL_IB_GID_INDX -> NCCL_IB_GID_INDEX
# (0.96) and NCCL_SOCKET_IFACE -> NCCL_SOCKET_IFNAME (0.88), and suggests nothing for a name
# that shares a word or two only.
CUTOFF = 0.75


def closest(name, accepted=()):
    """The documented (or ``accepted``) names closest to ``name``, best first: at most three."""
    candidates = dict((known[len(PREFIX):], known) for known in sorted(KNOWN | frozenset(accepted))
                      if known.startswith(PREFIX))
    body = name[len(PREFIX):] if name.startswith(PREFIX) else name
    return [candidates[match] for match in difflib.get_close_matches(body, list(candidates), n=3, cutoff=CUTOFF)]


def problems(names, where, accepted=()):
    """One string per name under ``NCCL_`` that NCCL does not document, in sorted order.

    ``names``: the names to check (a mapping's keys work); others are left to the caller.
    ``where``: the variable they came from, named first in each problem. ``accepted``: further
    NCCL_* names the caller itself reads (serve.sh's NCCL_PASSTHROUGH), accepted and offered
    as corrections like the documented ones.
    """
    out = []
    accepted = frozenset(accepted)
    for name in sorted(name for name in names if isinstance(name, str) and name.startswith(PREFIX)):
        if name in KNOWN or name in accepted:
            continue
        near = closest(name, accepted)
        if near:
            out.append("%s: %s is not an NCCL variable NCCL documents (did you mean %s?); NCCL ignores a name it "
                       "does not know, so the setting would do nothing" % (where, name, " or ".join(near)))
        else:
            out.append("%s: %s is not an NCCL variable NCCL documents (NCCL 2.32's environment variables); if your "
                       "NCCL build reads it, add it to ALSO_NAMED in plugins/plugin_utils/_nccl_env.py with where "
                       "it is read" % (where, name))
    return out
