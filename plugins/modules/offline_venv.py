#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: offline_venv
short_description: A Python virtualenv with pinned packages, installed offline from a wheelhouse, without root
version_added: 0.1.0
description:
  - Gives the unprivileged deploy user a Python environment holding exactly the pinned
    O(requirements), or the packages of the hash lock O(requirements_file), installed from the wheel
    files in O(wheelhouse) alone (C(pip --no-index)); the node needs no internet and no package index.
    Never uses sudo.
  - "With O(requirements_file), every wheel in O(wheelhouse) of a package and version the lock pins is
    checked against the lock's sha256 before anything runs (pip's own wheel included, which runs
    before pip could check anything); a file whose sha256 differs is refused naming the file, its
    sha256 and the lock's, and nothing is installed. pip then installs with C(--require-hashes -r)
    the lock, and pip's wheel is one the lock pins. A new lock (another file digest) makes the
    environment anew, so it holds nothing but checked wheels."
  - "Makes the environment the first way the interpreter supports (it is asked whether it has
    ensurepip and the venv module; a way that still fails for that reason falls through to the next),
    and says which in RV(method) and RV(msg):
    V(venv): C(python -m venv) and the venv's own pip;
    V(venv-without-pip): when C(venv) fails because ensurepip is missing (Debian or Ubuntu without
    C(python3-venv), which a user without sudo cannot install), C(python -m venv --without-pip)
    and pip run from its wheel in O(wheelhouse) (C(bin/python pip-X-py3-none-any.whl/pip install ...));
    V(target): when the interpreter has no venv module at all, C(pip install --target PATH/site)
    with pip from its wheel, used with the system interpreter and C(PYTHONPATH) (RV(pythonpath))."
  - Idempotent. A marker file in O(path) (C(.dgx_spark-requirements.json)) records the sorted
    requirements, the interpreter, the method and the lock's sha256. When it matches, the environment's interpreter
    runs as the same Python X.Y, and C(importlib.metadata) reports every pinned version, nothing
    is changed. Otherwise missing or wrong packages are installed into the existing environment
    (repair), or, when its interpreter no longer runs or O(python) changed, the environment is
    made anew.
  - pip runs with no configuration from the node (no C(PIP_*) variables, no pip.conf), binary
    wheels only, no cache, so a node's index, constraint or hash settings cannot change the install.
