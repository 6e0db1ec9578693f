# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin behind dgx_spark.glm53.ops_bundle: builds the operations program in the
controller's own process (no module run, no Python started), so a rerun's check of it costs
no round trip."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._ops_bundle import write


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("dest",))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        dest = self._task.args.get("dest")
        if not dest or not isinstance(dest, str):
            raise AnsibleActionFail("ops_bundle: dest (a path on the controller) is required, found %r" % (dest,))
        dest = os.path.abspath(os.path.expanduser(dest))
        try:
            written = write(dest)
        except (IOError, OSError) as exc:
            raise AnsibleActionFail("ops_bundle: cannot write %s on the controller: %s; fix: make its directory "
                                    "writable for this user and rerun" % (dest, to_native(exc)))
        # A controller-side cache, not a change to any node: the copy to the nodes says that.
        result.update(changed=False, dest=dest, written=written)
        return result
