# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site contract (meta/site_argument_spec.yml) in templates: each site variable's one
default (``'glm53_models' | dgx_spark.glm53.site_default``) and the type errors
playbooks/path.yml refuses (``hostvars[inventory_hostname] | dgx_spark.glm53.site_type_errors``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._site_spec import load, site_default, type_errors

# Read the contract when this file is imported, not at the first use: the warm_plugins callback
# imports the filters in ansible-playbook's main process, so every worker forked after it has the
# contract already. Read at first use, each worker (one per task and host) read and parsed it
# again: 1.1 of the 18 s of CPU of a converged site.yml rerun on the lab. A contract that cannot
# be read is left to the first use, which names the problem in the task that needs it.
try:
    load()
except (OSError, KeyError, TypeError, yaml.YAMLError):
    pass


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
