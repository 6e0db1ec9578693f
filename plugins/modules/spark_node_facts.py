#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: spark_node_facts
short_description: Gather what the preflight needs from one DGX Spark in one round trip
version_added: 0.1.0
description:
  - Read-only. Reads the RDMA port map (C(ibdev2netdev), or the RDMA sysfs tree when the tool is missing or fails)
    joined with C(ip -j addr) and the RoCE v2 GID tables, the GPU model and driver and its CUDA processes
    (C(nvidia-smi)), which container each CUDA process runs in (C(docker ps), only when there are CUDA processes),
    C(/proc/meminfo), the kernel release and command line, and the free space where each kind of data will live.
  - Every external command runs with a deadline; a command that wedges comes back with C(timed_out=true), its
    command line and the deadline, and the module still returns everything else.
  - The controller judges the result (role C(dgx_spark.glm53.cx7_link)); this module never fails for what it finds.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  sysfs_root:
    description: Root of the sysfs tree holding C(class/infiniband) (the Spark lab simulates one elsewhere).
    type: path
    default: /sys
  link_source:
    description: Where the port map comes from; V(auto) uses C(ibdev2netdev) and falls back to the sysfs walk.
    type: str
    default: auto
    choices: [auto, tool, sysfs]
  address:
    description: This node's link address; the port carrying it reports that address's RoCE v2 GID index.
    type: str
    default: ""
  timeout:
    description: Seconds each external command may take (1 to 300).
    type: int
    default: 10
  disk_needs:
    description: Bytes each kind of data needs on this node, for example C(checkpoint), C(prepared), C(session).
    type: dict
    default: {}
  disk_dirs:
    description: Where each kind of data in O(disk_needs) lives; C(~) is this user's home.
    type: dict
    default: {}
  contract_dir:
    description:
      - Where this node keeps the cluster contract (C(cluster.json), C(cluster.env)); their sha256 come back as
        RV(contract_files), so the controller writes the contract only where it differs. Empty reads nothing.
    type: path
    default: ""
  models:
    description:
      - Pinned Hugging Face repos of the serving path. Only their pinned revisions' files in the C(checkpoint)
        directory (an HF cache) count as already present, never other models in the same cache.
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
        description: The repo is a speculative-decoding drafter (fetched only when its license is accepted).
        type: bool
        default: false
      license:
        description: The repo's license when it restricts use, for messages.
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
- name: Gather a node's observations in one round trip
  dgx_spark.glm53.spark_node_facts:
    timeout: 10
    disk_needs: {checkpoint: 165000000000, prepared: 84000000000}
    disk_dirs: {checkpoint: ~/.cache/huggingface, prepared: ~/.cache/glm53-tf/prepared}
    contract_dir: ~/.config/dgx_spark.glm53
    models:
      - repo_id: brandonmusic/GLM-5.3-Flash-tr3-4bpw
        revision: 5ab363a8dcf6405955fd5f99671e01a1c9fb124b
  register: node
"""

RETURN = r"""
link:
  description: The RDMA port map, as C(dgx_spark.glm53.ibdev2netdev_facts) returns it, or the error.
  returned: always
  type: dict
  sample: {source: tool, sysfs_root: /sys, error: null, ports: [{hca: rocep1s0f1, netdev: enp1s0f1np1, state: Up}]}
gpu:
  description: C(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader).
  returned: always
  type: dict
  sample: {rc: 0, stdout: "NVIDIA GB10, 580.95.05", stderr: "", timed_out: false, command: nvidia-smi ..., timeout: 10}
apps:
  description:
    - C(nvidia-smi --query-compute-apps=pid,name --format=csv,noheader), same shape as RV(gpu).
    - Not run when the GPU query timed out (a wedged driver would wedge it too); then C(skipped=true),
      C(rc=null) and C(stderr) says why.
  returned: always
  type: dict
  sample: {rc: 0, stdout: "", stderr: "", timed_out: false}
app_containers:
  description: For each CUDA process that runs in a container, the container's id, name and labels, by pid.
  returned: always
  type: dict
  sample: {"4242": {id: 3f2a..., name: glm53-tf-r0, labels: {dgx_spark.glm53.engine: tensorfold}}}
engine_error:
  description: Why the containers of the CUDA processes could not be listed, or null.
  returned: always
  type: str
  sample: "`docker ps --no-trunc --format {{json .}}` did not answer within 10 s"
meminfo:
  description: The text of C(/proc/meminfo).
  returned: always
  type: str
  sample: "MemTotal: 128000000 kB"
osrelease:
  description: The running kernel release (C(/proc/sys/kernel/osrelease)).
  returned: always
  type: str
  sample: 6.17.0-1008-nvidia
cmdline:
  description: The kernel command line (C(/proc/cmdline)).
  returned: always
  type: str
  sample: BOOT_IMAGE=/vmlinuz ro quiet
