# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers for page_cache_evict. Not a public API.

Find the files to evict, measure how much of each sits in the page cache with
cachestat(2) or mincore(2), and evict with posix_fadvise, /proc/sys/vm/drop_caches
or a balloon of anonymous memory.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import errno
import math
import mmap
import os
import signal
import stat
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.dgx_spark.glm53.plugins.module_utils._meminfo import (
    GIB,
    memory_summary,
    read_meminfo,
)

METHODS = ("fadvise", "drop_caches", "balloon")
PAGE_SIZE = mmap.PAGESIZE
# Bytes mapped per mincore() call; bounds the residency vector to WINDOW/PAGE_SIZE bytes.
WINDOW = 1 << 30
# Threads that measure and evict at once; past a few, the kernel's LRU locks serialise them.
MAX_WORKERS = 4
DROP_CACHES_PATH = "/proc/sys/vm/drop_caches"
# cachestat is new enough to have the same number on every architecture.
SYS_CACHESTAT = 451
# The balloon looks at MemAvailable again after each chunk, so it overshoots its
# floor by at most one chunk even when something else takes memory meanwhile.
BALLOON_CHUNK = 64 << 20
# Below this much headroom another balloon chunk is not worth a syscall round.
BALLOON_MIN_CHUNK = 16 << 20
BALLOON_MIN_KEEP_GIB = 2.0
# The balloon process is the OOM killer's first choice, before sshd, dockerd or the module.
BALLOON_OOM_SCORE_ADJ = 1000
_PATTERN_SIZE = 16 << 20
# mincore() sets bit 0 of each vector byte for a resident page; other bits are reserved.
_LSB = bytes(bytearray(i & 1 for i in range(256)))


class PageCacheError(Exception):
    """Bad input or an eviction that cannot go ahead; the message is for the operator."""


class Target(object):
    """One real file to measure and evict."""

    __slots__ = ("path", "size", "dev", "ino")

    def __init__(self, path, size, dev, ino):
        self.path = path
        self.size = size
        self.dev = dev
        self.ino = ino


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


def balloon_chunk_size(mem_available, keep_bytes, budget_left,
                       chunk=BALLOON_CHUNK, minimum=BALLOON_MIN_CHUNK, page_size=PAGE_SIZE):
    """Size of the next balloon chunk, or 0 to stop.

    ``budget_left`` caps the total at the headroom seen at the start, so a system
    with swap (where MemAvailable may not fall as the balloon grows) cannot run away.
    """
    size = min(chunk, mem_available - keep_bytes, budget_left)
    size -= size % page_size
    return size if size >= minimum else 0


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


# --- finding the files ----------------------------------------------------------


