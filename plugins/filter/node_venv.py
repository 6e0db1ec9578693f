# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the node_venv role; the logic is in plugin_utils/_wheelhouse.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._wheelhouse import WheelhouseError, locked_download_argv


def node_venv_pip_download(python, arch, python_version, lock, dest):
    """argv of the controller's ``pip download`` of a node platform's wheelhouse from a role's
    hash lock (pip refuses a file whose sha256 the lock does not pin), run with ``python -m pip``."""
    try:
        return locked_download_argv(arch, python_version, lock, dest, pip_command=(python, "-m", "pip"))
    except WheelhouseError as exc:
        raise AnsibleFilterError("node_venv wheelhouse: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {
            "node_venv_pip_download": node_venv_pip_download,
        }
