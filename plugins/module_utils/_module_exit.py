# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helper: how a module of this collection ends. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def finish(module, call, errors):
    """Exit ``module`` with the result dict ``call()`` returns, or fail it with the message of a
    user error (an exception of the ``errors`` type or types; its ``result`` dict, when it has
    one, goes along). The result's ``warnings`` are shown as Ansible warnings either way.

    The failure happens outside the except block: ansible-core 2.19 records an exception being
    handled with the failure, and a user error is to read as its message alone.
    """
    result, error = None, None
    try:
        result = call()
    except errors as exc:
        error, result = str(exc), dict(getattr(exc, "result", None) or {})
    for warning in result.pop("warnings", []):
        module.warn(warning)
    if error is not None:
        module.fail_json(msg=error, **result)
    module.exit_json(**result)
