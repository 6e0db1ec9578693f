#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ops_bundle
short_description: Build the operations program glm53-ops on the controller
version_added: 0.1.0
description:
  - Builds C(glm53-ops), one deterministic zipapp of this collection's C(plugins/module_utils) plus a C(__main__)
    behind a C(python3) shebang, and writes it to O(dest) on the controller (mode 0755) only when its bytes differ.
    Role C(dgx_spark.glm53.ops) copies it to every node of the path.
  - Runs only on the controller (an action plugin), in the controller's own process; nothing is sent to a node.
    The file is a controller-side cache, so the task never reports a change; RV(written) says whether it was
    rewritten.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
  - dgx_spark.glm53.attributes.action
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  dest:
    description: Where the program goes on the controller; its directory is made when missing.
    type: path
    required: true
attributes:
  check_mode:
    support: full
    details: Written in check mode too; it is the controller's cache, not a node's state.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Build the operations program on the controller
  dgx_spark.glm53.ops_bundle:
    dest: ~/.cache/dgx_spark.glm53/ops/glm53-ops
"""

RETURN = r"""
dest:
  description: The absolute path of the program on the controller.
  returned: success
  type: str
  sample: /home/operator/.cache/dgx_spark.glm53/ops/glm53-ops
written:
  description: Whether this run rewrote it (its sources changed, or it was missing).
  returned: success
  type: bool
  sample: false
"""
