# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one read of a node gives the tensorfold role (roles/tensorfold/tasks/install.yml's
"Read the checkouts and the images"): the kit's and the profile's trees, the C8 example, the
hash of the prod.env the running ranks were started from, and ``docker image inspect`` of the
kit and logprobs images - one round trip per node instead of one per value.

The read prints ``key=value`` lines (KEYS, in order; the file contents base64 in one line),
then ``images:`` and the inspect output (JSON, empty when Docker has neither image)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import json

KEYS = ("kit_tree", "patches_tree", "example", "started_env")
_BASE64 = ("example", "started_env")


class ReadsError(ValueError):
    """The read's output is not in the form above."""


def parse_reads(stdout):
    """``{kit_tree, patches_tree, example, started_env, images}``; text values, ``images`` a list."""
    lines = str(stdout or "").split("\n")
    out = {}
    for index, key in enumerate(KEYS):
        line = lines[index] if index < len(lines) else ""
        if not line.startswith(key + "="):
            raise ReadsError("line %d is %r, expected %s=..." % (index + 1, line[:80], key))
        out[key] = line[len(key) + 1:].strip()
    if len(lines) <= len(KEYS) or lines[len(KEYS)].strip() != "images:":
        raise ReadsError("no images: line after %s" % ", ".join(KEYS))
    for key in _BASE64:
        try:
            out[key] = base64.b64decode(out[key].encode("ascii"), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeError, ValueError) as exc:
            raise ReadsError("%s is not base64 of UTF-8 text: %s" % (key, exc))
    text = "\n".join(lines[len(KEYS) + 1:]).strip()
    try:
        images = json.loads(text) if text else []
    except ValueError as exc:
        raise ReadsError("the image inspect output is not JSON: %s" % exc)
    if not isinstance(images, list):
        raise ReadsError("the image inspect output is a %s, expected a list" % type(images).__name__)
    out["images"] = images
    return out
