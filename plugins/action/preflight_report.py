# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin behind dgx_spark.glm53.preflight_report: runs on the controller only
(no module is sent to a node), so the report costs no round trip."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._preflight_render import gate_lines, report_lines
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._report_file import write_report


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "report", "title", "name", "note"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        missing = [key for key in ("path", "report") if not args.get(key)]
        if missing:
            raise AnsibleActionFail("preflight_report: %s required" % " and ".join(missing))
        report = args["report"]
        if not isinstance(report, dict) or not isinstance(report.get("checks"), list):
            raise AnsibleActionFail("preflight_report: report must be a preflight report (a dict with checks)")
        try:
            path = write_report(args["path"], report)
        except (IOError, OSError) as exc:
            raise AnsibleActionFail("preflight_report: cannot write %s on the controller: %s" % (args["path"], to_native(exc)))
        name = args.get("name") or "preflight"
        result.update(changed=False, path=path,
                      lines=report_lines(report, args.get("title") or "%s: %s" % (name, report.get("status"))),
                      gate=gate_lines(report, name, path, args.get("note") or "") if report.get("failures") else [])
        return result
