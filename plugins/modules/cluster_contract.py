#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cluster_contract
short_description: Persist or read the cluster contract on a DGX Spark
version_added: 0.1.0
description:
  - The cluster contract is what every role after the preflight reads about the cluster (head, workers, path,
    link addresses, master address and port, per-node NCCL and GLOO environment). The C(dgx_spark.glm53.cx7_link)
    preflight publishes it; this module keeps it on each node in the deploy user's config directory, as JSON and as
    a shell-sourceable env file, so later plays (C(--tags), C(--limit), operations playbooks, the watchdog) read it
    without rerunning the preflight. No sudo.
  - V(state=present) writes both files when their content changed (atomically, mode 0644).
  - V(state=read) returns the contract as the C(glm53_cluster) fact, or fails saying to run the preflight.
  - Both check the contract's types and relations first and refuse an unusable one naming each field, what was
    expected and what was found; V(state=present) then writes nothing. The head and each worker (at least one) have
    an entry in C(nodes) with rank 0 for the head, then the workers in order; C(ssh_user) is a login name; link and
    master addresses are IPv4 (the master address is the head's link address; IPv6, and a link-local address with a
    zone such as C(fe80::1%enp1s0f1np1), is refused, since the engines, the RoCE GID choice and ssh take IPv4);
    C(master_port) is an integer in 1024-65535; the NCCL and GLOO settings are strings.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  state:
    description: Write the contract (V(present)) or read it (V(read)).
    type: str
    default: read
    choices: [present, read]
  contract:
    description: The contract to write, as the preflight built it. Required with V(state=present).
    type: dict
  node:
    description: This node's inventory name, which selects its entry for the env file. Required with V(state=present).
    type: str
  config_dir:
    description: Where the files live.
    type: path
    default: ~/.config/dgx_spark.glm53
attributes:
  check_mode:
    support: full
    details: With V(state=present) reports whether the files would change and writes nothing.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Persist the contract the preflight built
  dgx_spark.glm53.cluster_contract:
    state: present
    contract: "{{ glm53_cluster }}"
    node: "{{ inventory_hostname }}"

- name: Read the contract in a later play (fails with the fix when the preflight never ran)
  dgx_spark.glm53.cluster_contract:
    state: read

- name: Use it
  ansible.builtin.debug:
    msg: "master {{ glm53_cluster.master_address }}:{{ glm53_cluster.master_port }}"
"""

RETURN = r"""
path:
  description: The JSON file.
  returned: always
  type: str
  sample: /home/spark/.config/dgx_spark.glm53/cluster.json
env_path:
  description: The shell-sourceable env file of this node.
  returned: always
  type: str
  sample: /home/spark/.config/dgx_spark.glm53/cluster.env
ansible_facts:
  description: With V(state=read), the contract.
  returned: when state is read
  type: dict
  contains:
    glm53_cluster:
      description: The contract.
      type: dict
      returned: success
      sample: {schema: 1, path: tensorfold, head: spark-head, workers: [spark-worker], master_address: 198.18.1.10,
               master_port: 29551, nodes: {}}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._cluster_contract import (
    ENV_NAME,
    JSON_NAME,
    render_env,
    render_json,
    validate,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._files import read_text, write_atomic


def _present(module, json_path, env_path):
    contract, node = module.params["contract"], module.params["node"]
    problems = validate(contract)
    if not problems and node not in contract["nodes"]:
        problems.append("node %s is not in the contract's nodes (%s)" % (node, ", ".join(sorted(contract["nodes"]))))
    if problems:
        module.fail_json(msg="cluster_contract: refusing to write an unusable contract: %s" % "; ".join(problems))
    wanted = {json_path: render_json(contract), env_path: render_env(contract, node)}
    stale = [path for path, text in sorted(wanted.items()) if read_text(path) != text]
    if stale and not module.check_mode:
        for path in stale:
            write_atomic(path, wanted[path])
    module.exit_json(changed=bool(stale), path=json_path, env_path=env_path, written=stale)


def _read(module, json_path, env_path):
    text = read_text(json_path)
    fix = "run the preflight first (ansible-playbook playbooks/preflight.yml -e path=..., or playbooks/site.yml)"
    if text is None:
        module.fail_json(msg="no cluster contract at %s on this node; %s" % (json_path, fix), path=json_path)
    contract, problems = None, []
    try:
        contract = json.loads(text)
    except ValueError as exc:
        problems.append("not JSON (%s)" % exc)
    if not problems:
        problems = validate(contract)
    if problems:
        module.fail_json(msg="the cluster contract at %s is unusable (%s); %s" % (json_path, "; ".join(problems), fix),
                         path=json_path)
    module.exit_json(changed=False, path=json_path, env_path=env_path, ansible_facts={"glm53_cluster": contract})


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="read", choices=["present", "read"]),
            contract=dict(type="dict"),
            node=dict(type="str"),
            config_dir=dict(type="path", default="~/.config/dgx_spark.glm53"),
        ),
        required_if=[("state", "present", ("contract", "node"))],
        supports_check_mode=True,
    )
    directory = module.params["config_dir"]
    json_path, env_path = os.path.join(directory, JSON_NAME), os.path.join(directory, ENV_NAME)
    if module.params["state"] == "present":
        _present(module, json_path, env_path)
    else:
        _read(module, json_path, env_path)


if __name__ == "__main__":
    main()
