# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wheelhouse a node installs from offline, built on the controller. Not a public API.

``pip_download_argv()`` is the ``pip download`` command that fetches, on the controller
(which reaches the package index), wheels for a node's platform, whatever the controller's
own platform: the node's Python X.Y and CPU (Ansible's ``ansible_python.version`` and
``ansible_architecture`` facts), binary wheels only, and the pip wheel that the
offline_venv module runs when the node has no pip of its own.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Ansible's architecture fact (``uname -m``) -> the CPU in manylinux platform tags.
WHEEL_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
# glibc baselines wheels are published for. DGX OS (Ubuntu 24.04) has glibc 2.39 and
# Debian 12 2.36, so all three apply; manylinux2014 is the legacy name of 2_17.
MANYLINUX = ("manylinux2014_%s", "manylinux_2_17_%s", "manylinux_2_28_%s")
PINNED = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?==[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
PYTHON_VERSION = re.compile(r"^(3)\.(\d+)(?:\.\d+)?(?:[a-z]+\d*)?$")


class WheelhouseError(ValueError):
    """A value the wheelhouse cannot be built from; the message names it and the fix."""


def wheel_arch(arch):
    """The manylinux CPU name for an ``ansible_architecture`` value."""
    try:
        return WHEEL_ARCH[str(arch).strip().lower()]
    except KeyError:
        raise WheelhouseError("architecture %r has no wheels here; expected one of %s (ansible_architecture)"
                              % (arch, ", ".join(sorted(WHEEL_ARCH))))


def python_x_y(version):
    """``3.12`` from ``3.12``, ``3.12.3`` or ``3.13.0rc1`` (``ansible_python.version`` parts joined)."""
    match = PYTHON_VERSION.match(str(version).strip())
    if not match:
        raise WheelhouseError("python version %r is not a CPython 3 version such as 3.12 or 3.12.3" % (version,))
    return "%s.%s" % match.groups()


def platform_tags(arch):
    """The ``--platform`` values for a node of this architecture."""
    cpu = wheel_arch(arch)
    return [tag % cpu for tag in MANYLINUX]


def pip_download_argv(arch, python_version, requirements, dest, pip_version, pip_command=("pip",)):
    """argv of ``pip download`` for a node's wheelhouse.

    ``requirements`` are pinned ``name==version`` strings (the install on the node is exact,
    so the wheelhouse is too); ``pip_version`` adds ``pip==<version>``, the wheel the node
    runs pip from. ``pip_command`` is how to call pip on the controller, for example
    ``[ansible_playbook_python, "-m", "pip"]``.
    """
    if isinstance(requirements, str) or not requirements:
        raise WheelhouseError("requirements must be a non-empty list of name==version strings, got %r"
                              % (requirements,))
    for requirement in requirements:
        if not isinstance(requirement, str) or not PINNED.match(requirement.strip()):
            raise WheelhouseError("requirement %r is not pinned as name==version; the wheelhouse holds exact "
                                  "versions only" % (requirement,))
    if not PINNED.match("pip==%s" % (pip_version,)):
        raise WheelhouseError("pip_version %r is not a version such as 26.3" % (pip_version,))
    if not dest:
        raise WheelhouseError("dest (the wheelhouse directory on the controller) is empty")
    argv = list(pip_command) + ["download", "--only-binary=:all:"]
    for tag in platform_tags(arch):
        argv += ["--platform", tag]
    argv += ["--python-version", python_x_y(python_version), "--implementation", "cp", "--dest", str(dest)]
    return argv + [requirement.strip() for requirement in requirements] + ["pip==%s" % pip_version]
