# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers: pinned revisions are full 40-hex commit shas. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_SHA = re.compile(r"^[0-9a-f]{40}$")


def is_full_sha(value):
    """True for a full lowercase 40-hex commit sha (branch names and short shas are refused)."""
    return isinstance(value, str) and bool(_SHA.match(value))


def bad_revisions(models):
    """Messages for every ``{repo_id, revision}`` whose revision is not a full sha."""
    return ["models: %s revision must be a full 40-hex commit sha, found %r" % (m.get("repo_id"), m.get("revision"))
            for m in models or [] if not is_full_sha(m.get("revision"))]
