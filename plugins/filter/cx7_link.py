# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters behind the cx7_link role: plan probes and judge the nodes on the controller.

Thin wrappers: the logic lives in module_utils/_cx7_checks.py, which is unit-tested.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence

from ansible_collections.dgx_spark.glm53.plugins.module_utils._cx7_checks import (
    evaluate,
    probe_plan,
    report_table,
)

_CONFIG_KEYS = ("head", "workers", "master_port")


def _check_config(config, name):
    if not isinstance(config, dict):
        raise AnsibleFilterError("%s: config must be a dict, got %s" % (name, type(config).__name__))
    missing = [key for key in _CONFIG_KEYS if key not in config]
    if missing:
        raise AnsibleFilterError("%s: config lacks %s" % (name, ", ".join(missing)))
    if not is_sequence(config["workers"]):
        raise AnsibleFilterError("%s: config.workers must be a list" % name)


def _plain(observations):
    # Lazy hostvars proxies become plain dicts so the checks see ordinary data.
    return dict((node, dict(obs) if obs else {}) for node, obs in (observations or {}).items())


def cx7_link_probe_plan(observations, node, config):
    """What ``node`` probes: DF pings, the master-port probe role, the ssh target."""
    _check_config(config, "cx7_link_probe_plan")
    return probe_plan(config, _plain(observations), node)


def cx7_link_evaluate(observations, config):
    """All checks on all nodes: ``{status, nodes, checks, failures, warnings, nccl}``."""
    _check_config(config, "cx7_link_evaluate")
    return evaluate(_plain(observations), config)


def cx7_link_table(report):
    """The evaluation as fixed-width lines: one row per check, one column per node."""
    return report_table(report)


class FilterModule(object):
    def filters(self):
        return {
            "cx7_link_probe_plan": cx7_link_probe_plan,
            "cx7_link_evaluate": cx7_link_evaluate,
            "cx7_link_table": cx7_link_table,
        }