class _Collector(object):
    """Walk named paths into distinct regular files.

    Each named path is a root. A directory reached while walking, through a
    symlink or as a mount point, is walked only if it stays inside the roots
    (resolved) and, unless ``cross_filesystems``, on the file system of the root
    it was reached from: a link to ``/`` or ``/usr`` in a model cache is not walked.
    Links to files are followed wherever they lead (a Hugging Face snapshot holds
    only links into ``blobs/``); each reaches one file.
    """

    def __init__(self, follow_symlinks, min_size, cross_filesystems, roots):
        self.follow_symlinks = follow_symlinks
        self.min_size = min_size
        self.cross_filesystems = cross_filesystems
        self.roots = roots
        self.targets = []
        self.skipped = []
        self.missing = []
        self.duplicates = 0
        self.below_min_size = {"files": 0, "bytes": 0}
        self._files = set()
        self._dirs = set()

    def skip(self, path, reason):
        self.skipped.append({"path": path, "reason": reason})

    def _stat(self, statfn, path, top, gone_reason, error_reason):
        """stat or lstat ``path``; None (and the path recorded) when it cannot be."""
        try:
            return statfn(path)
        except FileNotFoundError:
            if top:
                self.missing.append(path)
            else:
                self.skip(path, gone_reason)
        except OSError as exc:
            self.skip(path, "%s: %s" % (error_reason, exc.strerror))
        return None

    def _inside_roots(self, path):
        real = os.path.realpath(path)
        return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in self.roots)

    def visit(self, path, root_dev=None):
        """Visit ``path``; ``root_dev`` is None for a named path, else its root's device."""
        top = root_dev is None
        st = self._stat(os.lstat, path, top, "vanished", "cannot stat")
        if st is None:
            return
        linked = stat.S_ISLNK(st.st_mode)
        if linked:
            # Paths named by the caller are always resolved (like find -H);
            # follow_symlinks governs links met while walking.
            if not (top or self.follow_symlinks):
                self.skip(path, "symlink not followed: follow_symlinks is false")
                return
            st = self._stat(os.stat, path, top, "broken symlink", "cannot follow symlink")
            if st is None:
                return
        if stat.S_ISREG(st.st_mode):
            self._add_file(path, st)
        elif stat.S_ISDIR(st.st_mode):
            if top:
                self._walk(path, st, st.st_dev)
            elif linked and not self._inside_roots(path):
                self.skip(path, "symlink to a directory outside paths: %s" % os.path.realpath(path))
            elif st.st_dev != root_dev and not self.cross_filesystems:
                self.skip(path, "on another file system: cross_filesystems is false")
            else:
                self._walk(path, st, root_dev)
        else:
            self.skip(path, "not a regular file")

    def _add_file(self, path, st):
        key = (st.st_dev, st.st_ino)
        if key in self._files:
            self.duplicates += 1
            return
        self._files.add(key)
        if st.st_size < self.min_size:
            self.below_min_size["files"] += 1
            self.below_min_size["bytes"] += st.st_size
            return
        self.targets.append(Target(path, st.st_size, st.st_dev, st.st_ino))

    def _walk(self, path, st, root_dev):
        # Directory identity guards against symlink loops and repeated arguments.
        key = (st.st_dev, st.st_ino)
        if key in self._dirs:
            return
        self._dirs.add(key)
        try:
            names = sorted(os.listdir(path))
        except FileNotFoundError:
            self.skip(path, "vanished")
            return
        except OSError as exc:
            self.skip(path, "unreadable directory: %s" % exc.strerror)
            return
        for name in names:
            self.visit(os.path.join(path, name), root_dev)


def collect_targets(paths, follow_symlinks=True, min_size=0, cross_filesystems=False):
    """Walk ``paths`` into distinct regular files (by device and inode).

    Returns a dict with ``targets`` (list of Target), ``missing`` (named paths that
    do not exist), ``skipped`` ({path, reason} dicts), ``duplicates`` (files reached
    more than once) and ``below_min_size`` ({files, bytes}).
    """
    paths = paths or []
    roots = [os.path.realpath(path) for path in paths]
    collector = _Collector(follow_symlinks, min_size, cross_filesystems, roots)
    for path in paths:
        collector.visit(path)
    return {
        "targets": collector.targets,
        "missing": collector.missing,
        "skipped": collector.skipped,
        "duplicates": collector.duplicates,
        "below_min_size": collector.below_min_size,
    }


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
        for offset, length in windows(size):
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


def drop_caches(path=DROP_CACHES_PATH):
    """sync, then ask the kernel to drop clean page cache (1 = page cache only)."""
    os.sync()
    try:
        with open(path, "w") as handle:
            handle.write("1\n")
    except OSError as exc:
        raise PageCacheError("writing 1 to %s failed: %s" % (path, exc.strerror))


def _touch(region, size, pattern):
    """Write every page: untouched anonymous pages cost the kernel nothing."""
    region.seek(0)
    written = 0
    while written < size:
        piece = min(len(pattern), size - written)
        region.write(memoryview(pattern)[:piece])
        written += piece


def _inflate(keep_bytes, read, report):
    """Touch anonymous memory chunk by chunk until MemAvailable is down to ``keep_bytes``.

    Runs in the balloon process; the memory goes back when that process exits.
    """
    budget = memory_summary(read())["mem_available"] - keep_bytes
    pattern = b"\x01" * _PATTERN_SIZE
    regions = []
    touched = 0
    while True:
        size = balloon_chunk_size(memory_summary(read())["mem_available"], keep_bytes, budget - touched)
        if not size:
            return
        try:
            region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
        except (OSError, MemoryError):
            return  # strict overcommit refused more: the balloon stops where it is
        regions.append(region)
        _touch(region, size, pattern)
        touched += size
        report(touched)


