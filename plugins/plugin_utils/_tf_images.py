# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which TensorFold images a node must build: judged from ``docker image inspect`` output
and the content of the inputs (git trees), never from tags or dates."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

INPUTS_LABEL = "dgx_spark.glm53.inputs"
KIT_LABEL = "dgx_spark.glm53.kit"


def input_hash(kit_tree, patches_tree, base):
    """sha256 over what lp9001 is made of: the kit's tree (vendor/TensorFold's commit is in
    it as a gitlink), the profile's patches tree, and the base image name it builds FROM."""
    text = "kit=%s\npatches=%s\nbase=%s\n" % (kit_tree, patches_tree, base)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _by_tag(images, tag):
    wanted = tag if ":" in tag.rsplit("/", 1)[-1] else tag + ":latest"
    for image in images or []:
        if wanted in (image.get("RepoTags") or []):
            return image
    return None


def image_entry(images, tag):
    """The ``docker image inspect`` object of ``tag`` in a list of them (``:latest`` when untagged), or {}."""
    return _by_tag(images, tag) or {}


def labels_of(image):
    return ((image or {}).get("Config") or {}).get("Labels") or {}


def image_state(images, base, image, kit_tree, patches_tree):
    """``{inputs, kit, image_id, need_image, need_base}`` for one node."""
    inputs = input_hash(kit_tree, patches_tree, base)
    found_base, found_image = _by_tag(images, base), _by_tag(images, image)
    labels = labels_of(found_image)
    need_image = found_image is None or labels.get(INPUTS_LABEL) != inputs
    # The kit image is rebuilt (and shipped) only when the patched image must be rebuilt
    # and the kit image is missing or was built from another kit tree.
    need_base = need_image and (found_base is None or labels.get(KIT_LABEL) != kit_tree)
    return {"inputs": inputs, "kit": kit_tree, "image_id": (found_image or {}).get("Id", ""),
            "need_image": need_image, "need_base": need_base}


def input_label(image):
    return labels_of(image).get(INPUTS_LABEL, "")
