# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers of the offline_venv module: the pure part. Not a public API.

What the pins are, which wheel is pip's, the commands each method runs (``create_argv``,
``install_argv``) and the environment they run in, when the marker file still describes the
request, and what a pip failure means. No process is run and nothing is written here;
``_venv.OfflineVenv`` runs them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.dgx_spark.glm53.plugins.module_utils._wheel_lock import normalize

METHODS = ("venv", "venv-without-pip", "target")
MARKER = ".dgx_spark-requirements.json"
MARKER_SCHEMA = 1
TARGET_SITE = "site"
PINNED = re.compile(r"^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-(?P<python>[^-]+)-(?P<abi>[^-]+)"
                   r"-(?P<platform>[^-]+)\.whl$")
STDERR_LINES = 12


class VenvError(Exception):
    """A failure to report as the task's message."""


def parse_requirements(requirements):
    """``[(name, version)]`` sorted by normalized name, from ``name==version`` strings."""
    if not requirements:
        raise VenvError("requirements is empty; give the pinned packages as name==version, "
                        "for example ['huggingface_hub==2.4.0']")
    pinned, seen = [], {}
    for entry in requirements:
        match = PINNED.match(str(entry).strip())
        if not match:
            raise VenvError("requirement %r is not pinned as name==version; the install is offline and exact, "
                            "so every entry names one version (for example tqdm==4.70.1)" % (entry,))
        name, version = match.groups()
        key = normalize(name)
        if key in seen and seen[key] != version:
            raise VenvError("requirements pin %s twice, to %s and %s; keep one" % (name, seen[key], version))
        if key not in seen:
            seen[key] = version
            pinned.append((name, version))
    return sorted(pinned, key=lambda item: normalize(item[0]))


def requirement_strings(pinned):
    """The canonical, sorted ``name==version`` list (what the marker records)."""
    return ["%s==%s" % (normalize(name), version) for name, version in pinned]


def parse_wheel(filename):
    """``{name, version, python, abi, platform}`` of a wheel file name (name normalized), or None."""
    match = WHEEL.match(os.path.basename(filename))
    if not match:
        return None
    parts = match.groupdict()
    parts["name"] = normalize(parts["name"])
    return parts


def version_key(version):
    """Sort key for plain release versions (26.3 > 9.0.1); other parts sort as text after."""
    key = []
    for part in re.split(r"[.+!-]", version):
        key.append((0, int(part), "") if part.isdigit() else (1, 0, part))
    return key


def pip_wheel(filenames):
    """The newest ``pip-*.whl`` among the wheelhouse's files, or None."""
    pips = [name for name in filenames if (parse_wheel(name) or {}).get("name") == "pip"]
    if not pips:
        return None
    return max(pips, key=lambda name: version_key(parse_wheel(name)["version"]))


def wheels_named(name, filenames):
    """The wheels in the wheelhouse for distribution ``name``, sorted."""
    key = normalize(name)
    return sorted(item for item in filenames if (parse_wheel(item) or {}).get("name") == key)


def platform_label(interpreter):
    """``cp311 x86_64 (glibc 2.36)``: what a wheel has to match on this node."""
    major, minor = interpreter["version_info"]
    prefix = "cp" if interpreter.get("implementation") == "cpython" else interpreter.get("implementation", "py")
    label = "%s%d%d %s" % (prefix, major, minor, interpreter.get("machine") or "unknown-cpu")
    if interpreter.get("libc"):
        label += " (%s)" % interpreter["libc"]
    return label


def rebuild_hint(interpreter):
    """The controller command that makes a wheelhouse for this node."""
    major, minor = interpreter["version_info"]
    machine = interpreter.get("machine") or "<arch>"
    return ("Rebuild it on the controller for this node: pip download --only-binary=:all: "
            "--platform manylinux2014_{m} --platform manylinux_2_17_{m} --platform manylinux_2_28_{m} "
            "--python-version {x}.{y} --implementation cp --dest <dir> <requirements> pip==<version>, "
            "and copy <dir> to the node".format(m=machine, x=major, y=minor))


def packages(count):
    """``1 pinned package``, ``15 pinned packages``."""
    return "%d pinned package%s" % (count, "" if count == 1 else "s")


