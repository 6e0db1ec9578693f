# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Callback plugin dgx_spark.glm53.warm_plugins: loads this collection's filter and action
plugins once, in ansible-playbook's main process, before the first task forks a worker."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: warm_plugins
type: aggregate
short_description: Load the collection's filter and action plugins before any worker forks
description:
  - Ansible forks a worker process for every task on every host, and each worker loads the
    Jinja filters a template names. A filter named by its FQCN makes the worker import every
    filter file of its collection to find it (one file holds several filters), which cost about
    0.16 s of CPU per task and host here, four times a plain C(set_fact).
  - At the start of the playbook this callback loads them once in the main process, so every
    worker forked after it finds them already imported. It prints nothing and changes no result.
  - Enable it with C(callbacks_enabled = dgx_spark.glm53.warm_plugins) in C(ansible.cfg), as the
    collection's own C(ansible.cfg) does.
requirements:
  - Enabled in C(callbacks_enabled).
"""

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import action_loader, filter_loader, test_loader
from ansible.utils.display import Display

display = Display()

COLLECTION = "dgx_spark.glm53"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "dgx_spark.glm53.warm_plugins"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._warmed = False

    def _warm(self):
        if self._warmed:
            return
        self._warmed = True
        # Looking up a name that no file defines makes the Jinja loader import every filter (and
        # test) file of the collection, which is the whole point; then it finds none.
        for loader in (filter_loader, test_loader):
            try:
                loader.get_with_context(COLLECTION + "._warm_plugins_")
            except Exception as exc:  # pylint: disable=broad-except
                display.vvv("warm_plugins: %s: %s" % (loader.type, exc))
        for name in ("async_progress", "docker_runtime_plan", "preflight_report"):
            try:
                action_loader.get_with_context(COLLECTION + "." + name, class_only=True)
            except Exception as exc:  # pylint: disable=broad-except
                display.vvv("warm_plugins: action %s: %s" % (name, exc))

    def v2_playbook_on_start(self, playbook):
        self._warm()
