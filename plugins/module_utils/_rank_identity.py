# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: is a running rank the one a start just made? Not a public API.

A start that did not replace the ranks (the kit's ``start`` refuses while a CUDA process
runs on a node, kit reference §2.3 step 2) leaves the old service answering: ``/health``
ok, every slot, a canary answer. Only the containers tell: their ids (a new ``docker run``
makes a new id) and the image each runs. These judgments say READY only of ranks that a
start made from the image expected on their node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

RESTART_HINT = "stop both ranks and start again (serve.sh restart), so both run what this start was for"


def _short_id(value):
    text = str(value or "")
    return text.split(":", 1)[-1][:12] if text else "?"


def identity_reason(rank, previous_ids=(), image=None):
    """Why an inspected rank is not one a start just made from ``image``, or None.

    ``rank`` is a judged rank (``_readiness.rank_state`` plus rank/node/container). Only a rank
    that exists is judged here; a missing or stopped one has its own reason. ``previous_ids``
    are the container ids seen before the start; ``image`` the full image id expected (None:
    any image).
    """
    if rank.get("state") not in ("running", "created"):
        return None
    label = "rank %d (%s on %s)" % (rank["rank"], rank["container"], rank["node"])
    if rank.get("id") and rank["id"] in (previous_ids or ()):
        return "%s is still the container from before this start (id %s, started %s): %s" % (
            label, _short_id(rank["id"]), rank.get("started_at") or "?", RESTART_HINT)
    if image and rank.get("image") and rank["image"] != image:
        return "%s runs image %s, want %s (the image on that node now): %s" % (
            label, _short_id(rank["image"]), _short_id(image), RESTART_HINT)
    return None


def identity_problems(ranks, previous_ids=(), images=None):
    """Every identity reason of ``ranks``; ``images`` maps a rank number to its expected image id."""
    images = images or {}
    reasons = (identity_reason(rank, previous_ids, images.get(rank["rank"])) for rank in ranks if rank)
    return [reason for reason in reasons if reason]
