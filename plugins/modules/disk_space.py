#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: disk_space
short_description: Free space and already-present data for each kind of data a serving path keeps on a node
version_added: 0.1.0
description:
  - For each kind of data (for example C(checkpoint), C(prepared), C(session)), reports where it lives, the
    filesystem and its free bytes, and how much of that data is already there, the same way the preflight's
    C(disk.free) check measures it (M(dgx_spark.glm53.spark_node_facts)), so a later space check agrees with it.
  - For the C(checkpoint) kind only the files behind the pinned revisions of O(models) count as present, each inode
    once; never another model in the same Hugging Face cache.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  needs:
    description: Bytes each kind of data needs on this node.
    type: dict
    required: true
  dirs:
    description: Where each kind of data in O(needs) lives; C(~) is this user's home.
    type: dict
    required: true
  models:
    description: Pinned Hugging Face repos whose files count as present checkpoint data.
    type: list
    elements: dict
    default: []
    suboptions:
      repo_id:
        description: Repository id, for example C(org/name).
        type: str
        required: true
      revision:
        description: Full 40-hex commit sha.
        type: str
        required: true
      drafter:
        description: Ignored here; accepted so the site's model list can be passed as is.
        type: bool
        default: false
      license:
        description: Ignored here; accepted so the site's model list can be passed as is.
        type: str
attributes:
  check_mode:
    support: full
    details: Read-only; runs the same in check mode.
  diff_mode:
    support: none
notes:
  - Runs as the unprivileged deploy user; needs no sudo.
"""

EXAMPLES = r"""
- name: Measure the space for the weights, the prepared weights and the session tier
  dgx_spark.glm53.disk_space:
    needs: {checkpoint: 165000000000, prepared: 84000000000, session: 68719476736}
    dirs: {checkpoint: ~/.cache/huggingface, prepared: ~/.cache/glm53-tf/prepared, session: ~/.cache/glm53-tf/sessions}
    models:
      - {repo_id: brandonmusic/GLM-5.3-Flash-tr3-4bpw, revision: 5ab363a8dcf6405955fd5f99671e01a1c9fb124b}
  register: space
"""

RETURN = r"""
disk:
  description: One entry per kind of data.
  returned: always
  type: list
  elements: dict
  sample:
    - {name: checkpoint, path: ~/.cache/huggingface, need: 165000000000, checked: /home/spark/.cache/huggingface,
       dev: 2049, mount: /, free: 812000000000, present: 0}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._node_facts import disk_entries
from ansible_collections.dgx_spark.glm53.plugins.module_utils._sha import bad_revisions


def main():
    module = AnsibleModule(
        argument_spec=dict(
            needs=dict(type="dict", required=True),
            dirs=dict(type="dict", required=True),
            models=dict(type="list", elements="dict", default=[], options=dict(
                repo_id=dict(type="str", required=True),
                revision=dict(type="str", required=True),
                drafter=dict(type="bool", default=False),
                license=dict(type="str"),
            )),
        ),
        supports_check_mode=True,
    )
    params = module.params
    problems = bad_revisions(params["models"])
    for name, need in params["needs"].items():
        try:
            if int(need) < 0:
                raise ValueError
        except (TypeError, ValueError):
            problems.append("needs: %s must be a number of bytes >= 0, found %r" % (name, need))
    if problems:
        module.fail_json(msg="disk_space: " + "; ".join(problems))
    module.exit_json(changed=False, disk=disk_entries(params["needs"], params["dirs"], params["models"]))


if __name__ == "__main__":
    main()
