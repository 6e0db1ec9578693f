# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_nvfp4 role's image: built once on the head from the recipe's container inputs,
shipped to the workers, and the same image id on every node before a rank starts (the ranks
of one tensor-parallel engine must run the same kernels). Judged from ``docker image
inspect`` output and labels, never from tags or dates. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._tf_images import INPUTS_LABEL, labels_of

RECIPE_LABEL = "dgx_spark.glm53.recipe"
IMAGE = "glm53-sm121:local"


def _short(value):
    """A digest or commit as 12 characters (``sha256:`` dropped); ``none`` when absent."""
    return str(value).split(":", 1)[-1][:12] if value else "none"


def _entry(inspect):
    """The image's inspect object from ``docker image inspect <tag>`` (a list of one), or None."""
    if isinstance(inspect, list):
        inspect = inspect[0] if inspect else None
    return inspect if isinstance(inspect, dict) and inspect else None


def image_build_needed(inspect, inputs_hash, recipe_commit):
    """``{build, reason}`` for the head: build when the image is absent, or its labels say it
    was built from other container inputs or another recipe commit."""
    entry = _entry(inspect)
    if entry is None:
        return {"build": True, "reason": "the image is not on the head"}
    labels = labels_of(entry)
    if labels.get(INPUTS_LABEL) != inputs_hash:
        return {"build": True, "reason": "the recipe's container inputs changed (the image's %s is %s, this run's is "
                                         "%s)" % (INPUTS_LABEL, _short(labels.get(INPUTS_LABEL)), _short(inputs_hash))}
    if labels.get(RECIPE_LABEL) != recipe_commit:
        return {"build": True, "reason": "the recipe's commit changed (the image was built from %s, this run pins %s)"
                                         % (_short(labels.get(RECIPE_LABEL)), _short(recipe_commit))}
    return {"build": False, "reason": "built from this run's inputs (recipe %s)" % _short(recipe_commit)}


def _pairs(ids):
    """[(node, id)] from a {node: id} dict or a list of [node, id] pairs, in the given order."""
    if isinstance(ids, dict):
        return list(ids.items())
    return [(pair[0], pair[1]) for pair in ids or []]


def image_ship_targets(head_id, worker_ids):
    """The workers, in the given order, whose image id is not the head's (or who have none)."""
    return [node for node, image_id in _pairs(worker_ids) if not image_id or image_id != head_id]


def image_mismatch(ids_by_node, image=IMAGE):
    """None when every node has the same image id (or no node is given), else the message that stops the play,
    naming each node's id (``missing`` where the image is absent)."""
    pairs = _pairs(ids_by_node)
    ids = set(image_id for _node, image_id in pairs)
    if not pairs or (len(ids) == 1 and all(ids)):
        return None
    listed = " ".join("%s=%s" % (node, "sha256:" + _short(image_id) if image_id else "missing")
                      for node, image_id in pairs)
    return ("[vllm_nvfp4.image] %s differs after shipping: %s; fix: rerun the role to ship the head's image again "
            "(docker save on the head, docker load on each worker); if it still differs, check the workers' free "
            "disk space and that nothing else tags %s on them" % (image, listed, image))
