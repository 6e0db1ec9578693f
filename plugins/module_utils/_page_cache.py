# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers for page_cache_evict: residency, eviction by posix_fadvise, and the run. Not a public API.

Measure how much of each file sits in the page cache with cachestat(2) or
mincore(2), evict with posix_fadvise, and run one eviction (evict), which finds
the files with _page_cache_files and evicts globally with _page_cache_balloon.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import errno
import math
import mmap
import os
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.dgx_spark.glm53.plugins.module_utils._meminfo import (
    GIB,
    memory_summary,
    read_meminfo,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._page_cache_balloon import (
    DROP_CACHES_PATH,
    balloon,
    balloon_min_keep,
    drop_caches,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._page_cache_errors import (
    PageCacheError,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._page_cache_files import (
    collect_targets,
)

METHODS = ("fadvise", "drop_caches", "balloon")
PAGE_SIZE = mmap.PAGESIZE
# Bytes mapped per mincore() call; bounds the residency vector to WINDOW/PAGE_SIZE bytes.
WINDOW = 1 << 30
# Threads that measure and evict at once; past a few, the kernel's LRU locks serialise them.
MAX_WORKERS = 4
# cachestat is new enough to have the same number on every architecture.
SYS_CACHESTAT = 451
# mincore() sets bit 0 of each vector byte for a resident page; other bits are reserved.
_LSB = bytes(bytearray(i & 1 for i in range(256)))


# --- pure helpers -------------------------------------------------------------


def resident_bytes_in_vector(vec, length, page_size=PAGE_SIZE):
    """Page-cache memory held by a ``length``-byte mapping whose mincore() vector is ``vec``.

    Whole pages, as fincore and vmtouch count them: a file's partial last page
    still takes a full page of memory.
    """
    pages = (length + page_size - 1) // page_size
    return vec[:pages].translate(_LSB).count(b"\x01") * page_size


def windows(size, window=WINDOW):
    """(offset, length) pieces covering a file; offsets stay page-aligned for mmap."""
    return [(offset, min(window, size - offset)) for offset in range(0, size, window)]


def decide_changed(check_mode, method, paths_given, resident_before, resident_after,
                   cached_before, cached_after, balloon_room=0, advised_unmeasured=False):
    """``changed`` for a run: did (or would) resident bytes go down.

    With ``paths`` the answer is about those files. Without (drop_caches and balloon
    only) it is about the system's Cached figure. Files whose residency cannot be
    seen but were (or would be) fadvised count as a change: we cannot prove otherwise.
    """
    if advised_unmeasured:
        return True
    if check_mode:
        would_act = method != "balloon" or balloon_room > 0
        return would_act and (resident_before if paths_given else cached_before) > 0
    if paths_given:
        return resident_after < resident_before
    return cached_after < cached_before


# --- residency and eviction --------------------------------------------------------


class _CachestatRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("nr_cache", "nr_dirty", "nr_writeback", "nr_evicted", "nr_recently_evicted")]


class _Libc(object):
    """Residency probes through libc.

    cachestat(2) (Linux 6.5+) counts a file's cached pages in one call, several
    times faster than mincore on a warm file; mincore over an mmap of the file is
    the fallback everywhere else. Python's mmap object exposes no address for
    mincore, hence libc's mmap/munmap.
    """

    def __init__(self):
        libc = ctypes.CDLL(None, use_errno=True)
        self._syscall = libc.syscall
        self._syscall.restype = ctypes.c_long
        self.use_cachestat = True
        self._mmap = getattr(libc, "mmap64", None) or libc.mmap
        self._mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                               ctypes.c_int, ctypes.c_int, ctypes.c_int64]
        self._mmap.restype = ctypes.c_void_p
        self._mincore = libc.mincore
        self._mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        self._mincore.restype = ctypes.c_int
        self._munmap = libc.munmap
        self._munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._munmap.restype = ctypes.c_int
        self._map_failed = ctypes.c_void_p(-1).value

    @staticmethod
    def _error(call):
        err = ctypes.get_errno()
        return OSError(err, "%s: %s" % (call, os.strerror(err)))

    @property
    def probe(self):
        return "cachestat" if self.use_cachestat else "mincore"

    def _cachestat(self, fd):
        """Cached bytes of ``fd`` by cachestat(2), or None to use mincore instead."""
        span = _CachestatRange(0, 0)  # length 0: to the end of the file
        counts = _Cachestat()
        if self._syscall(ctypes.c_long(SYS_CACHESTAT), ctypes.c_long(fd), ctypes.byref(span),
                         ctypes.byref(counts), ctypes.c_long(0)) == 0:
            return counts.nr_cache * PAGE_SIZE
        if ctypes.get_errno() in (errno.ENOSYS, errno.EPERM):
            # An older kernel, or a seccomp filter (containers) that does not know the call.
            self.use_cachestat = False
        return None

    def resident_bytes(self, fd, size):
        """Page-cache bytes (whole pages) of the open file ``fd``, ``size`` bytes long."""
        if self.use_cachestat:
            cached = self._cachestat(fd)
            # cachestat counts the pages of the inode it is given. On a stacked file system
            # (overlayfs, as in containers) that inode holds none: the pages belong to the
            # file underneath, which mmap (and so mincore) reaches. A zero is confirmed.
            if cached is not None and (cached or not size):
                return cached
        return self._mincore_bytes(fd, size)

    def _mincore_bytes(self, fd, size):
        total = 0
        # WINDOW looked up per call (a default argument is fixed at import): a test shrinks it.
        for offset, length in windows(size, WINDOW):
            addr = self._mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
            if addr is None or addr == self._map_failed:
                raise self._error("mmap")
            try:
                # mincore only inspects the page tables and cache: it faults nothing in.
                pages = (length + PAGE_SIZE - 1) // PAGE_SIZE
                vec = (ctypes.c_ubyte * pages)()  # per call: threads share this object
                if self._mincore(addr, length, vec) != 0:
                    raise self._error("mincore")
                total += resident_bytes_in_vector(ctypes.string_at(vec, pages), length)
            finally:
                self._munmap(addr, length)
        return total


_LIBC = []


def _libc():
    if not _LIBC:
        _LIBC.append(_Libc())
    return _LIBC[0]


def _open(target):
    """Open a target read-only, check it is still the file the walk found.

    Returns the descriptor and whether the kernel will show its page cache: only
    to the file's owner, a user who may write it, or root. To anyone else mincore
    (since Linux 5.2) reports a fresh mapping as empty and cachestat refuses.
    """
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(target.path, flags)
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (target.dev, target.ino):
            raise PageCacheError("replaced while running")
        target.size = st.st_size
        euid = os.geteuid()
        measurable = euid == 0 or st.st_uid == euid or os.access(
            target.path, os.W_OK, effective_ids=os.access in os.supports_effective_ids)
    except BaseException:
        os.close(fd)
        raise
    return fd, measurable


def _open_reason(exc):
    if isinstance(exc, PageCacheError):
        return str(exc)
    if isinstance(exc, FileNotFoundError):
        return "vanished"
    if isinstance(exc, PermissionError):
        return "unreadable: %s" % exc.strerror
    return "cannot open: %s" % exc.strerror


def resident_bytes(path):
    """Page-cache bytes of one file, for callers outside the module (benchmark)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        return _libc().resident_bytes(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _fadvise(fd):
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def _fadvise_measured(fd, size, libc):
    """Evict a file whose residency we can see; return what stayed resident."""
    _fadvise(fd)
    left = libc.resident_bytes(fd, size)
    if left:
        # Dirty pages survive DONTNEED (it only starts writeback): write them out, retry.
        try:
            os.fdatasync(fd)
        except OSError:
            return left
        _fadvise(fd)
        left = libc.resident_bytes(fd, size)
    return left


def _handle(target, evict, libc):
    """Measure (and with ``evict``, fadvise) one file.

    Returns (skip_reason, before, after); before/after are None where the kernel
    will not show the file's cache, and after == before without ``evict``.
    """
    try:
        fd, measurable = _open(target)
    except (OSError, PageCacheError) as exc:
        return _open_reason(exc), None, None
    try:
        if not measurable:
            if evict:
                _fadvise(fd)
            return None, None, None
        before = libc.resident_bytes(fd, target.size)
        after = _fadvise_measured(fd, target.size, libc) if evict and before else before
        return None, before, after
    except OSError as exc:
        return "cannot measure residency: %s" % exc.strerror, None, None
    finally:
        os.close(fd)


def _handle_all(targets, indexes, evict):
    """Run _handle over ``targets[i] for i in indexes``; return {index: outcome}.

    Threads overlap the syscalls (ctypes calls and fadvise release the GIL),
    biggest files first so the workers finish together.
    """
    libc = _libc()
    order = sorted(indexes, key=lambda index: -targets[index].size)
    workers = min(MAX_WORKERS, os.cpu_count() or 1, len(order))
    if workers <= 1:
        return dict((index, _handle(targets[index], evict, libc)) for index in order)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        outcomes = pool.map(lambda index: _handle(targets[index], evict, libc), order)
        return dict(zip(order, outcomes))


def _measure_all(targets, skipped, evict=False):
    """Every target once; return {index: (before, after)} for the files handled."""
    handled = {}
    outcomes = _handle_all(targets, range(len(targets)), evict)
    for index in range(len(targets)):
        reason, before, after = outcomes[index]
        if reason:
            skipped.append({"path": targets[index].path, "reason": reason})
        else:
            handled[index] = (before, after)
    return handled


def _remeasure(targets, handled):
    """Second residency pass after a global eviction (drop_caches, balloon)."""
    measured = [index for index, (before, _after) in handled.items() if before is not None]
    for index, (reason, now, _same) in _handle_all(targets, measured, evict=False).items():
        # A file gone between the two passes took its pages with it.
        handled[index] = (handled[index][0], 0 if reason else now or 0)


# --- the run ---------------------------------------------------------------------


def check_arguments(paths, method, min_size, keep_gib, free_target_gib=None, mem_total=0):
    """Refuse bad input, naming the option; raises PageCacheError."""
    if method not in METHODS:
        raise PageCacheError("method must be one of %s, got %r" % (", ".join(METHODS), method))
    if method == "fadvise" and not paths:
        raise PageCacheError("method=fadvise needs paths: the files or directories to evict")
    if any(not path for path in paths or []):
        raise PageCacheError("paths has an empty entry: give each file or directory by name, or remove it")
    if min_size < 0:
        raise PageCacheError("min_size must be 0 or more bytes, got %d: use 0 to evict every file" % min_size)
    if not math.isfinite(keep_gib):
        raise PageCacheError("keep_gib must be a finite number of GiB, got %s: the default is 6" % keep_gib)
    floor = balloon_min_keep(mem_total)
    if method == "balloon" and keep_gib < floor:
        raise PageCacheError(
            "keep_gib=%s is below the %s GiB floor (2 GiB, or an eighth of MemTotal on a smaller machine): the "
            "balloon would starve the system of memory; give %s or more" % (keep_gib, round(floor, 3), round(floor, 3)))
    if free_target_gib is not None:
        if method != "balloon":
            raise PageCacheError("free_target_gib is for method=balloon only, got method=%s: leave it out" % method)
        if not math.isfinite(free_target_gib) or free_target_gib <= 0:
            raise PageCacheError("free_target_gib must be a positive finite number of GiB (the MemFree to reach), "
                                 "got %s" % free_target_gib)
    if method == "drop_caches" and os.geteuid() != 0:
        raise PageCacheError(
            "method=drop_caches writes %s and needs root (euid is %d): use method=fadvise "
            "(no root needed) or run the task with become: true" % (DROP_CACHES_PATH, os.geteuid()))


def evict(paths=None, method="fadvise", follow_symlinks=True, min_size=0,  # pylint: disable=too-many-locals
          keep_gib=6.0, missing="fail", check_mode=False, cross_filesystems=False, free_target_gib=None):
    """Run one eviction and return the module's result, ``changed`` included.

    Raises PageCacheError on bad input before anything is evicted.
    """
    started = time.monotonic()
    meminfo = read_meminfo()
    check_arguments(paths, method, min_size, keep_gib, free_target_gib, mem_total=meminfo.get("MemTotal", 0))
    found = collect_targets(paths, follow_symlinks=follow_symlinks, min_size=min_size,
                            cross_filesystems=cross_filesystems)
    if found["missing"] and missing == "fail":
        raise PageCacheError("path(s) not found: %s (set missing=ignore to skip them)"
                             % ", ".join(found["missing"]))
    targets = found["targets"]
    skipped = [{"path": path, "reason": "missing"} for path in found["missing"]] + found["skipped"]

    memory_before = memory_summary(read_meminfo())
    target_bytes = None if free_target_gib is None else int(free_target_gib * GIB)
    # Already that much MemFree: the balloon has nothing to do.
    met = target_bytes is not None and memory_before["mem_free"] >= target_bytes
    expected_free = memory_before["mem_free"] if met else None
    balloon_room = 0
    balloon_bytes = 0
    warnings = []
    if method == "fadvise":
        handled = _measure_all(targets, skipped, evict=not check_mode)
    else:
        handled = _measure_all(targets, skipped)
        keep_bytes = int(keep_gib * GIB)
        balloon_room = 0 if met else max(0, memory_before["mem_available"] - keep_bytes)
        if not check_mode and not met:
            if method == "drop_caches":
                drop_caches()
            else:
                balloon_bytes, warning, expected_free = balloon(keep_bytes, target_bytes=target_bytes)
                if warning:
                    warnings.append(warning)
            _remeasure(targets, handled)
    memory_after = memory_summary(read_meminfo())

    measured = [pair for pair in handled.values() if pair[0] is not None]
    unmeasured = [index for index, pair in handled.items() if pair[0] is None]
    resident_before = sum(before for before, _after in measured)
    resident_after = sum(after for _before, after in measured)
    changed = not met and decide_changed(check_mode, method, bool(paths), resident_before, resident_after,
                                         memory_before["cached"], memory_after["cached"], balloon_room,
                                         advised_unmeasured=method == "fadvise" and bool(unmeasured))
    result = {
        "changed": changed,
        "method": method,
        "file_count": len(handled),
        "file_bytes": sum(targets[index].size for index in handled),
        "resident_bytes_before": resident_before,
        "resident_bytes_after": resident_after,
        "evicted_bytes": max(0, resident_before - resident_after),
        "unmeasured": {"files": len(unmeasured), "bytes": sum(targets[index].size for index in unmeasured)},
        "measured_with": _libc().probe,
        "memory_before": memory_before,
        "memory_after": memory_after,
        "skipped_paths": skipped,
        "duplicates": found["duplicates"],
        "below_min_size": found["below_min_size"],
        "elapsed": round(time.monotonic() - started, 3),
    }
    if method == "balloon":
        result["balloon_bytes"] = balloon_bytes
    if target_bytes is not None:
        # In check mode: whether MemFree is there already.
        result["free_target"] = {"bytes": target_bytes, "expected_free": expected_free,
                                 "reached": expected_free is not None and expected_free >= target_bytes}
    if warnings:
        result["warnings"] = warnings
    return result
