#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: docker_runtime_info
short_description: Read whether Docker with the NVIDIA runtime works for a user on a DGX Spark
version_added: 0.1.0
description:
  - Read-only, and needs no sudo. In one round trip it finds the C(docker) and C(nvidia-ctk) commands, reads the
    state of C(docker.service), reads and judges Docker's daemon config (is the runtime registered, and the default
    when asked), asks C(docker info) as the user the module runs as (answers? which runtimes did dockerd load?),
    reads the user's C(docker) group membership (in the user database and in this login session) and, when the
    daemon answered, runs C(docker run --rm --gpus all) of a local image - O(test_image), or when that is empty the
    first of O(known_images) already on the node. That container is the only proof that a container gets the GPU;
    C(docker info) listing the runtime is not.
  - An engine container of the collection's serving paths that runs with a GPU request (C(--gpus)) and was started
    after C(docker.service) last became active is the same proof, so while one serves no test container is run
    (C(test_run.source=running_engine)); one older than the daemon (live restore) does not count.
  - Every command runs with a deadline; a command that wedges comes back with C(timed_out=true), the command line
    and the deadline, and the module still returns everything else.
  - The role C(dgx_spark.glm53.docker_runtime) judges the result on the controller; this module never fails for
    what it finds.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  user:
    description: The deploy user whose C(docker) group membership is read. Default is the user the module runs as.
    type: str
    default: ""
  daemon_json:
    description: Docker's daemon config file.
    type: path
    default: /etc/docker/daemon.json
  runtime:
    description: The runtime that must be registered and loaded.
    type: str
    default: nvidia
  set_as_default:
    description: Whether the runtime must also be Docker's default runtime.
    type: bool
    default: false
  test_image:
    description:
      - A local image to run with C(--gpus all) (never pulled). Empty means the first of O(known_images) the node
        has; when it has none, no container runs (C(test_run.present) false, C(test_run.tried) the images looked for).
    type: str
    default: ""
  known_images:
    description:
      - Images the collection itself builds or runs (the engine images), looked for in this order when O(test_image)
        is empty. Only an image already on the node is used; none is pulled.
    type: list
    elements: str
    default: []
  test_command:
    description:
      - Command the test container runs. Its first word replaces the image's entrypoint (C(--entrypoint)), so an
        engine image's own entrypoint (which would start the engine) never runs; the rest are its arguments.
    type: list
    elements: str
    default: ["true"]
  timeout:
    description: Seconds each command (C(docker), C(systemctl)) may take (1 to 600).
    type: int
    default: 30
attributes:
  check_mode:
    support: full
    details: Read-only; runs the same in check mode.
  diff_mode:
    support: none
notes:
  - The test container is removed when it exits (C(--rm)) and has no network (C(--network none)).
  - The images are looked for with C(docker image inspect), one by one, each with the deadline.
"""

EXAMPLES = r"""
- name: Read Docker and the NVIDIA runtime as the deploy user
  dgx_spark.glm53.docker_runtime_info:
    test_image: ubuntu:24.04
    timeout: 30
  register: docker_state

- name: Say whether dockerd loaded the nvidia runtime
  ansible.builtin.debug:
    msg: "{{ 'nvidia' in docker_state.daemon.runtimes }}"

- name: Prove GPU access with an engine image the node already has, if any
  dgx_spark.glm53.docker_runtime_info:
    known_images: ["glm53-tensorfold:lp9001", "glm53-tensorfold:dev"]
  register: docker_state
"""

RETURN = r"""
user:
  description: Who the module ran as, the deploy user, and the deploy user's C(docker) group membership.
  returned: always
  type: dict
  sample: {name: spark, uid: 1000, deploy_user: spark, exists: true, groups: [docker, spark], in_docker_group: true,
           session_groups: [docker, spark], session_in_docker_group: true}
docker:
  description: The C(docker) command and C(docker.service) (C(systemctl show) properties, or the error).
  returned: always
  type: dict
  sample: {path: /usr/bin/docker, service: {LoadState: loaded, ActiveState: active, UnitFileState: enabled},
           service_error: null}
nvidia_ctk:
  description: The C(nvidia-ctk) command (C(path) null when not found).
  returned: always
  type: dict
  sample: {path: /usr/bin/nvidia-ctk}
