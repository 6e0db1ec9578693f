# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin behind dgx_spark.glm53.async_progress: waits for an async job on the
node like async_status, and meanwhile prints the job's progress file as one line every
``interval`` seconds, so an hour-long download is not an hour of silence."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import math
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._progress import (
    human_duration, parse_progress, progress_line)

display = Display()

_ARGS = {
    "jid": {"type": "str", "required": True},
    "progress_file": {"type": "str", "default": ""},
    "log_file": {"type": "str", "default": ""},
    "label": {"type": "str", "default": "job"},
    "interval": {"type": "int", "default": 10},
    "poll": {"type": "float", "default": 1.0},
    "timeout": {"type": "int", "default": 14400},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(_ARGS)

    def _async_dir(self):
        return self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))

    def _status(self, jid, task_vars, mode="status"):
        return self._execute_module(module_name="ansible.legacy.async_status", task_vars=task_vars,
                                    module_args={"jid": jid, "mode": mode, "_async_dir": self._async_dir()})

    def _wait_while_running(self, jid, poll, seconds):
        """Wait on the node, up to ``seconds``, while the job's results file still says it runs:
        one round trip of a shell loop (cat, sleep) instead of an async_status module run (a
        Python start on the node) every ``poll`` seconds. The loop waits only while the file
        holds exactly what ansible-core's async_wrapper writes when the job starts, so any
        other content (the result, or another version's format) ends it at once and
        async_status decides, as before."""
        running = json.dumps({"started": True, "finished": False, "ansible_job_id": jid})
        shell = self._connection._shell
        path = shell.join_path(self._async_dir(), jid)
        steps = max(1, int(math.ceil(seconds / poll)))
        cmd = ('f=%s; r=%s; i=0; while [ "$i" -lt %d ] && [ "$(cat "$f" 2>/dev/null)" = "$r" ]; do '
               'sleep %s; i=$((i+1)); done' % (shell.quote(path), shell.quote(running), steps, poll))
        self._low_level_execute_command(cmd)

    def _progress(self, path, task_vars):
        if not path:
            return {}
        read = self._execute_module(module_name="ansible.legacy.slurp", module_args={"src": path},
                                    task_vars=task_vars)
        if read.get("failed") or "content" not in read:
            return {}
        try:
            return parse_progress(base64.b64decode(read["content"]).decode("utf-8", "replace"))
        except (TypeError, ValueError):
            return {}

    def _last_line(self, path):
        """The log file's last line, read with tail on the node (the log may be large)."""
        if not path:
            return ""
        quoted = self._connection._shell.quote(self._remote_expand_user(path))
        res = self._low_level_execute_command("tail -n 1 %s 2>/dev/null" % quoted)
        return (res.get("stdout") or "").strip()[-300:]

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        valid, args = self.validate_argument_spec(argument_spec=_ARGS)
        del valid
        if args["interval"] < 1 or args["timeout"] < 1 or args["poll"] <= 0:
            raise AnsibleActionFail("async_progress: interval and timeout must be >= 1 and poll > 0")
        host = task_vars.get("inventory_hostname", "?") if task_vars else "?"
        if self._task.delegate_to:
            host = "%s via %s" % (host, self._task.delegate_to) if self._task.delegate_to != host else host
        start = time.monotonic()
        last_print = start
        while True:
            status = self._status(args["jid"], task_vars)
            if status.get("finished"):
                break
            if status.get("failed") and not status.get("started", True):
                raise AnsibleActionFail("async_progress: job %s on %s: %s" % (args["jid"], host, status.get("msg")))
            now = time.monotonic()
            if now - start > args["timeout"]:
                result.update(failed=True, ansible_job_id=args["jid"],
                              msg="%s on %s did not finish within %s (async job %s is still running on the node)"
                                  % (args["label"], host, human_duration(args["timeout"]), args["jid"]))
                return result
            if now - last_print >= args["interval"]:
                last_print = now
                progress = self._progress(args["progress_file"], task_vars)
                last = self._last_line(args["log_file"])
                if last:
                    progress["message"] = last
                display.display(progress_line(host, args["label"], progress, now - start))
            # Until the next progress line is due (or the timeout), never less than one poll.
            budget = min(args["interval"] - (now - last_print), args["timeout"] - (now - start))
            began = time.monotonic()
            self._wait_while_running(args["jid"], args["poll"], max(budget, args["poll"]))
            spent = time.monotonic() - began
            if spent < args["poll"]:
                time.sleep(args["poll"] - spent)
        self._status(args["jid"], task_vars, mode="cleanup")
        for key in ("ansible_job_id", "started", "finished", "results_file", "erased"):
            status.pop(key, None)
        result.update(status)
        result["elapsed"] = result.get("elapsed", round(time.monotonic() - start, 1))
        return result
