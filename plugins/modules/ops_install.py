#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ops_install
short_description: Install the operations program glm53-ops on a node, and on the head the plan in force
version_added: 0.1.0
description:
  - Puts C(glm53-ops), as built on the controller by C(dgx_spark.glm53.ops_bundle), in O(install_dir) (mode 0755),
    and with O(plan) writes C(ops.json) in O(config_dir) (the directory mode 0700, the file 0600), which is what role
    C(dgx_spark.glm53.ops) does on every node of the path after a deploy. No sudo.
  - One round trip when nothing differs. The action plugin hashes O(src) on the controller and asks the node first;
    only when the installed program has other bytes does it send the file and ask again. Each file is replaced in
    one rename, so a reader (the watchdog's tick) never sees half of it.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
  - dgx_spark.glm53.attributes.action
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  src:
    description:
      - The program on the controller, as C(dgx_spark.glm53.ops_bundle) wrote it (its
        O(dgx_spark.glm53.ops_bundle#module:dest)).
    type: path
    required: true
  install_dir:
    description: Where C(glm53-ops) goes on the node; made (mode 0755) when missing.
    type: path
    required: true
  plan:
    description:
      - The text of C(ops.json), the plan of the path in force, as role C(dgx_spark.glm53.ops) renders it. Given on the
        head only; omitted, no plan is written.
    type: str
  config_dir:
    description: Where C(ops.json) goes; required with O(plan).
    type: path
  _program_sha256:
    description: Internal, set by the action plugin from O(src); never set it in a task.
    type: str
  _program_src:
    description: Internal, set by the action plugin (the copy of O(src) it sent); never set it in a task.
    type: path
attributes:
  check_mode:
    support: full
    details: Reports what would change; sends and writes nothing.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Install the operations program on every node, and the plan on the head
  dgx_spark.glm53.ops_install:
    src: ~/.cache/dgx_spark.glm53/ops/glm53-ops
    install_dir: ~/.local/lib/glm53-ops
    config_dir: ~/.config/glm53-ops
    plan: "{{ (ops_plan | to_nice_json(sort_keys=true)) ~ '\n' if inventory_hostname == ops_nodes[0] else omit }}"
"""

RETURN = r"""
program:
  description: The program on the node.
  returned: success
  type: dict
  contains:
    path:
      description: Where it is.
      type: str
      sample: /home/spark/.local/lib/glm53-ops/glm53-ops
    sha256:
      description: The sha256 of what this run found there (null when it was missing).
      type: str
      sample: 3f1c0d5e9a7b2c4d6e8f0a1b3c5d7e9f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d
    changed:
      description: Whether this run replaced it (or fixed its mode).
      type: bool
      sample: false
plan:
  description: The plan on the head; null where O(plan) was not given.
  returned: success
  type: dict
  contains:
    path:
      description: Where it is.
      type: str
      sample: /home/spark/.config/glm53-ops/ops.json
    changed:
      description: Whether this run wrote it (or fixed its mode or its directory's).
      type: bool
      sample: false
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_install import (
    PLAN,
    InstallError,
    install_program,
    program_state,
    record_plan,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            # The controller's path, for the action plugin; what reaches the node is _program_sha256 (and the
            # file itself, as _program_src, only when the node's differs).
            src=dict(type="path", required=True),
            install_dir=dict(type="path", required=True),
            plan=dict(type="str"),
            config_dir=dict(type="path"),
            _program_sha256=dict(type="str"),
            _program_src=dict(type="path"),
        ),
        required_by={"plan": "config_dir"},
        supports_check_mode=True,
    )
    params = module.params
    install_dir = params["install_dir"]
    sha256 = params["_program_sha256"]
    if not sha256:
        module.fail_json(msg="ops_install: run it as a task (its action plugin hashes src on the controller), "
                             "not as a bare module")
    state = program_state(install_dir, sha256)
    result = {"changed": False, "program": {"path": state["path"], "sha256": state["sha256"], "changed": False},
              "plan": None}
    try:
        if params["plan"] is not None:
            changed = record_plan(params["config_dir"], params["plan"], module.check_mode)
            result["plan"] = {"path": os.path.join(params["config_dir"], PLAN), "changed": changed}
        if not state["current"]:
            if params["_program_src"] is None and state["sha256"] != sha256 and not module.check_mode:
                # The action sends the file and asks again (the plan is in place already).
                result["needs_program"] = True
            else:
                result["program"]["changed"] = install_program(install_dir, sha256, params["_program_src"],
                                                               module.check_mode)
    except (InstallError, IOError, OSError) as exc:
        module.fail_json(msg="ops_install: %s" % exc, **result)
    result["changed"] = bool(result["program"]["changed"] or (result["plan"] or {}).get("changed"))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
