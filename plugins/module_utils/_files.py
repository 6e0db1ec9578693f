# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers: read a small file, and replace one atomically. Used on the nodes
(the cluster contract) and on the controller (preflight reports). Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile


def read_text(path):
    """The file's text, or None when it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def write_atomic(path, content, mode=0o644):
    """Replace ``path`` in one rename, so a reader never sees half a file; the directory
    is created when missing."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    handle, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(content)
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except Exception:
        os.unlink(tmp)
        raise
