#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: docker_nvidia_runtime
short_description: Register the NVIDIA runtime in Docker's daemon config with nvidia-ctk, keeping every other key
version_added: 0.1.0
description:
  - Reads Docker's daemon config first. When the C(nvidia) runtime is already registered (and is the default, with
    O(set_as_default)), it changes nothing and runs nothing.
  - Otherwise runs C(nvidia-ctk runtime configure --runtime=docker --config=<file>) (with C(--set-as-default) when
    asked), which merges the runtime into the file, under a deadline.
  - Then reads the file again and compares it with what it was. Every other key (for example C(log-opts),
    C(default-shm-size), C(data-root), other runtimes) must come out equal in meaning; when one was lost or
    changed, the module puts the original bytes back and fails naming the keys.
  - Does not restart Docker; notify a handler on a change.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  daemon_json:
    description: Docker's daemon config file.
    type: path
    default: /etc/docker/daemon.json
  set_as_default:
    description: Also make C(nvidia) Docker's default runtime. When false an existing default is left as it is.
    type: bool
    default: false
  nvidia_ctk:
    description: The C(nvidia-ctk) command, a name looked up on PATH or a path.
    type: str
    default: nvidia-ctk
  timeout:
    description: Seconds C(nvidia-ctk) may take (1 to 600) before it counts as wedged and is killed.
    type: int
    default: 60
attributes:
  check_mode:
    support: full
    details: Predicts the merged config without running C(nvidia-ctk).
  diff_mode:
    support: full
notes:
  - Writing the daemon config needs root (C(become)).
"""

EXAMPLES = r"""
- name: Register the nvidia runtime (merges into an existing daemon.json)
  dgx_spark.glm53.docker_nvidia_runtime:
    timeout: 60
  become: true
  notify: restart docker

- name: Also make it the default runtime
  dgx_spark.glm53.docker_nvidia_runtime:
    set_as_default: true
  become: true
  notify: restart docker
"""

RETURN = r"""
path:
  description: The daemon config file.
  returned: always
  type: str
  sample: /etc/docker/daemon.json
config:
  description: The daemon config after the module (predicted in check mode).
  returned: success
  type: dict
  sample: {log-opts: {max-size: 10m}, runtimes: {nvidia: {args: [], path: nvidia-container-runtime}}}
runtime:
  description: Whether the runtime is registered (and the default) in RV(config).
  returned: success
  type: dict
  sample: {registered: true, path: nvidia-container-runtime, default_runtime: null, is_default: false, configured: true,
           missing: []}
command:
  description: The C(nvidia-ctk) command line, when it ran.
  returned: when nvidia-ctk ran
  type: str
  sample: nvidia-ctk runtime configure --runtime=docker --config=/etc/docker/daemon.json
stderr:
  description: What C(nvidia-ctk) printed on stderr, when it ran.
  returned: when nvidia-ctk ran
  type: str
  sample: "INFO[0000] Wrote updated config to /etc/docker/daemon.json"
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import command_string, run_with_timeout
from ansible_collections.dgx_spark.glm53.plugins.module_utils._docker_daemon import (
    foreign_changes,
    parse_config,
    predicted_config,
    render,
    runtime_status,
)

RUNTIME = "nvidia"


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (IOError, OSError):
        if os.path.exists(path):
            raise
        return None


def _restore(module, path, original):
    """Put the original bytes back (or remove a file nvidia-ctk created), keeping owner and mode."""
    if original is None:
        os.unlink(path)
        return
    fd, tmp = tempfile.mkstemp(prefix=".glm53-", dir=os.path.dirname(path) or ".")
    with os.fdopen(fd, "wb") as handle:
        handle.write(original)
    module.atomic_move(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            daemon_json=dict(type="path", default="/etc/docker/daemon.json"),
            set_as_default=dict(type="bool", default=False),
            nvidia_ctk=dict(type="str", default="nvidia-ctk"),
            timeout=dict(type="int", default=60),
        ),
        supports_check_mode=True,
    )
    path, set_default, timeout = module.params["daemon_json"], module.params["set_as_default"], module.params["timeout"]
    if not 1 <= timeout <= 600:
        module.fail_json(msg="docker_nvidia_runtime: timeout must be 1 to 600 seconds, found %d" % timeout, path=path)

    original = _read(path)
    before, error = parse_config(original.decode("utf-8", "replace") if original is not None else None)
    if error:
        module.fail_json(msg="%s is %s; nvidia-ctk cannot merge into it. Fix the file by hand (python3 -m json.tool %s "
                             "shows where) and rerun; nothing was changed." % (path, error, path), path=path)
    status = runtime_status(before, RUNTIME, set_default)
    if status["configured"]:
        module.exit_json(changed=False, path=path, config=before, runtime=status)

    predicted = predicted_config(before, RUNTIME, set_default)
    diff = {"before": render(before) if original is not None else "", "after": render(predicted),
            "before_header": path, "after_header": path}
    if module.check_mode:
        module.exit_json(changed=True, path=path, config=predicted, runtime=runtime_status(predicted, RUNTIME, set_default),
                         diff=diff)

    tool = module.params["nvidia_ctk"]
    executable = tool if os.path.sep in tool else module.get_bin_path(tool)
    if not executable or not os.access(executable, os.X_OK):
        module.fail_json(msg="%s not found: install the NVIDIA Container Toolkit (package nvidia-container-toolkit) and "
                             "rerun; nothing was changed." % tool, path=path)
    argv = [executable, "runtime", "configure", "--runtime=docker", "--config=" + path]
    if set_default:
        argv.append("--set-as-default")
    shown = command_string([tool] + argv[1:])
    res = run_with_timeout(argv, timeout)
    if res["timed_out"] or res["rc"] != 0:
        current = _read(path)
        if current != original:
            _restore(module, path, original)
        why = ("did not finish within %ss (timeout) and was killed" % timeout if res["timed_out"]
               else "failed (rc %s): %s" % (res["rc"], (res["stderr"] or res["stdout"] or res["error"] or "").strip()))
        module.fail_json(msg="`%s` %s; %s is as it was." % (shown, why, path), path=path, command=shown,
                         stderr=res["stderr"], timed_out=res["timed_out"])

    written = _read(path)
    after, error = parse_config(written.decode("utf-8", "replace") if written is not None else None)
    lost = foreign_changes(before, after, RUNTIME, set_default) if after is not None else ["the whole file (%s)" % error]
    final = runtime_status(after, RUNTIME, set_default) if after is not None else None
    if lost or not final["configured"]:
        _restore(module, path, original)
        problems = lost + ["still missing: %s" % ", ".join(final["missing"])] if final and not final["configured"] else lost
        module.fail_json(msg="`%s` touched keys it must keep or did not register the runtime (%s); the original %s was put "
                             "back. Merge the runtime by hand (runtimes.nvidia.path: nvidia-container-runtime) and rerun."
                             % (shown, "; ".join(problems), path), path=path, command=shown, stderr=res["stderr"])
    diff["after"] = render(after)
    module.exit_json(changed=True, path=path, config=after, runtime=final, diff=diff, command=shown,
                     stderr=res["stderr"].strip())


if __name__ == "__main__":
    main()
