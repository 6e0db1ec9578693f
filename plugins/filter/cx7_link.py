# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters behind the cx7_link role: plan the probes between nodes and judge them on
the controller. Thin wrappers: the logic lives in plugins/plugin_utils/_cx7_*.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._plain import plain as _plain
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._cx7_preflight import evaluate, probe_plan
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._site_spec import site_default

_CONFIG_KEYS = ("head", "workers", "master_port", "nodes")


def _check_config(config, name):
    if not isinstance(config, dict):
        raise AnsibleFilterError("%s: config must be a dict, got %s" % (name, type(config).__name__))
    missing = [key for key in _CONFIG_KEYS if key not in config]
    if missing:
        raise AnsibleFilterError("%s: config lacks %s" % (name, ", ".join(missing)))
    if not is_sequence(config["workers"]):
        raise AnsibleFilterError("%s: config.workers must be a list" % name)
    return _plain(config)


def cx7_link_probe_plan(facts_results, config, together=False):
    """What each node probes: ``{listen, nodes: {node: {pings, connect, ssh, listen}}}``;
    ``together``: every node probes in the same task at once, the head listening in its own."""
    return probe_plan(_check_config(config, "cx7_link_probe_plan"), _plain(facts_results), bool(together))


def cx7_link_evaluate(facts_results, config, probe_results=None, listen=None):
    """All checks on all nodes: ``{status, nodes, checks, failures, warnings, nccl, contract}``."""
    return evaluate(_check_config(config, "cx7_link_evaluate"), _plain(facts_results), _plain(probe_results),
                    _plain(listen))


def cx7_link_by_node(nodes, host_vars, name, others=None):
    """``{node: result}`` for each node: what a task run on every node of the play's batch at
    once registered under ``name`` (in ``host_vars``), and for a node outside the batch (``serial``)
    its item in ``others``, the loop results of the same task delegated to each such node.
    ``{}`` for a node with neither (judged "not gathered")."""
    if not is_sequence(nodes):
        raise AnsibleFilterError("cx7_link_by_node: nodes must be a list, got %s" % type(nodes).__name__)
    delegated = {}
    for entry in _plain(others) or []:
        if isinstance(entry, dict) and entry.get("item") is not None:
            delegated[entry["item"]] = entry
    out = {}
    for node in nodes:
        if node in delegated:
            out[node] = delegated[node]
            continue
        try:
            value = host_vars[node].get(name)
        except (KeyError, AttributeError, TypeError):
            value = None
        out[node] = _plain(value) if isinstance(value, dict) else {}
    return out


def cx7_link_node_config(host_vars, explicit):
    """One node's configured link: ``{netdev, second_netdev, address, sysfs_root}``.

    ``explicit`` holds the role's inputs (cx7_link_netdev, cx7_link_second_netdev,
    cx7_link_sysfs_root); one that is set (not None) is used on every node, over the
    node's own glm53_* value: an operator's -e is never silently overridden by the
    inventory's ``glm53_link_netdev: auto``. Otherwise each node's own site value, else
    the site default (meta/site_argument_spec.yml). The address is only ever the node's
    glm53_link_address: it differs per node, so no role-wide input can stand for it.
    """
    host_vars = host_vars or {}
    explicit = explicit or {}

    def pick(key, site_name):
        if explicit.get(key) is not None:
            return explicit[key]
        if site_name in host_vars and host_vars[site_name] is not None:
            return host_vars[site_name]
        return site_default(site_name)

    return {
        "netdev": pick("netdev", "glm53_link_netdev") or "auto",
        "second_netdev": pick("second_netdev", "glm53_link_second_netdev"),
        "address": pick("address", "glm53_link_address") or "",
        "sysfs_root": pick("sysfs_root", "glm53_sysfs_root") or "/sys",
    }


class FilterModule(object):
    def filters(self):
        return {
            "cx7_link_probe_plan": cx7_link_probe_plan,
            "cx7_link_evaluate": cx7_link_evaluate,
            "cx7_link_node_config": cx7_link_node_config,
            "cx7_link_by_node": cx7_link_by_node,
        }
