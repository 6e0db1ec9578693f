"""Request slots, the KV pool and the admission gate (rank 0).

What the kit's batcher decides, without a GPU:

- ``n`` slots (those that fit at load): a request beyond them waits, FIFO;
- the shared KV pool (GLM53_TF_KV_POOL_TOKENS, 256-token pages): a request
  reserves ceil((prompt + max_tokens + 64) / 256) pages, waits when short, and is
  refused when it needs more than the whole pool;
- the admission gate: a request starts beside running ones only while free
  device memory >= GLM53_TF_BATCH_ADMIT_GB. The simulated GB10 shows
  GLM53_LAB_BUSY_FREE_GB (1.5) free once a request runs, so the kit's 2 GB
  serves one request at a time and the C8 profile's 0.25 admits all slots.
"""

import threading
import time

from tensorfold.sim import env

PAGE_TOKENS = 256


class Cancelled(Exception):
    """The client went away while its request waited."""


class Batcher(object):
    def __init__(self, n, pool_tokens=0, admit_gb=1.0):
        self.n = n
        self.pages_total = pool_tokens // PAGE_TOKENS if pool_tokens > 0 else 0
        self.pages_free = self.pages_total
        self.admit_gb = admit_gb
        self.busy_free_gb = env.busy_free_gb()
        self._cond = threading.Condition()
        self._queue = []
        self._slots = [None] * n
        self._waiting_since = None

    @staticmethod
    def pages_for(prompt, max_tokens):
        return -(-(prompt + max_tokens + 64) // PAGE_TOKENS)

    def check(self, prompt, max_tokens):
        """Refuse a request larger than the whole pool (ValueError -> HTTP 400)."""
        if self.pages_total and self.pages_for(prompt, max_tokens) > self.pages_total:
            raise ValueError("this request needs %d KV pages (prompt %d + max_tokens %d + 64), more than the "
                             "whole pool of %d" % (self.pages_for(prompt, max_tokens), prompt, max_tokens,
                                                   self.pages_total))

    def running(self):
        return sum(1 for job in self._slots if job is not None)

    def _admissible(self, job):
        if self._queue[0] is not job or None not in self._slots:
            return False
        if self.pages_total and job.pages > self.pages_free:
            return False
        if self.running() and self.busy_free_gb < self.admit_gb:
            if self._waiting_since is None:
                self._waiting_since = time.monotonic()
                env.log("[tensorfold] admission waits for memory (free %.2f GB < GLM53_TF_BATCH_ADMIT_GB=%s "
                        "beside %d running)" % (self.busy_free_gb, _fmt(self.admit_gb), self.running()))
            return False
        return True

    def acquire(self, job, gone=None):
        """Wait for a slot; returns (slot index, seconds waited)."""
        started = time.monotonic()
        job.pages = self.pages_for(job.prompt, job.max_tokens) if self.pages_total else 0
        with self._cond:
            self._queue.append(job)
            try:
                while not self._admissible(job):
                    self._cond.wait(0.2)
                    if gone is not None and gone():
                        raise Cancelled()
            except BaseException:
                self._queue.remove(job)
                self._cond.notify_all()
                raise
            self._queue.pop(0)
            if self._waiting_since is not None:
                env.log("[tensorfold] admission resumed after %.1f s" % (time.monotonic() - self._waiting_since))
                self._waiting_since = None
            slot = self._slots.index(None)
            self._slots[slot] = job
            self.pages_free -= job.pages
            self._cond.notify_all()
        return slot, time.monotonic() - started

    def release(self, slot):
        with self._cond:
            job = self._slots[slot]
            self._slots[slot] = None
            if job is not None:
                self.pages_free += job.pages
            self._cond.notify_all()

    def kv_free(self):
        return self.pages_free if self.pages_total else None


def _fmt(value):
    return ("%g" % value)
