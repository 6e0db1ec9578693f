# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helper: byte counts as text (``12.3 GB``), for messages on the nodes and lines on the
controller. One formatter, so a size reads the same wherever it is shown. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DECIMAL = (("TB", 1000 ** 4), ("GB", 1000 ** 3), ("MB", 1000 ** 2), ("kB", 1000))
BINARY = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
_SCALES = dict(DECIMAL + BINARY)


def human_bytes(value, unit=None, binary=False):
    """``12.3 GB``: one decimal, in ``unit`` when given (a figure compared with a setting in that
    unit: memory gates are GiB, weight sizes are quoted in GB), else in the largest unit of the
    decimal (or ``binary``) series the value reaches; whole bytes below it (``512 B``)."""
    value = float(value or 0)
    if unit is not None:
        return "%.1f %s" % (value / _SCALES[unit], unit)
    for name, scale in BINARY if binary else DECIMAL:
        if value >= scale:
            return "%.1f %s" % (value / scale, name)
    return "%d B" % value
