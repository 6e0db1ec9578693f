# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin behind dgx_spark.glm53.ops_install: hashes the program on the controller,
asks the node in one round trip, and sends the file (then asks again) only where the node
holds other bytes. Unlike ansible.builtin.copy it makes no remote temporary directory for a
node that is current (copy makes and removes one every run: two more round trips)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_install import file_sha256

_MODULE = "dgx_spark.glm53.ops_install"
_ARGS = frozenset(("src", "install_dir", "plan", "config_dir"))


class ActionModule(ActionBase):
    # The file is sent only when the node lacks it: the temporary directory is made then.
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        unknown = sorted(set(args) - _ARGS)
        if unknown:
            raise AnsibleActionFail("ops_install: unsupported option(s) %s; supported: %s"
                                    % (", ".join(unknown), ", ".join(sorted(_ARGS))))
        src = args.get("src")
        if not src or not isinstance(src, str):
            raise AnsibleActionFail("ops_install: src (the program on the controller) is required, found %r" % (src,))
        src = os.path.abspath(os.path.expanduser(src))
        # The same digest the node compares against (module_utils/_ops_install.py).
        args["_program_sha256"] = file_sha256(src)
        if args["_program_sha256"] is None:
            raise AnsibleActionFail("ops_install: cannot read %s on the controller (missing, or not a regular file); "
                                    "fix: run dgx_spark.glm53.ops_bundle first" % src)
        args["src"] = src
        try:
            found = self._execute_module(module_name=_MODULE, module_args=args, task_vars=task_vars)
            if found.pop("needs_program", False) and not found.get("failed"):
                self._make_tmp_path()
                shell = self._connection._shell
                remote = shell.join_path(shell.tmpdir, "glm53-ops")
                self._transfer_file(src, remote)
                self._fixup_perms2((shell.tmpdir, remote))
                found = self._execute_module(module_name=_MODULE, module_args=dict(args, _program_src=remote),
                                             task_vars=task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(found)
        return result
