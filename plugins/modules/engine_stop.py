#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: engine_stop
short_description: Remove the engine containers of the given serving paths on one DGX Spark node
version_added: 0.1.0
description:
  - Only one GLM-5.3 engine fits in a GB10's memory, so a path's start first removes the other path's engine.
    This module removes, with C(docker rm -f), the containers on the node that are an engine of one of O(paths),
    and nothing else.
  - A container is a path's engine when its label C(dgx_spark.glm53.engine) names that path, else when its whole
    name is one of the path's names - V(tensorfold) C(glm53-tf-r<N>) (the kit's ranks), V(vllm) C(glm53-vllm) or
    C(glm53-vllm-r<N>). The label wins over the name. A container named C(glm53-tf-r0-backup), or labelled with
    another path, is left alone.
  - Stopped and exited containers count too (C(docker ps -a)), since they still hold the name a start needs.
  - Every C(docker) command runs with a deadline (O(timeout)). When Docker cannot be asked (the user may not open
    its socket, the daemon is down or wedged) the task fails naming the node, the command, what it said and the
    fix; nothing is removed then.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  paths:
    description:
      - The serving paths whose engines to remove. At least one.
      - Named rather than "every path but this one", so a task removes exactly what it says, and a teardown can
        name both.
    type: list
    elements: str
    required: true
    choices: [tensorfold, vllm]
  timeout:
    description: Seconds each C(docker) command (the listing, the removal) may take (1 to 600).
    type: int
    default: 60
attributes:
  check_mode:
    support: full
    details: Lists the containers and returns those it would remove in RV(removed); removes nothing.
  diff_mode:
    support: none
  idempotent:
    description: When run twice in a row with the same arguments, the second run reports no change.
    support: full
  action_group:
    description: Use C(group/dgx_spark.glm53.glm53) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - dgx_spark.glm53.glm53
requirements:
  - The C(docker) CLI on the node, usable by the user the module runs as (a member of the C(docker) group).
notes:
  - C(docker rm -f) kills the engine (SIGKILL) without a graceful stop; the requests it was serving fail.
  - The containers are removed by full id, as listed, so a container that took a freed name meanwhile is not
    touched. One that is already gone when C(docker rm) runs is not reported as removed.
"""

EXAMPLES = r"""
---
- name: Stop the vLLM path's engine on each node before the TensorFold ranks start
  dgx_spark.glm53.engine_stop:
    paths: [vllm]
  delegate_to: "{{ item }}"
  loop: "{{ groups['sparks'] }}"

- name: Stop every engine on this node (a teardown)
  dgx_spark.glm53.engine_stop:
    paths: [tensorfold, vllm]
  register: __glm53_stopped

- name: Say what was removed
  ansible.builtin.debug:
    msg: "{{ __glm53_stopped.removed | map(attribute='name') | join(', ') or 'no engine was running' }}"

- name: Show which engines would be removed, removing nothing
  dgx_spark.glm53.engine_stop:
    paths: [tensorfold]
  check_mode: true
"""

RETURN = r"""
removed:
  description:
    - The engine containers removed (in check mode, those that would be), in C(docker ps) order. Empty when there
      were none; C(changed) is true when it is not empty.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The container's name.
      type: str
      sample: glm53-vllm
    id:
      description: The container's full id.
      type: str
      sample: 3f2a9c0d5e1b4a7f8c6d2e0b9a1f3c5d7e9b0a2c4e6f8a1b3d5c7e9f0a2b4c6d
    path:
      description: The serving path whose engine it was.
      type: str
      sample: vllm
  sample: [{name: glm53-vllm, id: 3f2a9c0d5e1b4a7f8c6d2e0b9a1f3c5d7e9b0a2c4e6f8a1b3d5c7e9f0a2b4c6d, path: vllm}]
"""

import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import command_string, run_with_timeout
from ansible_collections.dgx_spark.glm53.plugins.module_utils._docker_probe import current_user
from ansible_collections.dgx_spark.glm53.plugins.module_utils._engine_stop import (
    PS_ARGS,
    failure,
    gone_before_rm,
    rm_args,
    to_remove,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._engines import PATHS

ARGUMENT_SPEC = dict(
    paths=dict(type="list", elements="str", required=True, choices=list(PATHS)),
    timeout=dict(type="int", default=60),
)


def _docker(docker_path, args, timeout):
    run = run_with_timeout([docker_path] + args, timeout)
    # Messages show the command as one would type it, not the PATH lookup's result.
    run["command"] = command_string(["docker"] + args)
    return run


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    paths, timeout = module.params["paths"], module.params["timeout"]
    if not paths:
        module.fail_json(msg="engine_stop: paths is empty; name the paths whose engines to stop (%s)"
                         % ", ".join(PATHS))
    if not 1 <= timeout <= 600:
        module.fail_json(msg="engine_stop: timeout must be 1 to 600 seconds, found %d" % timeout)
    node, user = socket.gethostname(), current_user()[0]
    docker_path = module.get_bin_path("docker")
    if not docker_path:
        module.fail_json(msg="engine_stop on %s: no docker command on PATH, so its engines cannot be listed; "
                             "fix: install Docker (the dgx_spark.glm53.docker_runtime role) or put docker on "
                             "PATH; nothing was removed" % node, removed=[])

    listed = _docker(docker_path, PS_ARGS, timeout)
    if listed["rc"] != 0:
        module.fail_json(msg=failure(node, listed, user), removed=[])
    victims = to_remove(listed["stdout"], paths)
    if module.check_mode or not victims:
        module.exit_json(changed=bool(victims), removed=victims)

    removing = _docker(docker_path, rm_args(victims), timeout)
    if removing["rc"] != 0:
        gone = None if removing["rc"] is None or removing["timed_out"] else gone_before_rm(removing["stderr"], victims)
        if gone is None:
            module.fail_json(msg=failure(node, removing, user, removing=victims), removed=[])
        victims = [v for v in victims if v["id"] not in gone]
    module.exit_json(changed=bool(victims), removed=victims)


if __name__ == "__main__":
    main()
