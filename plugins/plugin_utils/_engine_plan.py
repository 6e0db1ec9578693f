# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether to leave a serving engine alone, start it, or restart it: one decision for both paths.

Input is what the probe saw (a ``wait_for_slots`` result: readiness, busy, and each rank
container's id and image) and what this run changed (config written, images built).
Facts behind it (kit reference §2.3): the kit's ``start`` exits 1 while any CUDA process
runs on a node, so new settings or a new image reach running ranks only by stopping both
first (``restart``); an engine busy with every slot is not unhealthy.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Rank states in which a container exists and must be stopped before ranks start again.
EXISTING = ("running", "created", "exited", "oom", "unknown")


def _short(image):
    return str(image or "?").split(":", 1)[-1][:12]


def image_drift(ranks, images):
    """Why running ranks do not run the image expected on their node (``images``: rank -> id)."""
    out = []
    for rank in ranks or []:
        want = (images or {}).get(rank.get("rank"))
        if rank.get("state") == "running" and want and rank.get("image") and rank["image"] != want:
            out.append("rank %s (%s on %s) runs image %s, the image there now is %s" % (
                rank.get("rank"), rank.get("container"), rank.get("node"), _short(rank["image"]), _short(want)))
    return out


def config_change(now, started=None, written=False, name="config/prod.env"):
    """Why the ranks must take a new config, or None.

    The ranks read their config only at a start. ``now`` is the config's hash, ``started`` the
    hash recorded when the running ranks were started (so a run that wrote the config and died
    before the restart is caught by the next run); without a record, whether this run wrote it.
    """
    started = (started or "").strip()
    if started:
        return None if started == now else "%s changed since the ranks started" % name
    return "%s changed in this run" % name if written else None


def run_plan(probe, images=None, changes=None, config=None):
    """``{action, reason, previous_ids, busy}``: ``action`` is ``none``, ``start`` or ``restart``.

    ``probe`` is the wait_for_slots result of the service as it runs; ``images`` maps a rank
    number to the image id it must run; ``changes`` says what else changed that the ranks only
    take at a start; ``config`` is ``config_change``'s keyword arguments.
    """
    probe = probe or {}
    changes = list(changes or []) + ([config_change(**config)] if config else [])
    ranks = probe.get("ranks") or []
    existing = [rank for rank in ranks if rank.get("state") in EXISTING]
    previous_ids = [rank["id"] for rank in existing if rank.get("id")]
    why = [change for change in (changes or []) if change] + image_drift(ranks, images)
    if not why and probe.get("ready"):
        reason = "busy with requests in flight, healthy" if probe.get("busy") else "healthy"
        return {"action": "none", "reason": reason, "previous_ids": previous_ids, "busy": bool(probe.get("busy"))}
    if not why:
        why = [probe.get("reason") or probe.get("msg") or "not ready"]
    # Any rank left over means the kit's start would refuse (its GPU is busy) or a half pair:
    # stop both first, as the kit's restart does.
    action = "restart" if existing else "start"
    return {"action": action, "reason": "; ".join(why), "previous_ids": previous_ids, "busy": False}
