# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Input filters shared by the roles: numeric ranges checked before any probe."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._inputs import range_errors


def glm53_range_errors(values, ranges):
    """``["name must be a number from A to B, found X", ...]`` for out-of-range inputs."""
    return range_errors(dict(values), dict(ranges))


class FilterModule(object):
    def filters(self):
        return {"range_errors": glm53_range_errors}