def tail(text, lines=STDERR_LINES):
    """The last lines of a command's output, for a message."""
    kept = [line for line in (text or "").strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def pip_environment(environ):
    """The environment for interpreters and pip: no inherited PYTHONPATH/PYTHONHOME/VIRTUAL_ENV,
    no user site, and no pip configuration at all (PIP_* variables dropped, config files
    skipped through ``PIP_CONFIG_FILE=/dev/null``), so an index, constraint or hash setting
    on the node cannot change an offline install."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PYTHONUSERBASE")
    env = dict((key, value) for key, value in environ.items()
               if not key.startswith("PIP_") and key not in dropped)
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def create_argv(python, method, path):
    """How ``method`` creates the environment (None for ``target``, which has nothing to create)."""
    if method == "venv":
        return [python, "-m", "venv", "--clear", path]
    if method == "venv-without-pip":
        return [python, "-m", "venv", "--clear", "--without-pip", path]
    return None


PIP_INSTALL_OPTIONS = ["install", "--no-index", "--only-binary=:all:", "--no-cache-dir",
                       "--disable-pip-version-check", "--no-input", "--no-warn-script-location"]


def install_argv(method, env_python, pip_wheel_path, wheelhouse, requirements, target=None):
    """The pip command that installs ``requirements`` from ``wheelhouse`` alone.

    ``venv`` uses the venv's pip; the other methods run pip from its wheel: with the venv's
    interpreter (the packages land in the venv) or, for ``target``, with the system
    interpreter into ``target``.
    """
    if method == "venv":
        argv = [env_python, "-m", "pip"]
    else:
        argv = [env_python, os.path.join(pip_wheel_path, "pip")]
    argv += PIP_INSTALL_OPTIONS + ["--find-links", wheelhouse]
    if method == "target":
        argv += ["--target", target]
    return argv + list(requirements)


def mismatches(pinned, installed):
    """``["tqdm: 4.70.1 wanted, 4.66.0 installed", "pyyaml: missing"]``, empty when all match."""
    wrong = []
    for name, version in pinned:
        found = installed.get(name)
        if found is None:
            wrong.append("%s: missing" % name)
        elif normalize(found) != normalize(version):
            wrong.append("%s: %s wanted, %s installed" % (name, version, found))
    return wrong


def marker_content(pinned, interpreter, method, pythonpath):
    """What the marker file records: enough to tell, without running pip, that nothing changed."""
    return {
        "schema": MARKER_SCHEMA,
        "requirements": requirement_strings(pinned),
        "python": {"executable": interpreter["executable"], "version": interpreter["version"]},
        "method": method,
        "pythonpath": pythonpath,
    }


def marker_differences(marker, pinned, interpreter):
    """Why an existing marker does not describe what is asked (empty when it does)."""
    if not isinstance(marker, dict) or marker.get("schema") != MARKER_SCHEMA:
        return ["no readable marker"]
    why = []
    if marker.get("requirements") != requirement_strings(pinned):
        why.append("requirements changed")
    python = marker.get("python") or {}
    if python.get("executable") != interpreter["executable"]:
        why.append("interpreter changed from %s to %s" % (python.get("executable"), interpreter["executable"]))
    elif str(python.get("version", "")).split(".")[:2] != str(interpreter["version"]).split(".")[:2]:
        why.append("Python changed from %s to %s" % (python.get("version"), interpreter["version"]))
    if marker.get("method") not in METHODS:
        why.append("unknown method %r" % marker.get("method"))
    return why


def pip_failure(result, wheelhouse, filenames, interpreter):
    """A message for a failed pip run: what failed, why, and the fix."""
    output = "%s\n%s" % (result.get("stdout") or "", result.get("stderr") or "")
    missing = re.findall(r"No matching distribution found for ([^\s;]+)", output)
    if missing:
        requirement = missing[0]
        name = re.split(r"[<>=!~ \[;(]", requirement, 1)[0]
        have = wheels_named(name, filenames)
        return ("the wheelhouse %s has no wheel for %s matching %s: it holds %s. %s. (`%s` said: %s)" % (
            wheelhouse, requirement, platform_label(interpreter),
            ", ".join(have) if have else "no wheel of %s at all" % name,
            rebuild_hint(interpreter), result["command"],
            tail(result.get("stderr"), 4)))
    if "ResolutionImpossible" in output or "conflicting dependencies" in output:
        return ("the pinned requirements conflict with each other: `%s` failed:\n%s\nFix: pin versions that "
                "agree (take the set from `pip install --dry-run --report` on the controller) and rebuild "
                "the wheelhouse" % (result["command"], tail(output)))
    if "No space left on device" in output:
        return "no space left while installing: `%s` failed:\n%s\nFix: free space on the node" % (
            result["command"], tail(output))
    return "`%s` failed (rc=%s):\n%s" % (result["command"], result.get("rc"), tail(output) or "(no output)")
