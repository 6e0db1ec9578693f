# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Progress lines for long node-side jobs (downloads, copies, engine starts) that run
async: the node writes a small JSON progress file, the controller turns it into one line.

Progress file keys (all optional): phase, bytes_done, bytes_total, files_done,
files_total, rate_bps, eta_s, message.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.dgx_spark.glm53.plugins.module_utils._human import human_bytes


def human_duration(seconds):
    """``45 s``, ``3 min 05 s``, ``1 h 02 min``."""
    seconds = int(round(max(0.0, float(seconds))))
    if seconds < 60:
        return "%d s" % seconds
    if seconds < 3600:
        return "%d min %02d s" % (seconds // 60, seconds % 60)
    return "%d h %02d min" % (seconds // 3600, (seconds % 3600) // 60)


def parse_progress(text):
    """The progress file's JSON as a dict; {} for anything unreadable (the job may be
    writing it for the first time)."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def progress_line(host, label, progress, elapsed):
    """One line for the play output, e.g.
    ``[spark-head] weights: 1.2 GB of 3.4 GB (35%), 48.1 MB/s, ETA 46 s, 2 of 9 files (1 min 10 s)``."""
    parts = []
    done, total = progress.get("bytes_done"), progress.get("bytes_total")
    if done is not None and total:
        parts.append("%s of %s (%d%%)" % (human_bytes(done), human_bytes(total), int(100 * float(done) / float(total))))
    elif done is not None:
        parts.append(human_bytes(done))
    if progress.get("rate_bps"):
        parts.append("%s/s" % human_bytes(progress["rate_bps"]))
    if progress.get("eta_s") is not None and total and done is not None and float(done) < float(total):
        parts.append("ETA %s" % human_duration(progress["eta_s"]))
    if progress.get("files_total"):
        parts.append("%s of %s files" % (progress.get("files_done") or 0, progress["files_total"]))
    if progress.get("message"):
        parts.append(str(progress["message"]))
    phase = progress.get("phase")
    what = "%s (%s)" % (label, phase) if phase and phase not in label else label
    body = ", ".join(parts) if parts else "running"
    return "[%s] %s: %s (%s)" % (host, what, body, human_duration(elapsed))
