# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The error of page_cache_evict's helpers. Not a public API.

In a file of its own so that finding the files, the balloon and the eviction can
all raise it without importing each other.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class PageCacheError(Exception):
    """Bad input or an eviction that cannot go ahead; the message is for the operator."""
