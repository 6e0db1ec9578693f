# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site contract (meta/site_argument_spec.yml) in templates: each site variable's one
default (``'glm53_models' | dgx_spark.glm53.site_default``) and the type errors
playbooks/path.yml refuses (``hostvars[inventory_hostname] | dgx_spark.glm53.site_type_errors``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._site_spec import site_default, type_errors


def glm53_site_default(name):
    try:
        return site_default(name)
    except KeyError as exc:
        raise AnsibleFilterError(str(exc).strip('"'))


def glm53_site_type_errors(host_vars):
    return type_errors(host_vars)


class FilterModule(object):
    def filters(self):
        return {"site_default": glm53_site_default, "site_type_errors": glm53_site_type_errors}