daemon:
  description:
    - C(docker info) as this user. C(error_kind) is V(permission), V(unreachable) or V(other) when it did not
      answer; C(timed_out) when it wedged.
  returned: always
  type: dict
  sample: {ran: true, answered: true, server_version: 28.5.2, runtimes: [io.containerd.runc.v2, nvidia, runc],
           default_runtime: runc, error: null, error_kind: null, timed_out: false,
           command: "docker info --format '{{json .}}'", timeout: 30}
daemon_json:
  description: The daemon config file, parsed, and whether the runtime is registered in it.
  returned: always
  type: dict
  sample: {path: /etc/docker/daemon.json, exists: true, error: null, config: {log-opts: {max-size: 10m}},
           runtime: {registered: false, path: null, default_runtime: null, is_default: false, configured: false,
                     missing: [runtimes.nvidia]}}
test_run:
  description:
    - The container check. C(source) says where the image came from - V(test_image), V(known_image),
      V(running_engine) (no container was run; C(engine) names the running engine container that proves it, with its
      path, image and start time), or null when no image was run (the daemon did not answer, or none of the images
      was on the node). C(tried) lists the images looked for, in order. C(ran) is false when no container was started.
  returned: always
  type: dict
  sample: {image: "glm53-tensorfold:lp9001", source: known_image, tried: ["glm53-tensorfold:lp9001"], present: true,
           ran: true, ok: true, rc: 0, stderr: "", timed_out: false, error: null,
           command: "docker run --rm --gpus all --network none --pull never --entrypoint true glm53-tensorfold:lp9001"}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import command_string, run_with_timeout
from ansible_collections.dgx_spark.glm53.plugins.module_utils._docker_daemon import parse_config, runtime_status
from ansible_collections.dgx_spark.glm53.plugins.module_utils._docker_probe import (
    DOCKER_INFO_FORMAT,
    current_user,
    daemon_started,
    gpu_engine_proof,
    parse_docker_info,
    parse_systemctl_show,
    session_groups,
    user_groups,
)

SERVICE_PROPERTIES = ("LoadState", "ActiveState", "UnitFileState", "ActiveEnterTimestampMonotonic")


def _timed_out_error(res):
    return res["error"] if res["timed_out"] else None


def _service(module, timeout):
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return None, "systemctl not found"
    res = run_with_timeout([systemctl, "show", "docker.service", "--property=" + ",".join(SERVICE_PROPERTIES)], timeout)
    if res["timed_out"] or res["rc"] != 0:
        return None, res["error"] or (res["stderr"] or res["stdout"]).strip() or "systemctl exited %s" % res["rc"]
    return parse_systemctl_show(res["stdout"]), None


def _daemon_json(path, runtime, set_default):
    out = {"path": path, "exists": os.path.exists(path), "error": None, "config": None, "runtime": None}
    text = None
    if out["exists"]:
        try:
            with open(path) as handle:
                text = handle.read()
        except (IOError, OSError) as exc:
            out["error"] = "cannot read it: %s" % exc
            return out
    config, error = parse_config(text)
    out.update(config=config, error=error)
    if config is not None:
        out["runtime"] = runtime_status(config, runtime, set_default)
    return out


def _docker_info(docker, timeout):
    argv = [docker, "info", "--format", DOCKER_INFO_FORMAT]
    res = run_with_timeout(argv, timeout)
    out = parse_docker_info(res["rc"], res["stdout"], res["stderr"])
    if res["timed_out"] or res["rc"] is None:
        out.update(error=res["error"], error_kind="timeout" if res["timed_out"] else "other")
    out.update(ran=True, timed_out=res["timed_out"], command=command_string(["docker"] + argv[1:]), timeout=timeout)
    return out


def _no_run(image=None):
    return {"image": image, "source": None, "tried": [], "present": False, "ran": False, "ok": False, "rc": None,
            "stderr": "", "timed_out": False, "command": None, "error": None}


def _engine_proof(docker, service, timeout):
    """A running engine container that already proves the GPU (gpu_engine_proof), or None."""
    since = daemon_started(service)
    if since is None:
        return None
    listed = run_with_timeout([docker, "ps", "--quiet", "--no-trunc", "--filter", "status=running"], timeout)
    ids = listed["stdout"].split() if listed["rc"] == 0 else []
    if not ids:
        return None
    inspect = run_with_timeout([docker, "container", "inspect"] + ids, timeout)
    try:
        found = json.loads(inspect["stdout"] or "[]") if inspect["rc"] == 0 else []
    except ValueError:
        found = []
    return gpu_engine_proof(found if isinstance(found, list) else [], since)


