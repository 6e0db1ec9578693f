# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin behind dgx_spark.glm53.docker_runtime_plan: judges a node's
docker_runtime_info on the controller (no module is sent, nothing becomes root) and
reads whether the play allows become (-b, the play's or role's ``become``,
``ansible_become``) from the task's own connection settings, which no variable shows."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._docker_runtime import plan


def _plain(value):
    """Lazy or tagged template values as plain data for the judgment."""
    if isinstance(value, dict):
        return dict((k, _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("probe", "settings", "platform", "final"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        probe = args.get("probe")
        if not isinstance(probe, dict) or "user" not in probe or "daemon" not in probe:
            raise AnsibleActionFail("docker_runtime_plan: probe must be the result of dgx_spark.glm53.docker_runtime_info")
        settings = args.get("settings") or {}
        if not isinstance(settings, dict):
            raise AnsibleActionFail("docker_runtime_plan: settings must be a dict")
        node = (task_vars or {}).get("inventory_hostname") or "this node"
        decided = plan(_plain(probe), _plain(settings), node, become=bool(self._play_context.become),
                       check_mode=bool(self._task.check_mode), final=bool(args.get("final")),
                       platform=_plain(args.get("platform") or {}))
        result.update(decided)
        result["changed"] = decided["changed"]
        if decided["failures"]:
            result["failed"] = True
            result["msg"] = "\n".join(decided["failures"])
        else:
            result["msg"] = "\n".join(decided["summary"])
        return result
