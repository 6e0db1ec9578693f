# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers of module ops_install: the operations program and the head's plan on one
node, each compared with what is there and replaced atomically only when it differs. Not a
public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import shutil
import stat
import tempfile

PROGRAM = "glm53-ops"
PLAN = "ops.json"
PROGRAM_MODE, PLAN_MODE, CONFIG_DIR_MODE, INSTALL_DIR_MODE = 0o755, 0o600, 0o700, 0o755


class InstallError(Exception):
    """What cannot be installed, with the path and the fix."""


def file_sha256(path):
    """The file's sha256, or None when it is not a readable regular file."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except (IOError, OSError):
        return None


def _mode(path):
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


def _replace(path, mode, write):
    """``write(handle)`` into a temporary file beside ``path``, then one rename over it."""
    handle, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=os.path.dirname(path))
    try:
        with os.fdopen(handle, "wb") as out:
            write(out)
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except Exception:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _directory(path, mode, enforce, check_mode):
    """Make ``path`` when missing (``mode``); with ``enforce``, also set the mode of one that is there.
    Whether anything changed."""
    if not os.path.isdir(path):
        if os.path.exists(path):
            raise InstallError("%s exists and is not a directory; fix: move it away and rerun" % path)
        if not check_mode:
            os.makedirs(path, mode)
            os.chmod(path, mode)
        return True
    if enforce and _mode(path) != mode:
        if not check_mode:
            os.chmod(path, mode)
        return True
    return False


def program_state(install_dir, sha256):
    """``{path, sha256, current}``: the installed program and whether it is these bytes at mode 0755."""
    path = os.path.join(install_dir, PROGRAM)
    found = file_sha256(path)
    return {"path": path, "sha256": found, "current": found == sha256 and _mode(path) == PROGRAM_MODE}


def install_program(install_dir, sha256, src, check_mode=False):
    """Put the program in ``src`` (a file on this node holding ``sha256``) in place. Whether it changed."""
    state = program_state(install_dir, sha256)
    if state["current"]:
        return False
    if state["sha256"] == sha256:
        # The right bytes at another mode: only the mode.
        if not check_mode:
            os.chmod(state["path"], PROGRAM_MODE)
        return True
    if check_mode:
        return True
    got = file_sha256(src) if src else None
    if got != sha256:
        raise InstallError("the program sent to %s has sha256 %s, expected %s; fix: rerun (the copy was cut short)"
                           % (src, got, sha256))
    _directory(install_dir, INSTALL_DIR_MODE, False, check_mode)

    def copy(out):
        with open(src, "rb") as handle:
            shutil.copyfileobj(handle, out)

    _replace(state["path"], PROGRAM_MODE, copy)
    return True


def record_plan(config_dir, text, check_mode=False):
    """Write ``text`` to ops.json (mode 0600) in ``config_dir`` (mode 0700) unless it holds it. Whether it changed."""
    changed = _directory(config_dir, CONFIG_DIR_MODE, True, check_mode)
    path = os.path.join(config_dir, PLAN)
    data = text.encode("utf-8")
    try:
        with open(path, "rb") as handle:
            same = handle.read() == data
    except (IOError, OSError):
        same = False
    if same and _mode(path) == PLAN_MODE:
        return changed
    if not check_mode:
        _replace(path, PLAN_MODE, lambda out: out.write(data))
    return True