def _test_run(docker, image, known_images, command, timeout):
    """Run a --gpus all container of ``image``, or of the first of ``known_images`` on the node."""
    source = "test_image" if image else "known_image"
    names = [image] if image else [name for name in known_images if name]
    out = _no_run(image or None)
    for name in names:
        out["tried"].append(name)
        inspect = run_with_timeout([docker, "image", "inspect", "--format", "{{.Id}}", name], timeout)
        if inspect["timed_out"]:
            out.update(image=name, source=source, timed_out=True, error=inspect["error"],
                       command=command_string(["docker", "image", "inspect", name]))
            return out
        if inspect["rc"] == 0:
            out.update(image=name, source=source, present=True)
            break
    if not out["present"]:
        if image:
            out["error"] = "image %s is not on this node (it is never pulled here)" % image
        elif names:
            out["error"] = "none of %s is on this node (none is pulled here)" % ", ".join(names)
        return out
    # The command's first word replaces the entrypoint: an engine image's own entrypoint starts the engine.
    argv = [docker, "run", "--rm", "--gpus", "all", "--network", "none", "--pull", "never", "--entrypoint",
            command[0], out["image"]] + list(command[1:])
    res = run_with_timeout(argv, timeout)
    out.update(ran=True, ok=res["rc"] == 0, rc=res["rc"], stderr=res["stderr"].strip()[-2000:], timed_out=res["timed_out"],
               command=command_string(["docker"] + argv[1:]), error=_timed_out_error(res) or res["error"])
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            user=dict(type="str", default=""),
            daemon_json=dict(type="path", default="/etc/docker/daemon.json"),
            runtime=dict(type="str", default="nvidia"),
            set_as_default=dict(type="bool", default=False),
            test_image=dict(type="str", default=""),
            known_images=dict(type="list", elements="str", default=[]),
            test_command=dict(type="list", elements="str", default=["true"]),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    timeout = params["timeout"]
    if not 1 <= timeout <= 600:
        module.fail_json(msg="docker_runtime_info: timeout must be 1 to 600 seconds, found %d" % timeout)
    if not params["test_command"] or not params["test_command"][0]:
        module.fail_json(msg="docker_runtime_info: test_command must name a command (for example [\"true\"]), found %r"
                         % (params["test_command"],))

    name, uid = current_user()
    deploy_user = params["user"] or name
    exists, groups = user_groups(deploy_user)
    session = session_groups()
    user = {"name": name, "uid": uid, "deploy_user": deploy_user, "exists": exists, "groups": groups,
            "in_docker_group": "docker" in groups, "session_groups": session,
            "session_in_docker_group": "docker" in session}

    docker_path = module.get_bin_path("docker")
    service, service_error = _service(module, timeout)
    docker = {"path": docker_path, "service": service, "service_error": service_error}
    nvidia_ctk = {"path": module.get_bin_path("nvidia-ctk")}
    daemon_json = _daemon_json(params["daemon_json"], params["runtime"], params["set_as_default"])

    daemon = {"ran": False, "answered": False, "server_version": None, "runtimes": [], "default_runtime": None,
              "error": "no docker command on PATH" if not docker_path else None, "error_kind": None,
              "timed_out": False, "command": None, "timeout": timeout}
    if docker_path:
        daemon = _docker_info(docker_path, timeout)

    test_run = _no_run(image=params["test_image"] or None)
    proof = _engine_proof(docker_path, service, timeout) if daemon["answered"] else None
    if proof:
        test_run.update(image=proof["image"], source="running_engine", present=True, ok=True, engine=proof)
    elif daemon["answered"]:
        test_run = _test_run(docker_path, params["test_image"], params["known_images"], params["test_command"], timeout)

    module.exit_json(changed=False, user=user, docker=docker, nvidia_ctk=nvidia_ctk, daemon=daemon,
                     daemon_json=daemon_json, test_run=test_run)


if __name__ == "__main__":
    main()
