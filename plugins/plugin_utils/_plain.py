# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters' input as plain data: the one place every filter file converts its arguments."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.collections import is_sequence


def plain(value):
    """Lazy hostvars and tagged template values become plain dicts, lists and scalars."""
    if isinstance(value, dict):
        return dict((k, plain(v)) for k, v in value.items())
    if is_sequence(value):
        return [plain(v) for v in value]
    return value
