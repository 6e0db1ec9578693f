# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a preflight report on the controller in one step. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.dgx_spark.glm53.plugins.module_utils._files import write_atomic


def write_report(path, document):
    """Write ``document`` as JSON at ``path`` (directory created, file replaced atomically); return the path."""
    path = os.path.abspath(os.path.expanduser(path))
    write_atomic(path, json.dumps(document, indent=4, sort_keys=False) + "\n")
    return path
