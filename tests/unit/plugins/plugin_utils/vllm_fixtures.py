"""A cluster contract and the vllm_nvfp4 role's plan options, as the tests of the vLLM path's
decisions build them. Builders return fresh dicts each call, so tests mutate freely."""

import copy

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _vllm_profile as pr

NAMES = ("spark-a", "spark-b", "spark-c", "spark-d")
HCAS = ["rocep1s0f1", "roceP2p1s0f1"]
NETDEV = "enp1s0f1np1"
MODEL = ("/root/.cache/huggingface/hub/models--nvidia--GLM-5.3-Flash-NVFP4/snapshots/"
         "0123456789abcdef0123456789abcdef01234567")
IMAGE_ID = "sha256:" + "a" * 64


def contract(nodes=2, gids=None, hcas=None, master_port=25053):
    """A cluster contract as the cx7_link preflight writes it, for the first ``nodes`` names.
    ``gids``: {node: {hca: index or None}} for the nodes that differ from index 3 everywhere."""
    names = list(NAMES[:nodes])
    entries = {}
    for rank, name in enumerate(names):
        mine = list(HCAS if hcas is None else hcas)
        entries[name] = {"rank": rank, "role": "head" if rank == 0 else "worker",
                         "link_address": "10.10.0.%d" % (rank + 1),
                         "netdev": NETDEV, "hcas": mine,
                         "gid_index": (gids or {}).get(name, dict((hca, 3) for hca in mine)),
                         "env": {"NCCL_SOCKET_IFNAME": NETDEV, "GLOO_SOCKET_IFNAME": NETDEV,
                                 "NCCL_IB_HCA": ",".join(mine), "NCCL_IB_GID_INDEX": "3"}}
    return {"schema": 1, "path": "vllm", "head": names[0], "workers": names[1:], "master_address": "10.10.0.1",
            "master_port": master_port, "ssh_user": "spark", "nodes": entries}


def options(**changes):
    """cluster_plan's options as the role passes them: site values, facts and the profile's normalized values."""
    out = {"image": "glm53-sm121:local", "image_id": IMAGE_ID, "served_name": "glm-5.3-flash-nvfp4-sm121",
           "api_host": "127.0.0.1", "api_port": 8000, "model": MODEL, "hf_cache_host": "/home/spark/.cache/huggingface",
           "cache_host": "/home/spark/.cache/glm53-vllm", "shm_size": "64g", "stop_timeout": 60, "nccl_debug": "WARN",
           "single_hca": False, "extra_env": {}, "profile": "qualified"}
    out.update(copy.deepcopy(pr.QUALIFIED))
    out.update(changes)
    return out