attributes:
  check_mode:
    support: full
    details:
      - Runs only read-only probes (the interpreter's version, the installed versions) and reports
        in RV(commands) what would run; creates and installs nothing.
  diff_mode:
    support: none
options:
  path:
    description:
      - Directory of the environment. Created if missing (as the connecting user).
      - An existing directory must be empty, a virtualenv (C(pyvenv.cfg)) or one this module made;
        any other non-empty directory is refused, never cleared.
    type: path
    required: true
  requirements:
    description:
      - Pinned packages, each V(name==version), checked by version only. Their dependencies must be in
        O(requirements) or at least in O(wheelhouse); pip resolves them from there.
      - Exactly one of O(requirements) and O(requirements_file) is required.
    type: list
    elements: str
  requirements_file:
    description:
      - A hash-locked requirements file on the node, as C(make node-requirements) writes a role's
        (C(roles/<role>/files/requirements-node.txt), which the C(dgx_spark.glm53.node_venv) role copies over) -
        every package V(name==version) with a C(--hash=sha256:) per wheel, a C(# sha256:<hex> <file>)
        comment line per wheel above it, no markers. It must pin pip too (the wheel pip runs from).
      - Exactly one of O(requirements) and O(requirements_file) is required.
    type: path
  wheelhouse:
    description:
      - Directory on the node holding the C(.whl) files for the node's Python and CPU, including a
        C(pip-*.whl) (the newest is used). See the notes for how to build it.
      - Only read when something must be installed.
    type: path
    required: true
  python:
    description:
      - The interpreter the environment is made with (a name on the node's C(PATH) or an absolute
        path). Python 3.8 or later; the pip wheel may need more (pip 26 needs 3.10).
    type: str
    default: python3
  timeout:
    description: Seconds all commands together may take; a command still running then is killed.
    type: int
    default: 600
requirements:
  - Python 3.8 or later on the node (C(importlib.metadata)).
notes:
  - "How to build the wheelhouse, on the controller (which reaches the package index), for
    the node's Python X.Y and CPU (as its C(python3) reports them, or the facts C(ansible_python.version)
    and C(ansible_architecture)):
    C(pip download --only-binary=:all: --platform manylinux2014_<arch> --platform manylinux_2_17_<arch>
    --platform manylinux_2_28_<arch> --python-version <X.Y> --implementation cp --dest <dir>
    <requirements> pip==<version>), with C(<arch>) V(x86_64) or V(aarch64), then copy C(<dir>)
    to the node. From a hash lock, C(--require-hashes -r <lock>) takes the place of the requirements:
    that is what the C(dgx_spark.glm53.node_venv) role runs, once per lock and node platform. The argv
    comes from C(pip_download_argv()) and C(locked_download_argv()) in the collection's
    C(plugins/plugin_utils/_wheelhouse.py). manylinux_2_28 wheels need glibc 2.28 or later
    (DGX OS 7 has 2.39)."
  - "A wheelhouse without a wheel for the node's platform fails with the package, the platform
    (for example C(cp312 aarch64)), the wheels it does hold and the C(pip download) line to rebuild it."
  - To use the result with another module, set C(ansible_python_interpreter) to RV(python), and with
    RV(method=target) also the environment variable C(PYTHONPATH) to RV(pythonpath).
seealso:
  - name: venv
    description: How C(python -m venv) makes an environment, C(--without-pip) included.
    link: https://docs.python.org/3/library/venv.html
  - name: pip download
    description: The options that fetch wheels for another platform.
    link: https://pip.pypa.io/en/stable/cli/pip_download/
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
---
- name: Make the Hugging Face client environment from the copied wheelhouse
  dgx_spark.glm53.offline_venv:
    path: ~/.local/share/glm53/hf-venv
    wheelhouse: ~/.cache/glm53/wheelhouse
    requirements:
      - huggingface_hub==2.4.0
      - tqdm==4.70.1
  register: __glm53_hf_venv

- name: Run code in that environment (as hf_snapshot does with ansible_python_interpreter)
  ansible.builtin.command:
    argv: ["{{ __glm53_hf_venv.python }}", "-c", "import huggingface_hub; print(huggingface_hub.__version__)"]
  environment:
    PYTHONPATH: "{{ __glm53_hf_venv.pythonpath }}"
  changed_when: false

- name: The same from the role's hash lock, every wheel checked against its sha256
  dgx_spark.glm53.offline_venv:
    path: ~/.local/share/glm53/hf-venv
    wheelhouse: ~/.cache/glm53/wheelhouse
    requirements_file: ~/.cache/glm53/requirements-node.txt

- name: Say what would be done, doing nothing
  dgx_spark.glm53.offline_venv:
    path: ~/.local/share/glm53/hf-venv
    wheelhouse: ~/.cache/glm53/wheelhouse
    requirements: [huggingface_hub==2.4.0]
    python: /usr/bin/python3
  check_mode: true
"""

RETURN = r"""
msg:
  description: One line saying what was done (or would be) and how, or that nothing was needed.
  returned: always
  type: str
  sample: >-
    created /home/spark/.local/share/glm53/hf-venv with venv-without-pip (no environment yet):
    15 pinned packages installed offline from /home/spark/.cache/glm53/wheelhouse;
    /usr/bin/python3 has no ensurepip (on Debian/Ubuntu it comes with python3-venv, which needs root)
method:
  description: How the environment was made (or would be), V(venv), V(venv-without-pip) or V(target).
  returned: always
  type: str
  sample: venv-without-pip
python:
  description:
    - The interpreter to run code in the environment with, for C(ansible_python_interpreter).
    - The venv's C(bin/python), or the system interpreter for V(target).
  returned: always
  type: str
  sample: /home/spark/.local/share/glm53/hf-venv/bin/python
pythonpath:
  description: The C(PYTHONPATH) to set with RV(python) for V(target); empty otherwise.
  returned: always
  type: str
  sample: ""
installed:
  description: Each requirement's name (as given) and the version installed; empty in check mode when work is due.
  returned: always
  type: dict
  sample: {"huggingface_hub": "2.4.0", "tqdm": "4.70.1"}
python_version:
  description: The version of O(python).
  returned: always
  type: str
  sample: 3.12.3
platform:
  description: What a wheel must match on this node (interpreter tag, CPU, libc).
  returned: always
  type: str
  sample: cp312 aarch64 (glibc 2.39)
wheels_checked:
  description: With O(requirements_file), the wheel files whose sha256 matched the lock before pip ran; empty when
    nothing had to be installed or without a lock.
  returned: always
  type: list
  elements: str
  sample: [pip-26.3-py3-none-any.whl, tqdm-4.70.1-py3-none-any.whl]
commands:
  description: The commands that changed the node, in order; in check mode, those that would run.
  returned: always
  type: list
  elements: str
  sample:
    - /usr/bin/python3 -m venv --clear /home/spark/.local/share/glm53/hf-venv
    - /home/spark/.local/share/glm53/hf-venv/bin/python -m pip install --no-index ... huggingface_hub==2.4.0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgx_spark.glm53.plugins.module_utils._module_exit import finish
from ansible_collections.dgx_spark.glm53.plugins.module_utils._venv import OfflineVenv, VenvError


ARGUMENT_SPEC = dict(
    path=dict(type="path", required=True),
    requirements=dict(type="list", elements="str"),
    requirements_file=dict(type="path"),
    wheelhouse=dict(type="path", required=True),
    python=dict(type="str", default="python3"),
    timeout=dict(type="int", default=600),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           required_one_of=[("requirements", "requirements_file")],
                           mutually_exclusive=[("requirements", "requirements_file")])
    params = module.params
    if params["timeout"] <= 0:
        module.fail_json(msg="timeout must be a positive number of seconds, got %d" % params["timeout"])
    finish(module, lambda: OfflineVenv(
        path=params["path"],
        requirements=params["requirements"],
        requirements_file=params["requirements_file"],
        wheelhouse=params["wheelhouse"],
        python=params["python"],
        timeout=params["timeout"],
        check_mode=module.check_mode,
    ).run(), VenvError)


if __name__ == "__main__":
    main()
