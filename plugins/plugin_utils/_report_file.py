# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a preflight report on the controller in one step. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile


def write_report(path, document):
    """Create the directory when missing and replace the file atomically; return the path."""
    path = os.path.abspath(os.path.expanduser(path))
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    handle, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(document, out, indent=4, sort_keys=False)
            out.write("\n")
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except Exception:
        os.unlink(tmp)
        raise
    return path