def _balloon_process(writer, keep_bytes, read):
    """Body of the forked balloon process: never returns."""
    status = 0
    try:
        try:
            with open("/proc/self/oom_score_adj", "w") as handle:
                handle.write("%d\n" % BALLOON_OOM_SCORE_ADJ)
        except OSError as exc:
            raise PageCacheError(
                "the balloon cannot make itself the OOM killer's first choice (writing %d to "
                "/proc/self/oom_score_adj failed: %s), so it does not run: use method=fadvise or "
                "method=drop_caches" % (BALLOON_OOM_SCORE_ADJ, exc.strerror))
        _inflate(keep_bytes, read, lambda touched: os.write(writer, b"%d\n" % touched))
    except BaseException as exc:  # anything, reported to the parent: this process must not return
        status = 1
        try:
            os.write(writer, ("E %s\n" % " ".join(str(exc).split())).encode("utf-8", "replace"))
        except OSError:
            pass
    finally:
        os._exit(status)


def balloon(keep_bytes, read=read_meminfo):
    """Touch anonymous memory down to ``keep_bytes`` of MemAvailable, then free it.

    The kernel must reclaim clean page cache (anyone's, root's included) to back
    the pages. A forked process holds the balloon with oom_score_adj 1000, so if
    memory runs out anyway the OOM killer takes the balloon and nothing else.
    Returns (bytes touched, warning or None).
    """
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        _balloon_process(writer, keep_bytes, read)
    os.close(writer)
    try:
        with os.fdopen(reader, "rb") as progress:
            lines = progress.read().decode("utf-8", "replace").splitlines()
        _pid, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    errors = [line[2:] for line in lines if line.startswith("E ")]
    if errors:
        raise PageCacheError(errors[0])
    counts = [int(line) for line in lines if line.isdigit()]
    touched = counts[-1] if counts else 0
    if os.WIFSIGNALED(status):
        return touched, (
            "the balloon process (pid %d) was killed by signal %d after touching %d bytes: memory ran out "
            "and the OOM killer took the balloon (oom_score_adj %d) as meant; its memory is free again"
            % (pid, os.WTERMSIG(status), touched, BALLOON_OOM_SCORE_ADJ))
    return touched, None


def check_arguments(paths, method, min_size, keep_gib):
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
    if method == "balloon" and keep_gib < BALLOON_MIN_KEEP_GIB:
        raise PageCacheError(
            "keep_gib=%s is below the %s GiB floor: the balloon would starve the system of memory; "
            "give %s or more" % (keep_gib, BALLOON_MIN_KEEP_GIB, BALLOON_MIN_KEEP_GIB))
    if method == "drop_caches" and os.geteuid() != 0:
        raise PageCacheError(
            "method=drop_caches writes %s and needs root (euid is %d): use method=fadvise "
            "(no root needed) or run the task with become: true" % (DROP_CACHES_PATH, os.geteuid()))


def evict(paths=None, method="fadvise", follow_symlinks=True, min_size=0,
          keep_gib=6.0, missing="fail", check_mode=False, cross_filesystems=False):
    """Run one eviction and return the module's result, ``changed`` included.

    Raises PageCacheError on bad input before anything is evicted.
    """
    started = time.monotonic()
    check_arguments(paths, method, min_size, keep_gib)
    found = collect_targets(paths, follow_symlinks=follow_symlinks, min_size=min_size,
                            cross_filesystems=cross_filesystems)
    if found["missing"] and missing == "fail":
        raise PageCacheError("path(s) not found: %s (set missing=ignore to skip them)"
                             % ", ".join(found["missing"]))
    targets = found["targets"]
    skipped = [{"path": path, "reason": "missing"} for path in found["missing"]] + found["skipped"]

    memory_before = memory_summary(read_meminfo())
    balloon_room = 0
    balloon_bytes = 0
    warnings = []
    if method == "fadvise":
        handled = _measure_all(targets, skipped, evict=not check_mode)
    else:
        handled = _measure_all(targets, skipped)
        keep_bytes = int(keep_gib * GIB)
        balloon_room = max(0, memory_before["mem_available"] - keep_bytes)
        if not check_mode:
            if method == "drop_caches":
                drop_caches()
            else:
                balloon_bytes, warning = balloon(keep_bytes)
                if warning:
                    warnings.append(warning)
            _remeasure(targets, handled)
    memory_after = memory_summary(read_meminfo())

    measured = [pair for pair in handled.values() if pair[0] is not None]
    unmeasured = [index for index, pair in handled.items() if pair[0] is None]
    resident_before = sum(before for before, _after in measured)
    resident_after = sum(after for _before, after in measured)
    changed = decide_changed(check_mode, method, bool(paths), resident_before, resident_after,
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
    if warnings:
        result["warnings"] = warnings
    return result
