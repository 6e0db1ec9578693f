# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wheelhouse a node installs from offline, built on the controller. Not a public API.

``pip_download_argv()`` is the ``pip download`` command that fetches, on the controller
(which reaches the package index), wheels for a node's platform, whatever the controller's
own platform: the node's Python X.Y and CPU (Ansible's ``ansible_python.version`` and
``ansible_architecture`` facts), binary wheels only, and the pip wheel that the
offline_venv module runs when the node has no pip of its own.

``locked_download_argv()`` is the same download from a hash lock (module_utils/_wheel_lock.py),
so pip refuses a file whose sha256 the lock does not pin (the node_venv role's download).
``main()`` makes a role's lock (``make node-requirements``) from the pins in its
``roles/<role>/vars/main.yml``: a ``pip download`` from PyPI for every platform of
``LOCK_ARCHES`` x ``LOCK_PYTHONS``, then the sha256 of every wheel.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from ansible_collections.dgx_spark.glm53.plugins.module_utils._wheel_lock import render_lock, sha256_file, wheel_key

# Ansible's architecture fact (``uname -m``) -> the CPU in manylinux platform tags.
WHEEL_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
# glibc baselines wheels are published for. DGX OS (Ubuntu 24.04) has glibc 2.39 and
# Debian 12 2.36, so all three apply; manylinux2014 is the legacy name of 2_17.
MANYLINUX = ("manylinux2014_%s", "manylinux_2_17_%s", "manylinux_2_28_%s")
PINNED = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?==[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
PYTHON_VERSION = re.compile(r"^(3)\.(\d+)(?:\.\d+)?(?:[a-z]+\d*)?$")
# The node platforms the lock covers: DGX OS 7 (Ubuntu 24.04: Python 3.12, aarch64), the
# Debian 12 lab (3.11, x86_64), and 3.13. Not 3.10: filelock 4.3.1 requires Python 3.11.
LOCK_ARCHES = ("aarch64", "x86_64")
LOCK_PYTHONS = ("3.11", "3.12", "3.13")
# The lock is made from PyPI itself, whatever index or mirror the controller is configured with.
PYPI = "https://pypi.org/simple"


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


def locked_download_argv(arch, python_version, lock, dest, pip_command=("pip",)):
    """argv of ``pip download`` for a node's wheelhouse from the hash lock at ``lock``: pip
    checks each file it fetches against the lock's sha256 list and fails on any other."""
    if not lock or not dest:
        raise WheelhouseError("lock (the hash-locked requirements file) and dest (the wheelhouse directory on the "
                              "controller) must be set, found %r and %r" % (lock, dest))
    argv = list(pip_command) + ["download", "--require-hashes", "--only-binary=:all:"]
    for tag in platform_tags(arch):
        argv += ["--platform", tag]
    return argv + ["--python-version", python_x_y(python_version), "--implementation", "cp", "--dest", str(dest),
                   "-r", str(lock)]


def lock_entries(downloads):
    """``[{name, version, files}]`` for render_lock from ``{platform: {file name: sha256}}``
    (one ``pip download`` per platform). Every platform must get the same packages at the
    same versions, since the lock has no environment markers."""
    by_package, sets = {}, {}
    for platform in sorted(downloads):
        sets[platform] = set()
        for filename, digest in downloads[platform].items():
            key = wheel_key(filename)
            if key is None:
                raise WheelhouseError("%s: %s is not a wheel file name" % (platform, filename))
            sets[platform].add(key)
            entry = by_package.setdefault(key, {"name": key[0], "version": key[1], "files": {}})
            if entry["files"].get(filename, digest) != digest:
                raise WheelhouseError("%s was downloaded twice with different contents (%s, %s)" % (
                    filename, entry["files"][filename], digest))
            entry["files"][filename] = digest
    everywhere = set.intersection(*sets.values()) if sets else set()
    for platform in sorted(sets):
        extra = sorted(sets[platform] - everywhere)
        if extra:
            raise WheelhouseError("%s needs %s, which not every platform does; pin one set that every platform "
                                  "installs (the lock takes no markers)" % (
                                      platform, ", ".join("%s==%s" % key for key in extra)))
    return [by_package[key] for key in sorted(by_package)]


def lock_header(role, purpose, prefix=None):
    """The lock's header lines: what it holds, how it is used, and where its pins are
    (``<prefix>_requirements`` and ``<prefix>_pip_version`` in ``roles/<role>/vars/main.yml``)."""
    prefix = prefix or "_%s" % role
    return [
        "dgx_spark.glm53 role %s: %s, hash-locked." % (role, purpose),
        "The controller downloads with `pip download --require-hashes -r` this file and the nodes install",
        "with `pip install --require-hashes --no-index` (module offline_venv), which also checks every",
        "wheel against the `# sha256:<hex> <file>` lines before pip runs.",
        "Made by `make node-requirements` from %s_requirements and %s_pip_version in" % (prefix, prefix),
        "roles/%s/vars/main.yml: pip download from %s for each platform, then the" % (role, PYPI),
        "sha256 of each wheel. Regenerate it; never edit it by hand.",
    ]


def build_lock(requirements, pip_version, pip_command, header, index_url=PYPI):
    """The lock's text: ``pip download`` of ``requirements`` and ``pip==pip_version`` for every
    platform from ``index_url`` alone (``--isolated``: no pip configuration of this machine),
    then every wheel's sha256; ``header`` (lines) and the platforms on top."""
    work = tempfile.mkdtemp(prefix="node-requirements-")
    try:
        downloads = {}
        for arch in LOCK_ARCHES:
            for python in LOCK_PYTHONS:
                dest = os.path.join(work, "%s-%s" % (arch, python))
                argv = pip_download_argv(arch, python, requirements, dest, pip_version, pip_command=pip_command)
                argv += ["--isolated", "--no-cache-dir", "--index-url", index_url]
                proc = subprocess.run(argv, capture_output=True, text=True, check=False)
                if proc.returncode != 0:
                    raise WheelhouseError("`%s` failed (rc=%d):\n%s" % (
                        " ".join(argv), proc.returncode, proc.stderr.strip()[-3000:]))
                downloads["cp%s %s" % (python.replace(".", ""), arch)] = dict(
                    (name, sha256_file(os.path.join(dest, name))) for name in os.listdir(dest))
        platforms = "Platforms: CPython %s on manylinux %s." % (" ".join(LOCK_PYTHONS), " and ".join(LOCK_ARCHES))
        return render_lock(lock_entries(downloads), list(header) + [platforms])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def vars_role(path):
    """The role whose ``roles/<role>/vars/main.yml`` this is."""
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    if len(parts) < 4 or parts[-4] != "roles" or parts[-2] != "vars" or parts[-1] != "main.yml":
        raise WheelhouseError("--vars %s is not a role's roles/<role>/vars/main.yml" % (path,))
    return parts[-3]


def role_pins(pins, prefix, path):
    """(requirements, pip version) from a role's vars: ``<prefix>_requirements`` and ``<prefix>_pip_version``."""
    missing = [name for name in (prefix + "_requirements", prefix + "_pip_version") if name not in (pins or {})]
    if missing:
        raise WheelhouseError("%s has no %s; the lock is made from %s_requirements (name==version list) and "
                              "%s_pip_version" % (path, " or ".join(missing), prefix, prefix))
    return list(pins[prefix + "_requirements"]), str(pins[prefix + "_pip_version"])


def main(argv=None):
    """``make node-requirements``: write a role's lock from its pinned requirements."""
    import yaml  # the controller has it (ansible-core needs it); nodes never run this

    parser = argparse.ArgumentParser(description="Regenerate the hash-locked requirements of a role's node wheelhouse.")
    parser.add_argument("--vars", required=True, help="the role's vars, roles/<role>/vars/main.yml")
    parser.add_argument("--out", required=True, help="the lock, roles/<role>/files/requirements-node.txt")
    parser.add_argument("--purpose", required=True,
                        help="what the lock holds, for its first line: 'the Hugging Face client for the nodes'")
    parser.add_argument("--prefix", help="the pins' variable prefix (default _<role>: _<role>_requirements, "
                                         "_<role>_pip_version)")
    parser.add_argument("--index-url", default=PYPI)
    args = parser.parse_args(argv)
    try:
        role = vars_role(args.vars)
        prefix = args.prefix or "_%s" % role
        with open(args.vars) as handle:
            requirements, pip_version = role_pins(yaml.safe_load(handle), prefix, args.vars)
        text = build_lock(requirements, pip_version, (sys.executable, "-m", "pip"),
                          lock_header(role, args.purpose, prefix), index_url=args.index_url)
    except WheelhouseError as exc:
        parser.exit(1, "node-requirements: %s\n" % exc)
    with open(args.out + ".new", "w") as handle:
        handle.write(text)
    os.rename(args.out + ".new", args.out)
    print("wrote %s" % args.out)


if __name__ == "__main__":
    main()
