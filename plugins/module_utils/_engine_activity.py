# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: busy or wedged? Judgments from ``/health`` and ``/metrics``. Not a public API.

With every slot taken a canary is one more request that waits for a slot (the kit's
admission is FIFO; the spec's 8 x 23K test saw first tokens after up to 183 s), so a canary
without an answer proves nothing while requests are in flight. A tensor-parallel hang looks
the same from ``/health`` (``ok: true``, requests in flight) but makes no progress; the
engine's token and round counters tell the two apart.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Counters that grow while an engine works. TensorFold: patch 0150's /metrics (the lp9001
# overlay's patch 9003 makes completion tokens count live, not only at the end of a reply).
# vLLM: its Prometheus counters.
PROGRESS_COUNTERS = {
    "tensorfold": ("tensorfold_completion_tokens_total", "tensorfold_decode_rounds_total",
                   "tensorfold_prompt_tokens_total", "tensorfold_requests_total"),
    "vllm": ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:request_success_total"),
}
_SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfINFNa]+)")


def in_flight(health_body):
    """Requests running per ``/health`` (``inflight``; else ``streams`` decoding + prefilling), or None."""
    if not isinstance(health_body, dict):
        return None
    value = health_body.get("inflight")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    streams = health_body.get("streams")
    if isinstance(streams, dict):
        parts = [streams.get(key) for key in ("decoding", "prefilling")]
        if all(isinstance(part, int) and not isinstance(part, bool) for part in parts):
            return sum(parts)
    return None


def progress_total(metrics_text, mode):
    """The sum of the mode's progress counters in a Prometheus text body, or None when none is there."""
    names = set(PROGRESS_COUNTERS.get(mode, ()))
    total, seen = 0.0, False
    for line in (metrics_text or "").splitlines():
        match = _SAMPLE_RE.match(line.strip())
        if not match or match.group(1) not in names:
            continue
        try:
            total += float(match.group(3))
        except ValueError:
            continue
        seen = True
    return total if seen else None


def busy_verdict(health_body, before, after):
    """``{busy, reason}``: is a canary without an answer explained by work in flight?

    ``before``/``after`` are progress totals read around the canary (None when ``/metrics``
    had none). Busy needs requests in flight and counters that grew; in flight without growth
    is what a wedged engine shows.
    """
    running = in_flight(health_body)
    if not running:
        return {"busy": False, "reason": "/health shows no request in flight (inflight: %s)" % running}
    if before is None or after is None:
        return {"busy": False, "reason": "%d request(s) in flight but /metrics has no progress counter to tell "
                                         "busy from wedged" % running}
    if after > before:
        return {"busy": True, "reason": None}
    return {"busy": False, "reason": "%d request(s) in flight and no token, round or request counted while the canary "
                                     "waited: the engine looks wedged" % running}
