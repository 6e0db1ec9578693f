#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: preflight_report
short_description: Write a preflight report on the controller and render its table
version_added: 0.1.0
description:
  - Writes the report of a preflight (checks with their node, status, level, expected, found and fix) as JSON on the
    controller in one step, creating the directory when missing, and returns the table and the warning and failure
    lines for the play output.
  - Runs only on the controller (an action plugin); nothing is sent to a node. The report is this run's record, so
    the task never reports a change.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
  - dgx_spark.glm53.attributes.action
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  path:
    description: Where the JSON report goes on the controller.
    type: path
    required: true
  report:
    description: The report; a dict with at least C(checks), C(nodes), C(status), C(failures) and C(warnings).
    type: dict
    required: true
  title:
    description: First line of RV(lines); default O(name) and the status.
    type: str
  name:
    description: What ran, for the first line of RV(gate).
    type: str
    default: preflight
  note:
    description: Last words of RV(gate), for example what was or was not changed.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    details: The report is written in check mode too; it records the run, not the nodes.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Write the report and show the table
  dgx_spark.glm53.preflight_report:
    path: ~/.cache/dgx_spark.glm53/cx7_link-spark-head.json
    report: "{{ report }}"
    title: "cx7_link preflight: {{ report.status }}"
  register: written

- name: Show it
  ansible.builtin.debug:
    msg: "{{ written.lines }}"
"""

RETURN = r"""
path:
  description: The absolute path written.
  returned: success
  type: str
  sample: /home/operator/.cache/dgx_spark.glm53/cx7_link-spark-head.json
lines:
  description: The title, one row per check with a column per node, then every warning and failure message.
  returned: success
  type: list
  elements: str
  sample: ["cx7_link preflight: ok", "check           spark-head  spark-worker", "overall         ok          ok"]
gate:
  description: When any check failed, the message to stop the play with (which nodes, each failure, what to do); else empty.
  returned: success
  type: list
  elements: str
  sample:
    - "cx7_link preflight failed on spark-worker (1 check(s); report /x.json):"
    - "[link.port_up] spark-worker: enp1s0f1np1 is not Up; ..."
    - "Fix the above and rerun; nothing was changed on any node."
"""
