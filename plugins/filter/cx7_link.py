# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters behind the cx7_link role: plan the probes between nodes and judge them on
the controller. Thin wrappers: the logic lives in plugins/plugin_utils/_cx7_*.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_preflight import evaluate, probe_plan

_CONFIG_KEYS = ("head", "workers", "master_port", "nodes")


def _plain(value):
    """Lazy hostvars and tagged template values become plain data the checks can read."""
    if isinstance(value, dict):
        return dict((k, _plain(v)) for k, v in value.items())
    if is_sequence(value):
        return [_plain(v) for v in value]
    return value


def _check_config(config, name):
    if not isinstance(config, dict):
        raise AnsibleFilterError("%s: config must be a dict, got %s" % (name, type(config).__name__))
    missing = [key for key in _CONFIG_KEYS if key not in config]
    if missing:
        raise AnsibleFilterError("%s: config lacks %s" % (name, ", ".join(missing)))
    if not is_sequence(config["workers"]):
        raise AnsibleFilterError("%s: config.workers must be a list" % name)
    return _plain(config)


def cx7_link_probe_plan(facts_results, config):
    """What each node probes: ``{listen, nodes: {node: {pings, connect, ssh}}}``."""
    return probe_plan(_check_config(config, "cx7_link_probe_plan"), _plain(facts_results))


def cx7_link_evaluate(facts_results, config, probe_results=None, listen=None):
    """All checks on all nodes: ``{status, nodes, checks, failures, warnings, nccl, contract}``."""
    return evaluate(_check_config(config, "cx7_link_evaluate"), _plain(facts_results), _plain(probe_results),
                    _plain(listen))


def cx7_link_node_config(host_vars, defaults):
    """One node's configured link from its inventory values, else the role's defaults:
    ``{netdev, second_netdev, address, sysfs_root}``."""
    host_vars = host_vars or {}

    def pick(names, default):
        for name in names:
            if name in host_vars and host_vars[name] is not None:
                return host_vars[name]
        return default

    return {
        "netdev": pick(("glm53_link_netdev",), defaults.get("netdev")) or "auto",
        "second_netdev": pick(("glm53_link_second_netdev",), defaults.get("second_netdev")),
        "address": pick(("cx7_link_address", "glm53_link_address"), "") or "",
        "sysfs_root": pick(("glm53_sysfs_root",), defaults.get("sysfs_root")) or "/sys",
    }


class FilterModule(object):
    def filters(self):
        return {
            "cx7_link_probe_plan": cx7_link_probe_plan,
            "cx7_link_evaluate": cx7_link_evaluate,
            "cx7_link_node_config": cx7_link_node_config,
        }
