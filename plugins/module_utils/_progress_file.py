# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helper: the progress file of a long node-side job (hf_snapshot, hf_mirror), which
async_progress turns into a line on the controller (plugin_utils/_progress.py reads it).
One writer, so every job's file has the same keys and the same rate. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import threading
import time
from collections import deque

from ansible_collections.dgx_spark.glm53.plugins.module_utils._files import write_atomic

PROGRESS_INTERVAL = 1.0


def progress_record(phase, bytes_done, bytes_total, files_done, files_total, samples, now):
    """The JSON the progress file holds. ``samples`` are ``(monotonic time, bytes_done)``
    pairs, oldest first; the rate is measured across them."""
    rate = None
    if len(samples) >= 2 and samples[-1][0] > samples[0][0]:
        rate = max(0.0, (samples[-1][1] - samples[0][1]) / (samples[-1][0] - samples[0][0]))
    left = max(0, bytes_total - bytes_done)
    eta = None
    if left == 0:
        eta = 0.0
    elif rate:
        eta = round(left / rate, 1)
    return {"phase": phase, "bytes_done": bytes_done, "bytes_total": bytes_total, "files_done": files_done,
            "files_total": files_total, "rate_bps": None if rate is None else int(rate), "eta_s": eta,
            "updated": round(now, 3)}


def _capped(value, total):
    return min(value, total) if total else value


class ProgressFile(object):
    """The figures of the running phase, written to ``path`` (atomically, every ``interval``
    seconds) by a background thread while a phase runs; the rate is measured over the last
    ``window`` seconds. No path (check mode): nothing written.

    What is done is counted with ``add`` (or set with ``count``); ``pending()``, when given,
    adds ``(bytes, files)`` on their way but not counted yet (a file being written), read at
    each write."""

    def __init__(self, path, window, interval=PROGRESS_INTERVAL, name="progress"):
        self.path = path
        self.window = window
        self.interval = interval
        self.name = name
        self.lock = threading.Lock()
        self.phase = "starting"
        self.bytes_total = self.files_total = self.bytes_done = self.files_done = 0
        self.pending = None
        self.samples = deque()
        self.stop_event = threading.Event()
        self.thread = None

    def start(self, phase, bytes_total, files_total, pending=None):
        """Start a phase, counted from nothing, its rate measured afresh."""
        with self.lock:
            self.phase, self.bytes_total, self.files_total = phase, bytes_total, files_total
            self.bytes_done = self.files_done = 0
            self.pending = pending
            self.samples.clear()
        self.write()
        if self.path and self.thread is None:
            self.stop_event.clear()
            self.thread = threading.Thread(target=self._run, name=self.name)
            self.thread.daemon = True
            self.thread.start()

    def add(self, nbytes, files=0):
        with self.lock:
            self.bytes_done += nbytes
            self.files_done += files

    def count(self, nbytes, files, pending=None):
        """What the phase has done so far, and what is on its way; the rate goes on."""
        with self.lock:
            self.bytes_done, self.files_done, self.pending = nbytes, files, pending

    def finish(self, phase, bytes_total=None, files_total=None):
        """Stop the writer and write the last figures under ``phase``; with totals, as all done."""
        if self.thread is not None:
            self.stop_event.set()
            self.thread.join()
            self.thread = None
        with self.lock:
            self.phase = phase
            self.pending = None
            if bytes_total is not None:
                self.bytes_total = self.bytes_done = bytes_total
                self.files_total = self.files_done = files_total
                self.samples.clear()
        self.write()

    def record(self):
        now = time.monotonic()
        with self.lock:
            extra_bytes, extra_files = self.pending() if self.pending else (0, 0)
            done = _capped(self.bytes_done + extra_bytes, self.bytes_total)
            files = _capped(self.files_done + extra_files, self.files_total)
            self.samples.append((now, done))
            while len(self.samples) > 2 and now - self.samples[0][0] > self.window:
                self.samples.popleft()
            return progress_record(self.phase, done, self.bytes_total, files, self.files_total,
                                   list(self.samples), time.time())

    def write(self):
        if not self.path:
            return
        try:
            write_atomic(self.path, json.dumps(self.record(), sort_keys=True) + "\n")
        except (IOError, OSError):
            pass  # progress is for show; the job does not depend on it

    def _run(self):
        while not self.stop_event.wait(self.interval):
            self.write()
