# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pieces of a path role's one read per node that both path roles use: the shell lines that
print a git checkout's commit, remote and cleanliness (``_node_reads.checkout_read``), so the
role runs its git task only where the read found the checkout off its pin."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._node_reads import checkout_read


def node_read_checkout(path_sh, name):
    """``{{ path | tensorfold_shell_path | dgx_spark.glm53.node_read_checkout('kit') }}``; an
    empty path prints the keys empty (a node without this checkout)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise AnsibleFilterError("node_read_checkout: the checkout's name must be a shell word, found %r" % (name,))
    return checkout_read(str(path_sh or ""), name)


class FilterModule(object):
    def filters(self):
        return {"node_read_checkout": node_read_checkout}
