# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters shared by the serving paths. Thin wrappers: the logic is in plugins/plugin_utils/_engine_plan.py
and _engine_memory.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._plain import plain as _plain
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._engine_plan import run_plan
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._engine_memory import (
    balloon_targets, evict_paths, memory_gates, memory_report, short_message,
)


def engine_run_plan(probe, images=None, changes=None, config_now=None, config_started=None, config_written=False):
    """Leave alone, start or restart: see plugin_utils/_engine_plan.run_plan."""
    images = dict((int(rank), image) for rank, image in (_plain(images) or {}).items())
    config = dict(now=config_now, started=config_started, written=bool(config_written)) if config_now else None
    return run_plan(_plain(probe), images=images, changes=_plain(changes), config=config)


def engine_evict_paths(weights_by_node, extra=None):
    """``{node: [paths]}``: each node's weights folders and ``extra`` (prepared, sessions)."""
    return evict_paths(_plain(weights_by_node), _plain(extra))


def engine_memory_report(named, ballooned=None, gate_gib=0):
    """Each node's MemFree through the eviction before a start, and the nodes still under the gate."""
    gates = _plain(gate_gib)
    return memory_report(_plain(named), _plain(ballooned), gates if isinstance(gates, dict) else float(gates or 0))


def engine_memory_gates(named, gate_gib=0, fraction=0):
    """``{node: GiB}`` each node's engine waits for: ``gate_gib``, or ``fraction`` of its MemTotal."""
    return memory_gates(_plain(named), float(gate_gib or 0), float(fraction or 0))


def engine_balloon_targets(named, gates, margin_gib=0):
    """``{node: GiB}`` the balloon aims at on each node still under it: the gate and room for the start's own reads."""
    return balloon_targets(_plain(named), _plain(gates), float(margin_gib or 0))


def engine_memory_short(report, variable):
    """The failure message for the nodes engine_memory_report found short."""
    return short_message(_plain(report), str(variable))


class FilterModule(object):
    def filters(self):
        return {"engine_run_plan": engine_run_plan, "engine_memory_report": engine_memory_report,
                "engine_memory_short": engine_memory_short,
                "engine_memory_gates": engine_memory_gates, "engine_evict_paths": engine_evict_paths,
                "engine_balloon_targets": engine_balloon_targets}
