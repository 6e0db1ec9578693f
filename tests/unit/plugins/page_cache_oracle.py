"""What the page_cache_evict tests measure the page cache with, independently of the module.

Residency comes from util-linux ``fincore`` run as a subprocess: other code than
the module's, the same kernel. It is required, not a fallback: without it these
tests fail and say which package to install.

The page cache is shared with everything else on the machine. Between a test's
look and the module's own measurement the kernel may reclaim pages (memory
pressure, as on a fresh clone right after ``make setup`` and sanity filled the
cache) or someone may write drop_caches. A ``Look`` therefore bounds what the
module may report: never more than fincore saw (nothing reads the test's files
meanwhile), never less than that minus what the kernel reclaimed in between.
"""

import mmap
import os
import shutil
import subprocess
import tempfile
import time

import pytest

MIB = 1 << 20
PAGE = mmap.PAGESIZE
FINCORE = shutil.which("fincore")
VMSTAT = "/proc/vmstat"


def resident(path):
    """Page-cache bytes (whole pages) of ``path``, by fincore."""
    if not FINCORE:
        pytest.fail("the page-cache tests measure with fincore, which is not on PATH: "
                    "install util-linux (apt-get install util-linux)")
    out = subprocess.run([FINCORE, "--bytes", "--noheadings", "--raw", "--output", "RES", path],
                         check=True, capture_output=True, text=True).stdout
    return int(out.split()[0])


def resident_total(paths):
    return sum(resident(path) for path in paths)


def footprint(path):
    """Cache a fully warm file takes: whole pages."""
    return -(-os.path.getsize(path) // PAGE) * PAGE


def write_file(path, size, sync=True):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(os.urandom(size))
        if sync:
            handle.flush()
            os.fsync(handle.fileno())
    return path


def warm(*paths):
    """Read ``paths`` into the page cache. How much stays is for a Look to say."""
    for path in paths:
        since = Reclaim()
        with open(path, "rb") as handle:
            while handle.read(4 * MIB):
                pass
        # Nothing cached at all is a failure, unless the kernel may have taken it all since.
        assert resident(path) > 0 or since.lost_at_most(footprint(path), need=footprint(path)) == footprint(path), \
            "could not warm %s" % path


# Reclaim takes pages off the page cache first and counts them in /proc/vmstat when its
# batch (SWAP_CLUSTER_MAX = 32 pages) ends, so a reclaimer busy while we read (kswapd, or
# direct reclaim on any CPU) may have taken up to one batch not yet counted. Seen once in
# a fresh-clone run: the module measured one page less than the counters allowed.
RECLAIM_IN_FLIGHT = 32 * PAGE * ((os.cpu_count() or 1) + 1)
# Proactive reclaim counts in pgsteal_file only once its whole list is done: DAMON's pageout
# (a paddr scheme runs on CI's and this sandbox's kernel) takes a region of megabytes at a time,
# and a fresh-clone run saw 2 MiB gone with 384 KiB counted. A loss the counters do not explain
# yet is read again until they catch up, for at most this long.
RECLAIM_SETTLE_SECONDS = 3.0


def _reclaim_counters():
    """drop_caches writes and pages the kernel reclaimed so far, from /proc/vmstat."""
    with open(VMSTAT) as handle:
        counters = dict((name, int(value)) for name, value in (line.split() for line in handle))
    if "pgsteal_file" in counters:  # Linux 5.8+: every reclaimed file page, memory cgroups included
        stolen = counters["pgsteal_file"]
    else:
        stolen = sum(value for name, value in counters.items() if name.startswith("pgsteal_"))
    return {"drop_pagecache": counters.get("drop_pagecache", 0), "stolen": stolen}


class Reclaim(object):
    """What the kernel took from the page cache from now on: reclaim and drop_caches writes."""

    def __init__(self):
        self._counters = _reclaim_counters()

    def lost_at_most(self, cached, own_drops=0, need=0):
        """The most the kernel may have taken since, out of ``cached`` bytes of page cache.

        ``own_drops``: drop_caches writes the code under test made meanwhile. Anyone else's
        (another test run on the machine) may have taken it all. ``need``: the loss the caller
        sees; while the counters explain less, they are read again (a reclaim in flight is
        counted when it ends) until RECLAIM_SETTLE_SECONDS have passed.
        """
        deadline = time.monotonic() + RECLAIM_SETTLE_SECONDS
        while True:
            now = _reclaim_counters()
            if now["drop_pagecache"] - self._counters["drop_pagecache"] > own_drops:
                return cached
            lost = min(cached, (now["stolen"] - self._counters["stolen"]) * PAGE + RECLAIM_IN_FLIGHT)
            if lost >= need or time.monotonic() >= deadline:
                return lost
            time.sleep(0.1)


def expect_warm(since, paths):
    """A Look at ``paths`` just read in full: all of them cached, less what the kernel took ``since``.

    Reading a file does not keep it cached: reclaim, or another process's drop_caches,
    may take pages before the look. Returns the Look.
    """
    look = Look(paths)
    full = sum(footprint(path) for path in paths)
    lost = since.lost_at_most(full, need=full - look.bytes)
    assert full - lost <= look.bytes <= full, (
        "fincore sees %d of the %d bytes just read; the kernel took at most %d since" % (look.bytes, full, lost))
    return look


class Look(object):
    """fincore's count of ``paths`` now, to compare what the module reports later with."""

    def __init__(self, paths):
        self.paths = list(paths)
        self._since = Reclaim()  # first, so reclaim during the look counts too
        self.bytes = resident_total(self.paths)

    def lost_at_most(self, own_drops=0, need=0):
        """The most the kernel may have taken from these files since the look.

        ``own_drops``: drop_caches writes the code under test made after it measured.
        """
        return self._since.lost_at_most(self.bytes, own_drops, need=need)

    def expect(self, measured, what, own_drops=0):
        """Assert ``measured`` is what was resident at the look, less at most what was reclaimed since."""
        lost = self.lost_at_most(own_drops, need=self.bytes - measured)
        assert self.bytes - lost <= measured <= self.bytes, (
            "%s is %d bytes; fincore saw %d just before and the kernel reclaimed at most %d since"
            % (what, measured, self.bytes, lost))
        return measured


def evictable_base():
    """A directory on a file system whose page cache can be evicted (tmpfs cannot)."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    for base in (tempfile.gettempdir(), os.path.join(repo, "tests", "output", "tmp")):
        os.makedirs(base, exist_ok=True)
        probe_dir = tempfile.mkdtemp(prefix="pce-probe-", dir=base)
        try:
            probe = write_file(os.path.join(probe_dir, "probe"), MIB)
            warm(probe)
            fd = os.open(probe, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            if resident(probe) == 0:  # on tmpfs the pages are the file and stay
                return base
        finally:
            shutil.rmtree(probe_dir)
    pytest.fail("no directory on an evictable (disk) file system for the page-cache tests")
    return None
