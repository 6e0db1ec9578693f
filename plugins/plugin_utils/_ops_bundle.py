# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operations program glm53-ops as one zipapp: this collection's module_utils plus a
__main__, behind a python3 shebang (action plugin dgx_spark.glm53.ops_bundle builds it on the
controller, role ops copies it to the nodes).

Deterministic (sorted names, one fixed date, fixed modes), so the same sources give the same
bytes and the copy to each node changes nothing on a rerun; written only when the bytes differ.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import tempfile
import zipfile

# This collection's module_utils, beside plugin_utils.
SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")
PREFIX = "ansible_collections/dgx_spark/glm53/plugins/module_utils/"
MAIN = (
    "import sys\n"
    "from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_cli import main\n"
    "sys.exit(main())\n"
)
DATE = (2020, 1, 1, 0, 0, 0)


def build(source=SOURCE):
    """The zipapp's bytes from the module_utils in ``source``."""
    buffer = io.BytesIO()
    buffer.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        entries = [("__main__.py", MAIN.encode())]
        # Regular packages, not namespace portions: this zip comes first on sys.path, so an
        # ansible_collections installed on the node (the ansible package) cannot shadow it.
        parts = PREFIX.rstrip("/").split("/")
        entries += [("/".join(parts[:depth]) + "/__init__.py", b"") for depth in range(1, len(parts) + 1)]
        for name in sorted(os.listdir(source)):
            if name.endswith(".py"):
                with open(os.path.join(source, name), "rb") as handle:
                    entries.append((PREFIX + name, handle.read()))
        for name, data in entries:
            info = zipfile.ZipInfo(name, DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            bundle.writestr(info, data)
    return buffer.getvalue()


def write(output, source=SOURCE):
    """Build and write the zipapp to ``output`` (mode 0755, atomically) unless it already holds
    these bytes; whether it was written."""
    data = build(source)
    try:
        with open(output, "rb") as handle:
            if handle.read() == data:
                return False
    except (IOError, OSError):
        pass
    directory = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(directory):
        os.makedirs(directory)
    # A file of its own per writer: two runs at once (two labs, two operators) never write into
    # each other's, and each rename puts whole bytes in place.
    handle, tmp = tempfile.mkstemp(dir=directory, prefix=".glm53-ops.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o755)
        os.rename(tmp, output)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True
