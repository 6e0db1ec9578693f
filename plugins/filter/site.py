# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Collection-wide defaults for the site variables (``'models' | dgx_spark.glm53.site_default``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._site_defaults import site_default


def glm53_site_default(name):
    try:
        return site_default(name)
    except KeyError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"site_default": glm53_site_default}
