# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helper: run a command on a worker over ssh, from the head. Not a public API.

The one place node-side code reaches another node by ssh (link_probe, wait_for_slots),
through ``_deadline.run_with_timeout``: stdin from /dev/null and a new session, so ssh
can never prompt, and the whole process group killed at the deadline.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shutil
import tempfile

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import run_with_timeout

# ssh's own exit status when it could not connect or authenticate (the remote command never ran).
SSH_FAILED = 255


def batch_options(connect_timeout, extra=None):
    """``extra`` first (ssh keeps the first value it sees for an option, so the caller's win),
    then BatchMode=yes and ConnectTimeout, as the kit reaches its worker."""
    return list(extra or []) + ["-o", "BatchMode=yes", "-o", "ConnectTimeout=%d" % connect_timeout]


def run_ssh(target, options, command, timeout):
    """``ssh <options> <target> <command>`` through run_with_timeout, plus ``target``. rc 255 is ssh's own failure."""
    result = run_with_timeout(["ssh"] + list(options) + [target, command], timeout)
    result["target"] = target
    return result


class SharedConnection(object):
    """One ssh connection per worker for a module's whole run (OpenSSH connection sharing).

    A long wait asks each worker many times; every login costs the worker (sshd, PAM, a
    session). ``options(target)`` gives plain options for a target's first command (a single
    check, a probe, costs no master) and from the second on a ControlMaster socket in a private
    directory, so the second login is the last. ``close()`` ends the masters and removes the
    directory. ``persist`` bounds a master's idle life, so a module killed before ``close()``
    leaves none behind for long. The caller's own ssh options come first and win (ssh keeps the
    first value of an option).
    """

    def __init__(self, persist=60, make_dir=None):
        self.persist = int(persist)
        self._make_dir = make_dir or (lambda: tempfile.mkdtemp(prefix="glm53-ssh-"))
        self.directory = None
        self.targets = set()
        self.asked = {}

    def options(self, target):
        self.asked[target] = self.asked.get(target, 0) + 1
        if self.asked[target] == 1:
            return []
        if self.directory is None:
            self.directory = self._make_dir()
        self.targets.add(target)
        return ["-o", "ControlMaster=auto", "-o", "ControlPath=%s/%%C" % self.directory,
                "-o", "ControlPersist=%d" % self.persist]

    def close(self, timeout=5):
        if self.directory is None:
            return
        for target in sorted(self.targets):
            run_with_timeout(["ssh", "-o", "ControlPath=%s/%%C" % self.directory, "-O", "exit", target], timeout)
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None
        self.targets = set()
