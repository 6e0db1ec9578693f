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
