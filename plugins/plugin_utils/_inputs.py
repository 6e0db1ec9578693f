# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Input validation on the controller, before any probe. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def found(value):
    """``str "12"``: the value's YAML kind and the value, as input errors show what they found."""
    if value is None:
        return "null"
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (dict, "dict"), (list, "list")):
        if isinstance(value, kind):
            break
    else:
        name = type(value).__name__
    return "%s %s" % (name, json.dumps(value, default=str, sort_keys=True))


def _number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        text = str(value).strip()
        return int(text) if text.lstrip("-").isdigit() else float(text)
    except (TypeError, ValueError):
        return None


def range_errors(values, ranges):
    """Messages for every value outside its range, naming the variable.

    ``ranges``: {variable: [min, max]} or {variable: [min, max, also_allowed...]}
    (for example ``[576, 9216, 0]``: 0 means "not set"). A value that is not a
    number fails too.
    """
    out = []
    for name in sorted(ranges):
        if name not in values:
            continue
        spec = list(ranges[name])
        low, high, extra = spec[0], spec[1], spec[2:]
        value = _number(values[name])
        if value is not None and (value in extra or low <= value <= high):
            continue
        allowed = "%s to %s" % (low, high) + "".join(" or %s" % e for e in extra)
        out.append("%s must be a number from %s, found %r" % (name, allowed, values[name]))
    return out
