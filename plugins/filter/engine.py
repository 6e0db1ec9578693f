# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters shared by the serving paths. Thin wrappers: the logic is in plugins/plugin_utils/_engine_plan.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._plain import plain as _plain
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._engine_plan import run_plan


def engine_run_plan(probe, images=None, changes=None, config_now=None, config_started=None, config_written=False):
    """Leave alone, start or restart: see plugin_utils/_engine_plan.run_plan."""
    images = dict((int(rank), image) for rank, image in (_plain(images) or {}).items())
    config = dict(now=config_now, started=config_started, written=bool(config_written)) if config_now else None
    return run_plan(_plain(probe), images=images, changes=_plain(changes), config=config)


class FilterModule(object):
    def filters(self):
        return {"engine_run_plan": engine_run_plan}
