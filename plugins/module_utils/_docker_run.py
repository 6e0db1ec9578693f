# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: a rank's ``community.docker.docker_container`` parameters as a ``docker run``
command, for the operations program on the head (a start or a heal has no Ansible). Not a public API.

Only the parameters a rank spec sets are known (plugins/plugin_utils/_vllm_plan.py rank_spec);
anything else is refused rather than dropped, so a start never runs a rank that differs from
the one the deploy made without saying so.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Parameters that say how the module behaves, not what the container is.
_MODULE_ONLY = ("state", "detach", "pull", "command_handling", "container_default_behavior", "output_logs")
_KNOWN = ("name", "image", "command", "env", "labels", "network_mode", "ipc_mode", "shm_size", "ulimits",
          "capabilities", "devices", "device_requests", "mounts", "restart_policy", "stop_timeout") + _MODULE_ONLY


def _ulimit(text):
    """docker_container's ``type:soft[:hard]`` as the CLI's ``type=soft[:hard]``."""
    name, _sep, values = str(text).partition(":")
    if not name or not values:
        raise ValueError("ulimit %r is not type:soft[:hard]" % (text,))
    return "%s=%s" % (name, values)


def _gpus(request):
    if request.get("driver", "nvidia") != "nvidia" or request.get("capabilities") not in (None, [["gpu"]]):
        raise ValueError("device request %r: only all NVIDIA GPUs (--gpus) is known" % (request,))
    count = request.get("count", -1)
    return "all" if count in (-1, None) else str(int(count))


def _mount(mount):
    if mount.get("type", "bind") != "bind":
        raise ValueError("mount %r: only bind mounts are known" % (mount,))
    parts = ["type=bind", "source=%s" % mount["source"], "target=%s" % mount["target"]]
    if mount.get("read_only"):
        parts.append("readonly")
    return ",".join(parts)


def run_argv(spec, env_override=None):
    """``docker run -d ...`` for ``spec``; ``env_override`` replaces or adds environment keys.

    Raises ValueError naming a parameter it does not know."""
    unknown = sorted(set(spec) - set(_KNOWN))
    if unknown:
        raise ValueError("rank spec has parameters docker run is not taught: %s" % ", ".join(unknown))
    argv = ["docker", "run", "-d", "--name", spec["name"]]
    env = dict(spec.get("env") or {})
    env.update(env_override or {})
    for key in sorted(env):
        argv += ["-e", "%s=%s" % (key, env[key])]
    for key in sorted(spec.get("labels") or {}):
        argv += ["--label", "%s=%s" % (key, spec["labels"][key])]
    for option, flag in (("network_mode", "--network"), ("ipc_mode", "--ipc"), ("shm_size", "--shm-size"),
                         ("restart_policy", "--restart"), ("stop_timeout", "--stop-timeout")):
        if spec.get(option) not in (None, ""):
            argv += [flag, str(spec[option])]
    for item in spec.get("ulimits") or []:
        argv += ["--ulimit", _ulimit(item)]
    for cap in spec.get("capabilities") or []:
        argv += ["--cap-add", cap]
    for device in spec.get("devices") or []:
        argv += ["--device", device]
    for request in spec.get("device_requests") or []:
        argv += ["--gpus", _gpus(request)]
    for mount in spec.get("mounts") or []:
        argv += ["--mount", _mount(mount)]
    argv.append(spec["image"])
    command = spec.get("command") or []
    argv += [str(part) for part in (command if isinstance(command, list) else [command])]
    return argv
