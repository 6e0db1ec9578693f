# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers of the offline_venv module: a Python environment with pinned packages,
installed offline from a wheelhouse, without root. Not a public API.

Three ways to make the environment, tried in this order (``METHODS``):

``venv``
    ``python -m venv PATH``, then the venv's own pip. Needs ensurepip, which Debian and
    Ubuntu ship apart from Python (package python3-venv), so a user without sudo may not have it.
``venv-without-pip``
    ``python -m venv --without-pip PATH``, then pip run from its wheel in the wheelhouse
    (``PATH/bin/python WHEELHOUSE/pip-X-py3-none-any.whl/pip install ...``; pip's
    ``__main__`` puts its wheel on ``sys.path`` for exactly this use).
``target``
    No venv module at all: ``python PIP_WHEEL/pip install --target PATH/site``, used with
    the system interpreter and ``PYTHONPATH=PATH/site``.

``OfflineVenv.run()`` decides what is needed (nothing when the marker file and the
installed versions agree with the request), does it through ``run_with_timeout`` and
returns the module result. The pure parts (pins, commands, the marker, pip's failures) are
``_venv_plan``'s.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import time

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import command_string, run_with_timeout
from ansible_collections.dgx_spark.glm53.plugins.module_utils._files import read_text, write_atomic
from ansible_collections.dgx_spark.glm53.plugins.module_utils._wheel_lock import LockError, check_wheels, read_lock
from ansible_collections.dgx_spark.glm53.plugins.module_utils._venv_plan import (
    MARKER, METHODS, TARGET_SITE, VenvError, create_argv, install_argv, marker_content, marker_differences,
    mismatches, packages, parse_requirements, pip_environment, pip_failure, pip_wheel, platform_label, tail)

# Parts of a venv that a failed attempt may leave behind, removed before a target install.
VENV_PARTS = ("bin", "include", "lib", "lib64", "pyvenv.cfg")
# How many seconds a probe of an interpreter may take (it imports nothing heavy).
PROBE_TIMEOUT = 60

# What the interpreter named by the `python` option is. Runs on Python 3.6+ so that an
# old interpreter is named in a message rather than failing obscurely.
INTERPRETER_PROBE = r"""
import json, os, platform, sys
def has(name):
    try:
        import importlib.util
        return importlib.util.find_spec(name) is not None
    except Exception:
        return False
print(json.dumps({
    "version": platform.python_version(),
    "version_info": list(sys.version_info[:2]),
    "implementation": sys.implementation.name,
    "executable": os.path.realpath(sys.executable),
    "machine": platform.machine(),
    "libc": " ".join(part for part in platform.libc_ver() if part),
    "venv": has("venv"),
    "ensurepip": has("ensurepip"),
    "metadata": has("importlib.metadata"),
}))
"""

# Installed versions, as the environment's own interpreter sees them. argv: a JSON list of
# directories to search ([] = the interpreter's sys.path), then distribution names.
INSTALLED_PROBE = r"""
import json, os, platform, sys
from importlib import metadata
path = json.loads(sys.argv[1]) or None
installed = {}
for name in sys.argv[2:]:
    found = [dist.version for dist in metadata.Distribution.discover(name=name, path=path or sys.path)]
    installed[name] = found[0] if found else None
print(json.dumps({"version": platform.python_version(), "version_info": list(sys.version_info[:2]),
                  "prefix": os.path.realpath(sys.prefix), "installed": installed}))
"""


def nearest_existing(path):
    """``path`` or its closest existing ancestor."""
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


class OfflineVenv:
    """One run of the module: inspect, decide, act, verify."""

    def __init__(self, path, requirements, wheelhouse, python="python3", timeout=600, check_mode=False,
                 environ=None, requirements_file=None):
        self.path = os.path.abspath(path)
        # With a hash lock, the pins are the lock's, pip runs with --require-hashes, and pip's
        # own wheel is one the lock pins and this module checked (it runs before pip checks).
        self.lock, self.lock_path, self.lock_digest = None, None, None
        if requirements_file:
            self.lock_path = os.path.abspath(requirements_file)
            try:
                self.lock, self.lock_digest = read_lock(self.lock_path)
            except LockError as exc:
                raise VenvError(str(exc))
            requirements = ["%s==%s" % (entry["name"], entry["version"]) for entry in self.lock]
        self.pinned = parse_requirements(requirements)
        self.runnable = []
        self.wheelhouse = os.path.abspath(wheelhouse)
        self.python = python
        self.timeout = float(timeout)
        self.check_mode = check_mode
        self.env = pip_environment(os.environ if environ is None else environ)
        self.deadline = time.monotonic() + self.timeout
        self.commands = []
        self.filenames = []
        self.interpreter = None

    # -- running commands ---------------------------------------------------------------------
    def _remaining(self, what):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise VenvError("the timeout of %gs was spent before %s; raise timeout" % (self.timeout, what))
        return left

    def _run(self, argv, what, limit=None, env=None, record=True):
        left = self._remaining(what)
        result = run_with_timeout(argv, min(left, limit) if limit else left, env=env or self.env)
        if record:
            self.commands.append(result["command"])
        if result["timed_out"]:
            raise VenvError("%s: %s; raise timeout (now %gs) if the node is just slow" % (
                what, result["error"], self.timeout))
        return result

    def _json(self, result, what):
        try:
            return json.loads(result["stdout"].strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise VenvError("%s: `%s` printed no result (rc=%s):\n%s" % (
                what, result["command"], result["rc"], tail(result["stdout"] + "\n" + result["stderr"])))

    # -- inspecting ---------------------------------------------------------------------------
    def check_path(self):
        """Refuse a path this module must not clear, before anything runs."""
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise VenvError("path %s exists and is not a directory; choose another path" % self.path)
        if os.path.isdir(self.path) and os.listdir(self.path) and not self._looks_ours():
            raise VenvError("path %s exists, is not empty and holds neither a virtualenv (pyvenv.cfg) nor %s; "
                            "refusing to clear it: choose another path or empty it" % (self.path, MARKER))

    def check_work_inputs(self):
        """What installing needs: a wheelhouse with a pip wheel, and a path this user may write."""
        if not os.path.isdir(self.wheelhouse):
            raise VenvError("wheelhouse %s is not a directory on this node; copy the wheelhouse built on the "
                            "controller there first" % self.wheelhouse)
        try:
            self.filenames = sorted(name for name in os.listdir(self.wheelhouse) if name.endswith(".whl"))
        except OSError as exc:
            raise VenvError("cannot list wheelhouse %s: %s" % (self.wheelhouse, exc.strerror or exc))
        self.runnable = self.filenames
        if self.lock:
            try:
                self.runnable = check_wheels(self.wheelhouse, self.filenames, self.lock, self.lock_path)
            except LockError as exc:
                raise VenvError(str(exc))
        if pip_wheel(self.runnable) is None:
            raise VenvError("wheelhouse %s has no pip-*.whl%s (it holds %d wheels); add pip to the download "
                            "(pip==<version> on the pip download line) so the node can install without its "
                            "own pip" % (self.wheelhouse, " that the lock pins" if self.lock else "",
                                         len(self.filenames)))
        existing = nearest_existing(self.path)
        if not os.access(existing, os.W_OK | os.X_OK):
            raise VenvError("path %s: %s is not writable by this user (uid %d), and this module never uses sudo; "
                            "choose a path the deploy user owns, e.g. under its home" % (
                                self.path, existing, os.getuid()))

    def _looks_ours(self):
        return any(os.path.exists(os.path.join(self.path, name)) for name in (MARKER, "pyvenv.cfg"))

    def probe_interpreter(self):
        result = self._run([self.python, "-c", INTERPRETER_PROBE], "probing the interpreter %s" % self.python,
                           limit=PROBE_TIMEOUT, record=False)
        if result["error"]:
            raise VenvError("python %s cannot run on this node: %s; set python to an interpreter that exists "
                            "(e.g. /usr/bin/python3)" % (self.python, result["error"]))
        info = self._json(result, "probing python %s" % self.python)
        if info["version_info"] < [3, 8] or not info["metadata"]:
            raise VenvError("python %s is Python %s; this module needs Python 3.8 or later (importlib.metadata)"
                            % (self.python, info["version"]))
        self.interpreter = info
        return info

    def read_marker(self):
        text = read_text(os.path.join(self.path, MARKER))
        try:
            return json.loads(text) if text else None
        except ValueError:
            return None

    def environment_python(self, method):
        """(interpreter, pythonpath) that runs the environment ``method`` makes."""
        if method == "target":
            return self.interpreter["executable"], os.path.join(self.path, TARGET_SITE)
        return os.path.join(self.path, "bin", "python"), ""

    def installed(self, method, extra=()):
        """``{name: version|None}`` as the environment sees it, or None when its interpreter does
        not run or is another Python version than asked."""
        env_python, pythonpath = self.environment_python(method)
        if method != "target" and not os.path.exists(env_python):
            return None
        names = [name for name, version in self.pinned] + list(extra)
        search = [pythonpath] if pythonpath else []
        result = self._run([env_python, "-c", INSTALLED_PROBE, json.dumps(search)] + names,
                           "reading the installed versions", limit=PROBE_TIMEOUT, record=False)
        if result["rc"] != 0:
            return None
        info = self._json(result, "reading the installed versions")
        if info["version_info"] != self.interpreter["version_info"]:
            return None
        if method != "target" and info["prefix"] != os.path.realpath(self.path):
            return None
        return info["installed"]

    # -- deciding -----------------------------------------------------------------------------
    def first_method(self):
        """The method to try first for a new environment."""
        if not self.interpreter["venv"]:
            return "target"
        return "venv" if self.interpreter["ensurepip"] else "venv-without-pip"

    def assess(self):
        """``(state, method, why)``: ``ok`` (nothing to do), ``repair`` (install into the existing
        environment with ``method``) or ``create`` (make it anew, starting with ``method``)."""
        marker = self.read_marker()
        if marker:
            method = marker.get("method")
            why = marker_differences(marker, self.pinned, self.interpreter)
            if not isinstance(marker, dict) or marker.get("lock") != self.lock_digest:
                why.append("hash lock changed")
            installed = self.installed(method, extra=["pip"]) if method in METHODS else None
            if installed is None:
                return "create", self.first_method(), why + ["its interpreter does not run as %s %s" % (
                    self.interpreter["executable"], self.interpreter["version"])]
            wrong = mismatches(self.pinned, installed)
            if not why and not wrong:
                return "ok", method, []
            # A new lock makes it anew: pip leaves installed packages alone, so only a fresh
            # environment is known to hold nothing but wheels checked against this lock.
            if any(reason.startswith(("interpreter changed", "Python changed", "unknown method", "hash lock"))
                   for reason in why):
                return "create", self.first_method(), why
            if method == "venv" and not installed.get("pip"):
                method = "venv-without-pip"  # its pip was removed: use the wheel's
            return "repair", method, why + wrong
        if os.path.exists(os.path.join(self.path, "pyvenv.cfg")):
            # A virtualenv made some other way: keep it when it runs as asked.
            installed = self.installed("venv", extra=["pip"])
            if installed is not None:
                return "repair", "venv" if installed.get("pip") else "venv-without-pip", ["no marker"] + mismatches(
                    self.pinned, installed)
            return "create", self.first_method(), ["an existing virtualenv that does not run as %s %s" % (
                self.interpreter["executable"], self.interpreter["version"])]
        return "create", self.first_method(), ["no environment yet"]

    # -- acting -------------------------------------------------------------------------------
    def _pip_wheel_path(self):
        return os.path.join(self.wheelhouse, pip_wheel(self.runnable))

    def _install_argv(self, method):
        env_python, pythonpath = self.environment_python(method)
        target = pythonpath + ".new" if method == "target" else None
        requirements = (["--require-hashes", "-r", self.lock_path] if self.lock
                        else ["%s==%s" % item for item in self.pinned])
        return install_argv(method, env_python, self._pip_wheel_path(), self.wheelhouse, requirements, target=target)

    def install(self, method):
        """Install the requirements with ``method`` into the environment (made already, except for
        ``target``, which installs into a fresh directory and swaps it in)."""
        if method == "target":
            site = os.path.join(self.path, TARGET_SITE)
            for part in VENV_PARTS + (TARGET_SITE + ".new",):
                self._remove(os.path.join(self.path, part))
            if not os.path.isdir(self.path):
                os.makedirs(self.path, 0o755)
        result = self._run(self._install_argv(method), "installing the requirements")
        if result["rc"] != 0 or result["error"]:
            raise VenvError(pip_failure(result, self.wheelhouse, self.filenames, self.interpreter))
        if method == "target":
            self._remove(site + ".old")
            if os.path.exists(site):
                os.rename(site, site + ".old")
            os.rename(site + ".new", site)
            self._remove(site + ".old")

    @staticmethod
    def _remove(path):
        if os.path.islink(path) or os.path.isfile(path):
            os.unlink(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)

    def skipped(self, method):
        """Why the methods before ``method`` are not tried: the probe showed what they need is missing."""
        if method == "venv-without-pip":
            return ["%s has no ensurepip (on Debian/Ubuntu it comes with python3-venv, which needs root)"
                    % self.python]
        if method == "target":
            return ["%s has no venv module" % self.python]
        return []

    def create(self, method):
        """Make the environment with ``method`` or the fallbacks after it; returns the method used
        and the reasons earlier methods were given up."""
        notes = self.skipped(method)
        order = list(METHODS[METHODS.index(method):])
        for current in order:
            argv = create_argv(self.python, current, self.path)
            if argv is None:
                return current, notes
            result = self._run(argv, "creating the virtualenv")
            if result["rc"] == 0 and not result["error"]:
                return current, notes
            output = "%s\n%s" % (result["stdout"], result["stderr"])
            if current == "venv" and "ensurepip" in output:
                # Debian/Ubuntu without python3-venv; only root could install it.
                notes.append("`%s` failed: ensurepip is not available (python3-venv is not installed)"
                             % result["command"])
                continue
            if current == "venv-without-pip" and "No module named venv" in output:
                notes.append("`%s` failed: the venv module is not available" % result["command"])
                continue
            raise VenvError("`%s` failed (rc=%s):\n%s\nFix: make %s creatable by this user or choose another "
                            "path" % (result["command"], result["rc"], tail(output) or result["error"], self.path))
        raise VenvError("no way to create the environment worked: %s" % "; ".join(notes))

    # -- the whole run -------------------------------------------------------------------------
    def run(self):
        self.check_path()
        self.probe_interpreter()
        state, method, why = self.assess()
        if state == "ok":
            return self._result(False, method, "%s already holds the %s (%s); nothing to do" % (
                self.path, packages(len(self.pinned)), method), self._installed_or_fail(method))
        self.check_work_inputs()
        if self.check_mode:
            return self._planned(state, method, why)
        notes = []
        if state == "create":
            method, notes = self.create(method)
        self.install(method)
        installed = self._installed_or_fail(method)
        wrong = mismatches(self.pinned, installed)
        if wrong:
            raise VenvError("pip reported success but the environment at %s does not hold the pins: %s" % (
                self.path, "; ".join(wrong)))
        env_python, pythonpath = self.environment_python(method)
        marker = marker_content(self.pinned, self.interpreter, method, pythonpath)
        if self.lock_digest:
            marker["lock"] = self.lock_digest
        write_atomic(os.path.join(self.path, MARKER), json.dumps(marker, indent=1, sort_keys=True) + "\n")
        verb = "repaired" if state == "repair" else "created"
        msg = "%s %s with %s (%s): %s installed offline from %s" % (
            verb, self.path, method, ", ".join(why) or "as asked", packages(len(self.pinned)), self.wheelhouse)
        if notes:
            msg += "; " + "; ".join(notes)
        return self._result(True, method, msg, installed)

    def _installed_or_fail(self, method):
        installed = self.installed(method)
        if installed is None:
            env_python, pythonpath = self.environment_python(method)
            raise VenvError("the environment at %s does not run: %s%s fails or is not Python %s" % (
                self.path, "PYTHONPATH=%s " % pythonpath if pythonpath else "", env_python,
                self.interpreter["version"]))
        return dict((name, installed.get(name)) for name, version in self.pinned)

    def _planned(self, state, method, why):
        """Check mode: what would run, nothing run."""
        planned = []
        if state == "create":
            argv = create_argv(self.python, method, self.path)
            if argv:
                planned.append(command_string(argv))
        planned.append(command_string(self._install_argv(method)))
        self.commands = planned
        msg = "would %s %s with %s (%s) and install %s offline from %s" % (
            state, self.path, method, ", ".join(why), packages(len(self.pinned)), self.wheelhouse)
        if state == "create" and self.skipped(method):
            msg += "; " + "; ".join(self.skipped(method))
        return self._result(True, method, msg, {})

    def _result(self, changed, method, msg, installed):
        env_python, pythonpath = self.environment_python(method)
        return {
            "changed": changed,
            "msg": msg,
            "method": method,
            "python": env_python,
            "pythonpath": pythonpath,
            "installed": installed,
            "python_version": self.interpreter["version"],
            "platform": platform_label(self.interpreter),
            "commands": self.commands,
            "wheels_checked": list(self.runnable) if self.lock else [],
        }
