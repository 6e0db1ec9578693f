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


class FilterModule(object):
    def filters(self):
        return {"ops_plan_ranks": ops_plan_ranks}
