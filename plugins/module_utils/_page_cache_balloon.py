# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers for page_cache_evict: evict the whole page cache. Not a public API.

Either /proc/sys/vm/drop_caches, or a balloon of anonymous memory that makes the
kernel reclaim clean page cache to back it, then gives the memory back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import mmap
import os
import signal

from ansible_collections.dgx_spark.glm53.plugins.module_utils._meminfo import (
    memory_summary,
    read_meminfo,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._page_cache_errors import (
    PageCacheError,
)

DROP_CACHES_PATH = "/proc/sys/vm/drop_caches"
# The balloon looks at MemAvailable again after each chunk, so it overshoots its
# floor by at most one chunk even when something else takes memory meanwhile.
BALLOON_CHUNK = 64 << 20
# Below this much headroom another balloon chunk is not worth a syscall round.
BALLOON_MIN_CHUNK = 16 << 20
BALLOON_MIN_KEEP_GIB = 2.0
# On a machine under 16 GiB (a test VM, the lab's 4 GiB nodes) the floor is an eighth of
# MemTotal instead: 2 GiB there would leave the balloon no room at all.
BALLOON_MIN_KEEP_FRACTION = 8
# The balloon process is the OOM killer's first choice, before sshd, dockerd or the module.
BALLOON_OOM_SCORE_ADJ = 1000
_PATTERN_SIZE = 16 << 20
# The kernel backs a chunk mapped with MAP_POPULATE in the mmap call itself, as writing every
# page would, at half the CPU: on a lab node a 3 GiB balloon took 1.5 s populated against 2.7 s
# written page by page (no fault per page, no copy of the pattern). Linux only; 0 elsewhere,
# where every page is written instead.
MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0)
# Populating is best effort (the call succeeds even when the kernel backs fewer pages): a chunk
# whose resident size grew by less than this under its size is written page by page too.
_POPULATE_SLACK = 1 << 20
_STATM = "/proc/self/statm"


def balloon_chunk_size(mem_available, keep_bytes, budget_left,
                       chunk=BALLOON_CHUNK, minimum=BALLOON_MIN_CHUNK, page_size=mmap.PAGESIZE):
    """Size of the next balloon chunk, or 0 to stop.

    ``budget_left`` caps the total at the headroom seen at the start, so a system
    with swap (where MemAvailable may not fall as the balloon grows) cannot run away.
    """
    size = min(chunk, mem_available - keep_bytes, budget_left)
    size -= size % page_size
    return size if size >= minimum else 0


def balloon_min_keep(mem_total):
    """The lowest keep_gib the balloon accepts on a machine with ``mem_total`` bytes, in GiB."""
    if mem_total <= 0:
        return BALLOON_MIN_KEEP_GIB
    return min(BALLOON_MIN_KEEP_GIB, float(mem_total) / BALLOON_MIN_KEEP_FRACTION / (1 << 30))


def drop_caches(path=DROP_CACHES_PATH):
    """sync, then ask the kernel to drop clean page cache (1 = page cache only)."""
    os.sync()
    try:
        with open(path, "w") as handle:
            handle.write("1\n")
    except OSError as exc:
        raise PageCacheError("writing 1 to %s failed: %s" % (path, exc.strerror))


def _resident_bytes(path=_STATM):
    """This process's resident memory (statm's second field, in pages), or None if unreadable."""
    try:
        with open(path) as handle:
            return int(handle.read().split()[1]) * mmap.PAGESIZE
    except (OSError, ValueError, IndexError):
        return None


def _backed_chunk(size, pattern, populate=MAP_POPULATE, resident=_resident_bytes):
    """A private anonymous mapping of ``size`` bytes whose every page is backed by memory:
    populated by the kernel where it can, else (or where it backed fewer pages) written page by
    page. Raises OSError or MemoryError when the mapping itself is refused."""
    if populate:
        before = resident()
        region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | populate)
        after = resident()
        if before is not None and after is not None and after - before + _POPULATE_SLACK >= size:
            return region
    else:
        region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
    _touch(region, size, pattern)
    return region


def _touch(region, size, pattern):
    """Write every page: untouched anonymous pages cost the kernel nothing."""
    region.seek(0)
    written = 0
    while written < size:
        piece = min(len(pattern), size - written)
        region.write(memoryview(pattern)[:piece])
        written += piece


def _inflate(keep_bytes, read, report, target_bytes=None):
    """Touch anonymous memory chunk by chunk until MemAvailable is down to ``keep_bytes`` or,
    with ``target_bytes``, until MemFree plus the balloon reaches it: what MemFree will be once
    the balloon is freed, since every page the kernel found for it beyond MemFree was reclaimed.

    Runs in the balloon process; the memory goes back when that process exits. Reports
    (touched, None) after each chunk and (touched, MemFree + touched) after each reading.
    """
    budget = None
    pattern = b"\x01" * _PATTERN_SIZE
    regions = []
    touched = 0
    while True:
        summary = memory_summary(read())
        if budget is None:
            budget = summary["mem_available"] - keep_bytes
        report(touched, summary["mem_free"] + touched)
        if target_bytes is not None and summary["mem_free"] + touched >= target_bytes:
            return
        size = balloon_chunk_size(summary["mem_available"], keep_bytes, budget - touched)
        if not size:
            return
        try:
            region = _backed_chunk(size, pattern)
        except (OSError, MemoryError):
            return  # strict overcommit refused more: the balloon stops where it is
        regions.append(region)
        touched += size
        report(touched, None)


def _balloon_process(writer, keep_bytes, read, target_bytes):
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

        def report(touched, expected):
            os.write(writer, b"%d %s\n" % (touched, b"-" if expected is None else b"%d" % expected))

        _inflate(keep_bytes, read, report, target_bytes=target_bytes)
    except BaseException as exc:  # anything, reported to the parent: this process must not return
        status = 1
        try:
            os.write(writer, ("E %s\n" % " ".join(str(exc).split())).encode("utf-8", "replace"))
        except OSError:
            pass
    finally:
        os._exit(status)


def balloon(keep_bytes, read=read_meminfo, target_bytes=None):
    """Touch anonymous memory down to ``keep_bytes`` of MemAvailable (or, with ``target_bytes``,
    only until MemFree plus the balloon reaches it), then free it.

    The kernel must reclaim clean page cache (anyone's, root's included) to back
    the pages. A forked process holds the balloon with oom_score_adj 1000, so if
    memory runs out anyway the OOM killer takes the balloon and nothing else.
    Returns (bytes touched, warning or None, the MemFree expected once it is freed: MemFree
    plus the balloon at its last reading, or None if it made none).
    """
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        _balloon_process(writer, keep_bytes, read, target_bytes)
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
    # "<touched> <MemFree + touched>" after a reading, "<touched> -" after a chunk.
    counts = [line.split() for line in lines if len(line.split()) == 2 and line.split()[0].isdigit()]
    touched = int(counts[-1][0]) if counts else 0
    readings = [int(words[1]) for words in counts if words[1].isdigit()]
    expected = readings[-1] if readings else None
    if os.WIFSIGNALED(status):
        return touched, (
            "the balloon process (pid %d) was killed by signal %d after touching %d bytes: memory ran out "
            "and the OOM killer took the balloon (oom_score_adj %d) as meant; its memory is free again"
            % (pid, os.WTERMSIG(status), touched, BALLOON_OOM_SCORE_ADJ)), expected
    return touched, None, expected
