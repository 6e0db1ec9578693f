#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: checkpoint_check
short_description: Whether a model checkpoint directory on a node is complete, and the digest of its metadata files
version_added: 0.1.0
description:
  - Checks, before any vLLM rank starts, that a checkpoint directory holds what the engine loads, as the vLLM
    recipe's rank script does - the meta files (O(meta_files)), the index (O(index)), and every shard file the
    index's C(weight_map) names (its values, each once) - and reports the digest of the meta files, RV(model_meta),
    which must be equal on every rank (the controller compares it).
  - The directory is normally a Hugging Face hub cache snapshot (C(.../hub/models--org--name/snapshots/<revision>)),
    whose files are relative links into C(../../blobs). A file counts as present when, links followed, it is a
    regular file; a link whose blob is missing (dangling), a link to a partial download (C(*.incomplete)), a
    directory, a FIFO or any other kind of file counts as missing. A shard's size is not judged here (the
    C(hf_weights) role verifies sizes and hashes); RV(shard_bytes) only reports it.
  - RV(model_meta) is defined as follows. For each name of O(meta_files), in that order, the line
    C(<sha256 hex of the file>  <name>) followed by a newline (two spaces between, as C(sha256sum) prints it);
    RV(model_meta) is the sha256 hex digest of these lines concatenated. So it equals the first field of
    C(sha256sum config.json model.safetensors.index.json chat_template.jinja tokenizer_config.json | sha256sum)
    run in the directory (for the default O(meta_files)). It is empty when a meta file is missing or cannot be read.
  - With O(fail_on_missing) and anything missing, the task fails naming the node, the directory, the first five
    missing names and how many more, and the fix (rerun the C(hf_weights) role); the fields below are returned
    all the same.
  - The task fails, whatever O(fail_on_missing), when O(path) does not exist or is not a directory, when the
    index is not valid (not UTF-8 JSON, no C(weight_map) object of tensor name to file name, an empty one, or a
    shard name that is absolute or has a C(..), C(.) or empty part, which would point outside the directory),
    or when a file cannot be read (permission denied); the message names the file and what is wrong.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  path:
    description: The checkpoint directory, for example a snapshot in the Hugging Face cache; C(~) is this user's home.
    type: str
    required: true
  meta_files:
    description:
      - The files hashed into RV(model_meta), in this order; each must be present. Plain relative names inside
        O(path), each once, without a line break.
    type: list
    elements: str
    default: [config.json, model.safetensors.index.json, chat_template.jinja, tokenizer_config.json]
  index:
    description: The safetensors index, relative to O(path), whose C(weight_map) names the shard files.
    type: str
    default: model.safetensors.index.json
  fail_on_missing:
    description: Fail when anything is missing. When false, only RV(complete) and RV(missing) say so.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details: Read-only; runs the same in check mode.
  diff_mode:
    support: none
  idempotent:
    description: When run twice in a row with the same arguments, the second run reports no change.
    support: full
    details: It never changes anything.
  action_group:
    description: Use C(group/dgx_spark.glm53.glm53) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - dgx_spark.glm53.glm53
notes:
  - Runs as the unprivileged deploy user; needs no sudo. Reads the meta files and the index whole; only stats the
    shards.
seealso:
  - module: dgx_spark.glm53.hf_snapshot
"""

EXAMPLES = r"""
---
- name: Check the NVFP4 checkpoint on every node before any vLLM rank starts
  dgx_spark.glm53.checkpoint_check:
    path: ~/.cache/huggingface/hub/models--LibertAIDAI--GLM-5.3-Flash-NVFP4/snapshots/9e0d74e3cef17f634e84fb8e2223707e02616290
  register: __glm53_checkpoint

- name: Every rank must load the same metadata
  ansible.builtin.assert:
    that: >-
      ansible_play_hosts | map('extract', hostvars, ['__glm53_checkpoint', 'model_meta']) | unique | length == 1
    fail_msg: "the checkpoint metadata differs between the nodes: rerun the hf_weights role"
  run_once: true

- name: Report what is missing without failing
  dgx_spark.glm53.checkpoint_check:
    path: /srv/models/glm-5.3-flash-nvfp4
    meta_files: [config.json, model.safetensors.index.json]
    fail_on_missing: false
  register: __glm53_checkpoint
"""

RETURN = r"""
path:
  description: The checkpoint directory, C(~) expanded and links resolved.
  returned: always
  type: str
  sample: /home/spark/.cache/huggingface/hub/models--LibertAIDAI--GLM-5.3-Flash-NVFP4/snapshots/9e0d74e3cef17f634e84fb8e2223707e02616290
missing:
  description:
    - What is missing, as names relative to RV(path) - the meta files in the order of O(meta_files), then O(index)
      unless it is one of them, then the shards sorted by name; each name once. Empty when complete.
    - The shards are listed only when the index could be read.
  returned: always
  type: list
  elements: str
  sample: [chat_template.jinja, model-00002-of-00002.safetensors]
shards:
  description: How many distinct shard files the index's C(weight_map) names (0 when the index is missing).
  returned: always
  type: int
  sample: 2
shard_bytes:
  description: The sum of the sizes of the shards present, links followed.
  returned: always
  type: int
  sample: 134217728
meta:
  description: The sha256 hex digest of each meta file present, by name.
  returned: always
  type: dict
  sample:
    config.json: 8f2b7c1d4e5a69b0c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0
    model.safetensors.index.json: 1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809
    chat_template.jinja: 3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b
    tokenizer_config.json: 5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d
model_meta:
  description:
    - The sha256 hex digest of the meta files' C(sha256sum) lines, in the order of O(meta_files) (see the
      description); empty when a meta file is missing or cannot be read. Equal on every rank of a healthy cluster.
  returned: always
  type: str
  sample: 0d6a3b8e2f1c4957a0b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6
complete:
  description: True when nothing is missing and everything could be read.
  returned: always
  type: bool
  sample: true
"""

import os
import pwd
import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._checkpoint import (
    INDEX,
    META_FILES,
    CheckpointError,
    run,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._module_exit import finish

ARGUMENT_SPEC = dict(
    path=dict(type="str", required=True),
    meta_files=dict(type="list", elements="str", default=list(META_FILES)),
    index=dict(type="str", default=INDEX),
    fail_on_missing=dict(type="bool", default=True),
)


def _user():
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return "uid %d" % os.geteuid()


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, lambda: run(module.params, socket.gethostname(), _user()), CheckpointError)


if __name__ == "__main__":
    main()
