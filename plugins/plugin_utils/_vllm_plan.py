# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_nvfp4 role's plan: one ``vllm serve`` container per node, tensor parallel across
all of them, as the recipe (``LimeChain/glm-5.3-flash-2xdgx-spark-vllm``,
``scripts/rank-tp2.sh``) runs its ranks, with the cluster contract's link, RDMA devices and
GID in place of the recipe's config file. Not a public API.

Each rank's ``community.docker.docker_container`` parameters carry a label with the plan's
hash over every rank, so a change on any rank (a flag, the environment, the image, the
checkpoint) changes every rank's label and the role recreates them together: a rank left on
the old plan would wait in the rendezvous for peers that never come.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

from ansible_collections.dgx_spark.glm53.plugins.module_utils._cluster_contract import validate as contract_problems
from ansible_collections.dgx_spark.glm53.plugins.module_utils._engines import LABEL, head_container, worker_container
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _api_endpoint
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._hf_weights import CONTAINER_HF
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._site_spec import site_default
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._vllm_env import CACHE, DEFAULTS as ENV_DEFAULTS, rank_env
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._vllm_profile import (
    PREFIX,
    found,
    profile_problems,
    whole,
)

PATH = "vllm"
PLAN_LABEL = "dgx_spark.glm53.vllm.plan"
RANK_LABEL = "dgx_spark.glm53.vllm.rank"
# GLM-5.3 Flash's attention heads split evenly over 1, 2 and 4 ranks only; the recipe's
# FlashInfer specialisation covers 32 and 64 local heads (TP2, TP1), TP4 is the switch layout.
NODE_COUNTS = (1, 2, 4)
# The recipe's fixed choices on the command line (rank-tp2.sh).
ATTENTION_BACKEND = "FLASHINFER_MLA_SPARSE_SM120"
KV_CACHE_DTYPE = "fp8_ds_mla"
BLOCK_SIZE = "256"
MOE_BACKEND = "marlin"
TOOL_CALL_PARSER = "glm47"
CHAT_TEMPLATE_KWARGS = {"enable_thinking": True, "reasoning_effort": "high"}

# The fix an error about an option of cluster_plan gives: the variable or step it comes from.
OPTION_FIXES = {
    "image": "set %simage" % PREFIX,
    "image_id": "build the image on the head first (this is its docker image inspect .Id)",
    "served_name": "set %sserved_name" % PREFIX,
    "model": "run the hf_weights role first (its facts give model_path)",
    "hf_cache_host": "run the hf_weights role first (its facts give each node's hf_cache_dir)",
    "cache_host": "set %scache_dir to an absolute path (expand ~ on the node)" % PREFIX,
    "shm_size": "set %sshm_size" % PREFIX,
    "stop_timeout": "set %sstop_timeout (the recipe gives 60)" % PREFIX,
}
DEFAULTS = dict(ENV_DEFAULTS, shm_size="64g", stop_timeout=60)
_SHM = re.compile(r"^[1-9][0-9]*[bkmgtpBKMGTP]?$")
_IMAGE_ID = re.compile(r"^sha256:[0-9a-f]{64}$")