disk:
  description: Per kind of data, the free space where it lives and the bytes of it already there.
  returned: always
  type: list
  elements: dict
  sample: [{name: checkpoint, path: ~/.cache/huggingface, need: 165000000000, free: 900000000000, present: 0,
            dev: 2049, mount: /, checked: /home/spark}]
contract_files:
  description: The sha256 of each cluster contract file in O(contract_dir) (null when absent); empty without it.
  returned: always
  type: dict
  sample: {cluster.json: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, cluster.env: null}
elapsed:
  description: Seconds the module took.
  returned: always
  type: float
  sample: 0.42
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._cluster_contract import file_digests
from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import run_with_timeout
from ansible_collections.dgx_spark.glm53.plugins.module_utils._docker_probe import parse_docker_ps
from ansible_collections.dgx_spark.glm53.plugins.module_utils._ibdev2netdev import gather_ports, run_command
from ansible_collections.dgx_spark.glm53.plugins.module_utils._node_facts import (
    containers_of_pids,
    disk_entries,
    read_cgroup,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._sha import bad_revisions

GPU_QUERY = ["--query-gpu=name,driver_version", "--format=csv,noheader"]
APPS_QUERY = ["--query-compute-apps=pid,name", "--format=csv,noheader"]
DOCKER_PS = ["ps", "--no-trunc", "--format", "{{json .}}"]


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ""


def _tool(module, name, argv, timeout):
    path = module.get_bin_path(name, opt_dirs=["/usr/sbin", "/sbin"])
    if not path:
        return {"rc": 127, "stdout": "", "stderr": "%s: command not found in PATH" % name, "timed_out": False,
                "command": " ".join([name] + argv), "timeout": timeout}
    return run_with_timeout([path] + argv, timeout)


def _pids(apps):
    pids = []
    if apps.get("rc") != 0:
        return pids
    for line in (apps.get("stdout") or "").splitlines():
        pid = line.split(",")[0].strip()
        if pid.isdigit():
            pids.append(int(pid))
    return pids


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            link_source=dict(type="str", default="auto", choices=["auto", "tool", "sysfs"]),
            address=dict(type="str", default=""),
            timeout=dict(type="int", default=10),
            disk_needs=dict(type="dict", default={}),
            disk_dirs=dict(type="dict", default={}),
            contract_dir=dict(type="path", default=""),
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
    problems = []
    if not 1 <= params["timeout"] <= 300:
        problems.append("timeout must be 1 to 300 seconds, found %d" % params["timeout"])
    problems.extend(bad_revisions(params["models"]))
    for name, need in params["disk_needs"].items():
        if not isinstance(need, int) or need < 0:
            problems.append("disk_needs.%s must be a whole number of bytes >= 0, found %r" % (name, need))
    if problems:
        module.fail_json(msg="spark_node_facts: " + "; ".join(problems))

    start = time.time()
    timeout = params["timeout"]
    link, link_error = gather_ports(run_command, sysfs_root=params["sysfs_root"], source=params["link_source"],
                                    address=params["address"] or None, timeout=timeout)
    link = dict(link or {}, error=link_error, sysfs_root=params["sysfs_root"])
    gpu = _tool(module, "nvidia-smi", GPU_QUERY, timeout)
    if gpu.get("timed_out"):
        # A wedged driver wedges every nvidia-smi call: asking again only doubles the wait.
        apps = {"rc": None, "stdout": "", "timed_out": False, "timeout": timeout, "skipped": True,
                "command": " ".join(["nvidia-smi"] + APPS_QUERY),
                "stderr": "not asked: `%s` did not answer within %s s" % (gpu["command"], timeout)}
        apps["error"] = apps["stderr"]
    else:
        apps = _tool(module, "nvidia-smi", APPS_QUERY, timeout)
    app_containers, engine_error = {}, None
    pids = _pids(apps)
    if pids:
        # Only asked when the GPU is busy: a wedged Docker engine then costs one deadline.
        listed = _tool(module, "docker", DOCKER_PS, timeout)
        if listed["rc"] == 0:
            app_containers = containers_of_pids(pids, parse_docker_ps(listed["stdout"]), read_cgroup)
        elif listed.get("timed_out"):
            engine_error = "`%s` did not answer within %s s" % (listed["command"], timeout)
        else:
            engine_error = (listed["stderr"] or listed["stdout"] or "rc=%s" % listed["rc"]).strip().splitlines()[-1]
    module.exit_json(
        changed=False,
        link=link,
        gpu=gpu,
        apps=apps,
        app_containers=app_containers,
        engine_error=engine_error,
        meminfo=_read("/proc/meminfo"),
        osrelease=_read("/proc/sys/kernel/osrelease").strip(),
        cmdline=_read("/proc/cmdline").strip(),
        disk=disk_entries(params["disk_needs"], params["disk_dirs"], params["models"]),
        contract_files=file_digests(params["contract_dir"]) if params["contract_dir"] else {},
        elapsed=round(time.time() - start, 3),
    )


if __name__ == "__main__":
    main()
