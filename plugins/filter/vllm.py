# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters behind the vllm_nvfp4 role (path vllm: vLLM NVFP4, tensor parallel across every
node). Thin wrappers: the logic lives in plugins/plugin_utils/_vllm_profile.py, _vllm_plan.py
and _vllm_images.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._plain import plain as _plain
from ansible_collections.dgx_spark.glm53.plugins.module_utils._engines import worker_container
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._node_reads import VLLM, node_reads
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._vllm_images import (
    IMAGE,
    image_build_needed,
    image_mismatch,
    image_ship_targets,
)
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._vllm_plan import (
    cluster_plan,
    node_count_problem,
    plan_changes,
)
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._vllm_profile import profile_problems


def _call(name, func, *args, **kwargs):
    """The plugin_utils function's answer; a bug or an input it cannot take fails the task
    naming the filter instead of with a traceback."""
    try:
        return func(*args, **kwargs)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("%s: %s: %s" % (name, type(exc).__name__, exc))


def vllm_node_count_problem(head, workers):
    """None for 1, 2 or 4 nodes, else the message that stops the play before any host changes."""
    return _call("vllm_node_count_problem", node_count_problem, _plain(head), _plain(workers))


def vllm_profile(values):
    """``{errors, warnings, normalized}`` for the role's engine settings (vllm_nvfp4_* variables)."""
    return _call("vllm_profile", profile_problems, _plain(values))


def vllm_cluster_plan(contract, options):
    """``{errors, warnings, plan_hash, nodes, ranks}``: each node's docker_container parameters."""
    return _call("vllm_cluster_plan", cluster_plan, _plain(contract), _plain(options))


def vllm_plan_changes(found, plan_hash):
    """Why the running ranks differ from this run's plan (one line per rank)."""
    return _call("vllm_plan_changes", plan_changes, _plain(found), _plain(plan_hash))


def vllm_image_build(inspect, inputs_hash, recipe_commit):
    """``{build, reason}`` from the head's ``docker image inspect`` list."""
    return _call("vllm_image_build", image_build_needed, _plain(inspect), _plain(inputs_hash), _plain(recipe_commit))


def vllm_image_ship(head_id, worker_ids):
    """The workers whose image id is not the head's."""
    return _call("vllm_image_ship", image_ship_targets, _plain(head_id), _plain(worker_ids))


def vllm_node_reads(stdout, checkouts=None):
    """One node's read (``_node_reads``): the recipe's checkout, trees and the base id (head), the
    rank cache directory, the image, the rank container; ``recipe_current`` where ``checkouts``
    names the recipe."""
    return _call("vllm_node_reads", node_reads, str(stdout or ""), VLLM, _plain(checkouts))


def vllm_image_id(inspect):
    """The image id in a parsed ``docker image inspect`` list, or '' when it is absent."""
    inspect = _plain(inspect)
    return str((inspect[0] if isinstance(inspect, list) and inspect else inspect or {}).get("Id") or "")


def vllm_rank_workers(workers, ssh, images=None):
    """wait_for_slots' ``workers``: each worker's rank container, reached over ssh from the head."""
    images = _plain(images) or {}
    out = []
    for node in _plain(workers) or []:
        entry = {"ssh": _plain(ssh)[node], "container": worker_container("vllm", len(out) + 1), "node": node}
        if images.get(node):
            entry["image"] = images[node]
        out.append(entry)
    return out


def vllm_start_errors(hostvars_list):
    """``["<node>: rank <R> did not start: <docker_container's message>", ...]`` for the nodes whose
    ``__vllm_nvfp4_rank_start`` failed (nodes that have not run it yet say nothing)."""
    out = []
    for rank, host in enumerate(_plain(hostvars_list) or []):
        result = (host or {}).get("__vllm_nvfp4_rank_start") or {}
        if result.get("failed"):
            out.append("%s: rank %d did not start: %s" % (
                host.get("inventory_hostname"), rank, str(result.get("msg") or "docker_container failed").strip()))
    return out


def vllm_image_mismatch(ids_by_node, image=IMAGE):
    """None when every node has the head's image id, else the failure message."""
    return _call("vllm_image_mismatch", image_mismatch, _plain(ids_by_node), image=str(image))


class FilterModule(object):
    def filters(self):
        return {
            "vllm_node_count_problem": vllm_node_count_problem,
            "vllm_profile": vllm_profile,
            "vllm_cluster_plan": vllm_cluster_plan,
            "vllm_plan_changes": vllm_plan_changes,
            "vllm_image_build": vllm_image_build,
            "vllm_image_ship": vllm_image_ship,
            "vllm_image_mismatch": vllm_image_mismatch,
            "vllm_image_id": vllm_image_id,
            "vllm_node_reads": vllm_node_reads,
            "vllm_rank_workers": vllm_rank_workers,
            "vllm_start_errors": vllm_start_errors,
        }
