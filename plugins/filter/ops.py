# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the operations plan. Thin wrappers: the logic is in plugins/plugin_utils/_ops_plan.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._plain import plain as _plain
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._ops_plan import ops_ranks


def ops_plan_ranks(contract, path, evict_paths=None, disk_paths=None, specs=None):
    """The ranks of ops.json, head first: see plugin_utils/_ops_plan.ops_ranks."""
    return ops_ranks(_plain(contract), str(path), evict_paths=_plain(evict_paths), disk_paths=_plain(disk_paths),
                     specs=_plain(specs))


def ops_stop_words(entry):
    """``glm53-vllm removed (was running)`` from one entry of glm53-ops stop's ``stopped``."""
    entry = _plain(entry)
    words = str(entry.get("result") or "").split(" ", 1)
    return "%s %s%s" % (entry.get("container"), words[0], " (was %s)" % words[1] if len(words) > 1 else "")


class FilterModule(object):
    def filters(self):
        return {"ops_plan_ranks": ops_plan_ranks, "ops_stop_words": ops_stop_words}
