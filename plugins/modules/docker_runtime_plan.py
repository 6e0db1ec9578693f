#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: docker_runtime_plan
short_description: Decide what Docker and the NVIDIA runtime still need on a node, and whether the play may fix it
version_added: 0.1.0
description:
  - Runs only on the controller (an action plugin); nothing is sent to the node and nothing becomes root.
  - Judges the result of M(dgx_spark.glm53.docker_runtime_info) against the settings of the
    C(dgx_spark.glm53.docker_runtime) role and returns one flag per fix (install the engine, install the NVIDIA
    Container Toolkit, start the engine, register the runtime, restart the engine, add the deploy user to the
    C(docker) group), with the apt repositories (deb822 sources with C(Signed-By)) and pinned packages an install
    needs.
  - Every fix needs root. When one is due and the play does not allow become (no C(-b), C(become) or
    C(ansible_become)) and the user is not root, the task fails naming the node, the missing piece, what was found
    and the fix (for example that docker is missing on spark-worker and become is off, so install it or rerun with
    become). In check mode that is reported instead and the task shows as changed.
  - Problems no fix can solve (a wedged engine, an unreadable daemon config, a missing test image, a C(--gpus all)
    container that fails with nothing left to fix) always fail.
  - A node is V(ready) only when a C(--gpus all) container ran (C(docker info) listing the runtime proves nothing
    about the GPU). When there was no image to run (no C(test_image) setting and none of the collection's images on
    the node) its C(status) is V(gpu_not_proven) with a message naming the node and the fix; that does not fail.
  - Leave C(become) unset on this task, so it sees the play's setting.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
  - dgx_spark.glm53.attributes.action
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  probe:
    description: What M(dgx_spark.glm53.docker_runtime_info) returned for this node.
    type: dict
    required: true
  settings:
    description:
      - The role's settings, by name without the C(docker_runtime_) prefix (C(user), C(engine_source),
        C(docker_version), C(containerd_version), C(distribution_docker_version), C(docker_repo_url),
        C(docker_key_fingerprint), C(toolkit_install), C(toolkit_version), C(toolkit_repo_url), C(toolkit_key_url),
        C(toolkit_key_fingerprint), C(keyring_dir), C(sources_dir), C(set_as_default), C(daemon_json),
        C(test_image), C(timeout)). Missing ones take the role's defaults.
    type: dict
    default: {}
  platform:
    description: The node's C(distribution), C(distribution_release), C(distribution_version), C(architecture) and
      C(os_family) facts; needed only when something must be installed.
    type: dict
    default: {}
  final:
    description: Judge a probe taken after the fixes; anything still missing fails.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details: Reports the fixes a real run would make as a change.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Read the node as the deploy user
  dgx_spark.glm53.docker_runtime_info:
  become: false
  register: probe

- name: Decide (fails with the fix when something is missing and become is off)
  dgx_spark.glm53.docker_runtime_plan:
    probe: "{{ probe }}"
    settings: {engine_source: distribution, test_image: ubuntu:24.04}
    platform: "{{ ansible_facts }}"
  register: plan
"""

RETURN = r"""
status:
  description:
    - V(ready) - nothing to fix and a C(--gpus all) container ran (C(gpu_image)).
    - V(gpu_not_proven) - nothing to fix, but no container ran because there was no image to run; never ready.
    - V(changes_due) - fixes are due (being made with become, or what a check-mode run would make).
    - V(pending) - nothing to fix yet, but the node is judged again (the probe ran as another user than the deploy
      user, or the deploy user must reconnect).
    - V(failed) - see C(failures).
  returned: always
  type: str
  sample: gpu_not_proven
gpu_image:
  description: The image whose C(--gpus all) container proved GPU access; null unless C(status) is V(ready).
  returned: always
  type: str
  sample: "glm53-tensorfold:lp9001"
steps:
  description: The fixes due, in the order the role applies them, each with what is missing, what was found and the fix.
  returned: always
  type: list
  elements: dict
  sample: [{step: configure_runtime, check: runtime, missing: the nvidia runtime is missing,
            fix: "configure it (sudo nvidia-ctk runtime configure --runtime=docker, then sudo systemctl restart docker)",
            found: "runtimes in `docker info`: io.containerd.runc.v2, runc; /etc/docker/daemon.json lacks runtimes.nvidia"}]
install_engine:
  description: Docker must be installed. C(install_toolkit), C(start_engine), C(configure_runtime), C(restart_engine)
    and C(join_group) are returned the same way.
  returned: always
  type: bool
  sample: false
reconnect:
  description: The deploy user joined the C(docker) group after its session began; a new connection is needed.
  returned: always
  type: bool
  sample: false
probe_as_user:
  description: The probe ran as another user than the deploy user; probe again as the deploy user (with become).
  returned: always
  type: bool
  sample: false
verify:
  description: Something was fixed; probe again after the fixes and judge with O(final).
  returned: always
  type: bool
  sample: true
verify_become:
  description: The verification must become the deploy user (the connection user is someone else).
  returned: always
  type: bool
  sample: false
repositories:
  description: The apt repositories an install adds, each with its key URL, keyring path, pinned fingerprint and
    the deb822 source text.
  returned: always
  type: list
  elements: dict
  sample: [{name: docker, key_url: "https://download.docker.com/linux/ubuntu/gpg", key_path: /etc/apt/keyrings/docker.asc,
            fingerprint: 9DC858229FC7DD38854AE2D88D81803C0EBFCD88, source_path: /etc/apt/sources.list.d/docker.sources,
            source: "Types: deb\nURIs: https://download.docker.com/linux/ubuntu\nSuites: noble\n..."}]
packages:
  description: Pinned apt package specs per install step.
  returned: always
  type: dict
  sample: {engine: ["docker-ce=5:28.5.2-1~ubuntu.24.04~noble", "docker-ce-cli=5:28.5.2-1~ubuntu.24.04~noble",
                    "containerd.io=1.7.28-1~ubuntu.24.04~noble"], toolkit: ["nvidia-container-toolkit=1.18.1-1"]}
failures:
  description: Why the play must stop on this node (also the task's message); empty when it may go on.
  returned: always
  type: list
  elements: str
  sample: ["[docker_runtime.engine] docker is missing on spark-worker and become is off: install it (...) or rerun with become ..."]
notes:
  description: Things worth saying that stop nothing (in check mode, fixes that would need become; a reconnect).
  returned: always
  type: list
  elements: str
  sample: ["spark joined the docker group after this login session started; reconnecting"]
summary:
  description: One line on what is being (or would be) fixed, that all is ready and with which image, or that GPU
    access is not proven and how to prove it; then the notes.
  returned: always
  type: list
  elements: str
  sample: ["spark-worker: Docker and the nvidia runtime are ready for spark: a `docker run --gpus all` container of
           glm53-tensorfold:lp9001 ran"]
become:
  description: Whether the play allows become for this node.
  returned: always
  type: bool
  sample: false
"""