def _json(value):
    """JSON as vLLM's config flags take it and as the recipe writes it: compact, keys sorted."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def node_count_problem(head, workers):
    """None when the inventory has 1, 2 or 4 Sparks, else the message that stops the play."""
    workers = list(workers or [])
    count = (1 if head else 0) + len(workers)
    if count in NODE_COUNTS:
        return None
    listed = "head %s" % head if head else "no head"
    listed += ", workers %s" % ", ".join(str(w) for w in workers) if workers else ", no workers"
    return ("[vllm_nvfp4.nodes] path=vllm runs tensor parallel across every node of the inventory "
            "(--tensor-parallel-size = node count); found %d nodes (%s), supported: 1, 2 or 4. Fix: list 1, 2 or 4 "
            "Sparks in the sparks group (spark_head + spark_workers). No host was changed." % (count, listed))


def rank_argv(rank, nnodes, options):
    """The container's command after the image's entrypoint ``vllm serve``, in the recipe's order.

    ``options``: ``model`` (the container path, positional), ``served_name``, ``api_host``,
    ``api_port``, ``master_address``, ``master_port`` and the normalized profile values
    (``mtp_tokens``, ``max_model_len``, ``max_num_seqs``, ``max_num_batched_tokens``,
    ``gpu_memory_utilization``, ``execution_mode``, ``reasoning_parser``, ``extra_args``).
    Rank 0 serves the API; every other rank runs ``--headless`` (without it a follower starts
    an engine of its own and fails its first collective call).
    """
    argv = [
        str(options["model"]),
        "--served-model-name", str(options["served_name"]),
        "--host", str(options["api_host"]),
        "--port", str(options["api_port"]),
        "--tensor-parallel-size", str(nnodes),
        # repr: the shortest text that reads back as the same float (0.82, never 0.8200000000000001).
        "--gpu-memory-utilization", repr(float(options["gpu_memory_utilization"])),
        "--max-model-len", str(options["max_model_len"]),
        "--max-num-seqs", str(options["max_num_seqs"]),
        "--max-num-batched-tokens", str(options["max_num_batched_tokens"]),
        "--attention-backend", ATTENTION_BACKEND,
        "--kv-cache-dtype", KV_CACHE_DTYPE,
        "--block-size", BLOCK_SIZE,
        "--moe-backend", MOE_BACKEND,
    ]
    if options["execution_mode"] == "eager":
        argv.append("--enforce-eager")
    argv += [
        "--skip-mm-profiling",
        "--tool-call-parser", TOOL_CALL_PARSER,
        "--enable-auto-tool-choice",
        "--reasoning-parser", str(options["reasoning_parser"]),
        "--default-chat-template-kwargs", _json(CHAT_TEMPLATE_KWARGS),
        "--generation-config", "vllm",
    ]
    if int(options["mtp_tokens"]):
        argv += ["--speculative-config", _json({"method": "mtp", "num_speculative_tokens": int(options["mtp_tokens"])})]
    argv += [
        "--distributed-executor-backend", "mp",
        "--nnodes", str(nnodes),
        "--node-rank", str(rank),
        "--master-addr", str(options["master_address"]),
        "--master-port", str(options["master_port"]),
    ]
    if rank > 0:
        argv.append("--headless")
    return argv + [str(arg) for arg in options.get("extra_args") or []]


ULIMITS = ("memlock:-1:-1", "stack:67108864:67108864")


def rank_spec(rank, nnodes, options, env=None):
    """The ``community.docker.docker_container`` parameters of one rank, without the plan label.

    ``options`` as for rank_argv, plus ``image``, ``hf_cache_host`` and ``cache_host`` (this
    node's host paths), ``shm_size`` and ``stop_timeout``; ``env`` from rank_env.
    """
    name = head_container(PATH) if rank == 0 else worker_container(PATH, rank)
    return {
        "name": name,
        "image": str(options["image"]),
        # The image exists in no registry (built on the head, shipped to the workers): a pull
        # could only fail, and "never" makes a missing image fail by its name instead.
        "pull": "never",
        # The command stays a list (JSON values and all), compared as a list.
        "command_handling": "correct",
        "command": rank_argv(rank, nnodes, options),
        "env": dict(env or {}),
        "labels": {LABEL: PATH, RANK_LABEL: str(rank)},
        "network_mode": "host",
        "ipc_mode": "host",
        "shm_size": str(options["shm_size"]),
        # The recipe's; the lab's dockerd cannot grant an unlimited memlock and passes its own.
        "ulimits": [str(item) for item in options.get("ulimits") or ULIMITS],
        "capabilities": ["IPC_LOCK"],
        "devices": ["/dev/infiniband:/dev/infiniband"],
        "device_requests": [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}],
        "mounts": [
            {"type": "bind", "source": str(options["hf_cache_host"]), "target": CONTAINER_HF, "read_only": True},
            {"type": "bind", "source": str(options["cache_host"]), "target": CACHE},
        ],
        "restart_policy": "no",
        "stop_timeout": int(options["stop_timeout"]),
        "state": "started",
        "detach": True,
        # no_defaults: the module compares only what this spec sets, never its own defaults for
        # options left out (init, tty, memory, ...), so a container is not recreated for a value
        # nobody chose. What this spec sets is all in the plan label, which decides: env and
        # labels compare as "more may be present" (the image's own ENV and labels), so a key
        # dropped from vllm_nvfp4_extra_env changes the label, not the env comparison.
        "container_default_behavior": "no_defaults",
        "output_logs": False,
    }


def plan_hash(specs, image_id):
    """sha256 over every rank's spec (without the plan label) and the image id: a tag can be
    rebuilt, the id cannot."""
    text = json.dumps({"image_id": image_id, "ranks": specs}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _host_path(option, value, nodes):
    """``({node: path}, errors)``: one absolute host path for every node, or a path per node."""
    by_node = dict((node, value) for node in nodes) if not isinstance(value, dict) else value
    out, errors = {}, []
    for node in nodes:
        path = by_node.get(node)
        if not isinstance(path, str) or not path.startswith("/"):
            errors.append("%s: %s: expected an absolute host path, found %s; fix: %s" % (
                node, option, found(path), OPTION_FIXES[option]))
        else:
            out[node] = path
    return out, errors


def _contract_problems(contract):
    problems = contract_problems(contract)
    # The schema wants a worker on every path; vLLM at TP1 serves from the head alone, which
    # the node count allows (node_count_problem), so that one rule does not apply here.
    if isinstance(contract, dict) and contract.get("workers") == []:
        problems = [p for p in problems if not p.startswith("workers is empty;")]
    # The preflight proves the master port of the path it ran for (cx7_link_master_port_<path>).
    if not problems and contract.get("path") != PATH:
        problems.append("it was written for path %s, not %s" % (contract.get("path"), PATH))
    return problems


def _option_problems(options):
    """The cluster-wide options' errors, and the API endpoint and stop timeout as the spec takes them."""
    errors = []
    for option in ("image", "served_name"):
        value = options.get(option)
        if not isinstance(value, str) or not value or any(char.isspace() for char in value):
            errors.append("%s: expected a name without spaces, found %s; fix: %s" % (
                option, found(value), OPTION_FIXES[option]))
    if not isinstance(options.get("image_id"), str) or not _IMAGE_ID.match(options["image_id"]):
        errors.append("image_id: expected sha256:<64 hex digits>, found %s; fix: %s" % (
            found(options.get("image_id")), OPTION_FIXES["image_id"]))
    model = options.get("model")
    if not isinstance(model, str) or not model.startswith(CONTAINER_HF + "/"):
        errors.append("model: expected a container path under %s (the HF cache mount), found %s; fix: %s" % (
            CONTAINER_HF, found(model), OPTION_FIXES["model"]))
    if not isinstance(options.get("shm_size"), str) or not _SHM.match(options["shm_size"]):
        errors.append("shm_size: expected a size such as 64g (a whole number and b, k, m, g, t or p), found %s; "
                      "fix: %s" % (found(options.get("shm_size")), OPTION_FIXES["shm_size"]))
    timeout = whole(options.get("stop_timeout"))
    if timeout is None or timeout < 0:
        errors.append("stop_timeout: expected a whole number of seconds >= 0, found %s; fix: %s" % (
            found(options.get("stop_timeout")), OPTION_FIXES["stop_timeout"]))
    api_host = site_default(_api_endpoint.BIND_VAR) if options.get("api_host") is None else options["api_host"]
    api_port = site_default(_api_endpoint.PORT_VAR) if options.get("api_port") is None else options["api_port"]
    errors += _api_endpoint.problems(api_host, api_port)
    return errors, {"api_host": api_host, "api_port": whole(api_port), "stop_timeout": timeout}


def _profile_values(options):
    """The normalized settings in options, under the role's variable names for profile_problems."""
    names = ("profile", "mtp_tokens", "max_model_len", "max_num_seqs", "max_num_batched_tokens",
             "gpu_memory_utilization", "execution_mode", "reasoning_parser", "extra_args")
    return dict((PREFIX + name, options[name]) for name in names if name in options)


def _unique(messages):
    """The messages in order, each once (a shared option's error comes from every rank)."""
    out = []
    for message in messages:
        if message not in out:
            out.append(message)
    return out


def cluster_plan(contract, options):
    """``{errors, warnings, plan_hash, nodes, ranks}``: every rank's docker_container parameters.

    ``contract``: the cluster contract (glm53_cluster). ``options``: ``image``, ``image_id``,
    ``served_name``, ``api_host``, ``api_port``, ``model``, ``hf_cache_host`` and
    ``cache_host`` (a host path, or {node: path}), ``shm_size`` (64g), ``stop_timeout`` (60),
    ``nccl_debug``, ``single_hca``, ``extra_env``, ``profile`` (qualified) and the profile's
    settings (profile_problems' ``normalized``; judged again here). ``nodes`` lists the nodes
    in rank order (head first), ``ranks`` is {node: spec}; both are empty, and ``plan_hash``
    is '', when there are errors.
    """
    options = dict(DEFAULTS, **(options or {}))
    empty = {"errors": [], "warnings": [], "plan_hash": "", "nodes": [], "ranks": {}}
    wrong = _contract_problems(contract)
    if wrong:
        empty["errors"] = ["the cluster contract is unusable (%s); fix: rerun the preflight (playbooks/preflight.yml "
                           "-e path=vllm)" % "; ".join(wrong)]
        return empty
    nodes = [contract["head"]] + list(contract["workers"])
    errors = [p for p in [node_count_problem(contract["head"], contract["workers"])] if p]
    profile = profile_problems(_profile_values(options))
    errors += profile["errors"]
    wrong, resolved = _option_problems(options)
    errors += wrong
    hf_cache, wrong = _host_path("hf_cache_host", options.get("hf_cache_host"), nodes)
    errors += wrong
    cache, wrong = _host_path("cache_host", options.get("cache_host"), nodes)
    errors += wrong
    envs = {}
    for node in nodes:
        result = rank_env(contract, node, options)
        errors += result["errors"]
        envs[node] = result["env"]
    if errors:
        return dict(empty, errors=_unique(errors), warnings=profile["warnings"])
    base = dict(options, **profile["normalized"])
    base.update(resolved, master_address=contract["master_address"], master_port=contract["master_port"])
    specs = {}
    for rank, node in enumerate(nodes):
        mine = dict(base, hf_cache_host=hf_cache[node], cache_host=cache[node])
        specs[node] = rank_spec(rank, len(nodes), mine, env=envs[node])
    digest = plan_hash(specs, options["image_id"])
    for spec in specs.values():
        spec["labels"][PLAN_LABEL] = digest
    return {"errors": [], "warnings": profile["warnings"], "plan_hash": digest, "nodes": nodes, "ranks": specs}


def _labels(inspect):
    if isinstance(inspect, list):
        inspect = inspect[0] if inspect else None
    return ((inspect or {}).get("Config") or {}).get("Labels") or {}


def plan_changes(found_by_node, digest):
    """Why the running ranks differ from this run's plan: one reason per node whose container
    was started from another plan or not by this role. ``found_by_node``: {node: the docker
    inspect of its glm53-vllm container (or the list docker prints), or None}, in rank order; a node without a container
    gives no reason here (the probe reports it absent)."""
    reasons = []
    for position, (node, inspect) in enumerate((found_by_node or {}).items()):
        # `docker container inspect` prints a list: its one entry, or none.
        if isinstance(inspect, list):
            inspect = inspect[0] if inspect else None
        if not inspect:
            continue
        labels = _labels(inspect)
        rank = labels.get(RANK_LABEL) or str(position)
        started = labels.get(PLAN_LABEL)
        if not started:
            reasons.append("rank %s on %s: not started by this role (its container has no %s label)" % (
                rank, node, PLAN_LABEL))
        elif started != digest:
            reasons.append("rank %s on %s: started from plan %s, this run's is %s (a flag, the environment, the "
                           "image or the checkpoint changed)" % (rank, node, started[:12], str(digest)[:12]))
    return reasons
