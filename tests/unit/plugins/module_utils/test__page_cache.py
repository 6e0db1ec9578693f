"""page-cache helpers, tested on the real page cache of a disk file system.

Residency is checked with util-linux ``fincore`` (page_cache_oracle), never with
the code under test, and compared with a look taken just before the code ran.
Nothing is mocked: posix_fadvise, mincore, cachestat, drop_caches and the
balloon's memory are real. Only the MemAvailable the balloon steers by is the
test's own (see the balloon section): the machine's moves with everything else.
"""

import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _page_cache as pc
from ansible_collections.dgx_spark.glm53.plugins.module_utils import _page_cache_balloon as pcb
from ansible_collections.dgx_spark.glm53.plugins.module_utils import _page_cache_files as pcf
from ansible_collections.dgx_spark.glm53.plugins.module_utils._meminfo import GIB, read_meminfo
from ansible_collections.dgx_spark.glm53.plugins.module_utils._page_cache_errors import PageCacheError
from ansible_collections.dgx_spark.glm53.tests.unit.plugins import processes
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.page_cache_oracle import (
    MIB,
    PAGE,
    Look,
    evictable_base,
    footprint,
    resident,
    resident_total,
    warm,
    write_file,
)

NOBODY = 65534


# --- fixtures -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def scratch_base():
    return evictable_base()


@pytest.fixture
def scratch(scratch_base):
    """Per-test directory, world-traversable so tests can drop privileges into it."""
    path = tempfile.mkdtemp(prefix="pce-", dir=scratch_base)
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["cachestat", "mincore"])
def probe(request, monkeypatch):
    """Run the test with each residency probe the module can use."""
    libc = pc._libc()
    if request.param == "mincore":
        monkeypatch.setattr(libc, "use_cachestat", False)
    else:
        with open(__file__, "rb") as handle:
            libc.resident_bytes(handle.fileno(), os.path.getsize(__file__))
        if not libc.use_cachestat:
            pytest.skip("this kernel (or its seccomp filter) has no cachestat(2)")
    return request.param


def run_unprivileged(func):
    """Run ``func()`` as an unprivileged user and return its JSON-able result.

    As root, fork and setuid to nobody (chmod 000 does not stop root); otherwise
    we already are unprivileged and run it here.
    """
    if os.geteuid() != 0:
        return func()

    def drop_to_nobody():
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    return processes.in_child(func, setup=drop_to_nobody, passes=(PageCacheError,))


# --- pure helpers -------------------------------------------------------------------


@pytest.mark.parametrize("vec, length, expected", [
    (b"\x01\x01\x01", 3 * 4096, 3 * 4096),
    (b"\x01\x00\x01", 3 * 4096, 2 * 4096),
    (b"\x01\x01\x01", 2 * 4096 + 100, 3 * 4096),         # a partial last page is a whole page
    (b"\x01\x01\x00", 2 * 4096 + 100, 2 * 4096),
    (b"\x03\x02\x00", 3 * 4096, 4096),                   # only bit 0 means resident
    (b"\x01\x01\x01\x01", 2 * 4096, 2 * 4096),           # a longer vector is cut to the length
    (b"", 0, 0),
])
def test_resident_bytes_in_vector(vec, length, expected):
    assert pc.resident_bytes_in_vector(vec, length, page_size=4096) == expected


@pytest.mark.parametrize("size, window, expected", [
    (0, 8, []),
    (8, 8, [(0, 8)]),
    (20, 8, [(0, 8), (8, 8), (16, 4)]),
])
def test_windows_cover_the_file(size, window, expected):
    assert pc.windows(size, window) == expected


@pytest.mark.parametrize("available, keep, budget, expected", [
    (10 * GIB, 6 * GIB, 4 * GIB, 64 * MIB),             # plenty of room: a full chunk
    (6 * GIB + 30 * MIB, 6 * GIB, 4 * GIB, 30 * MIB),   # last, partial chunk
    (6 * GIB + 10 * MIB, 6 * GIB, 4 * GIB, 0),          # under the minimum chunk: stop
    (5 * GIB, 6 * GIB, 4 * GIB, 0),                     # already under keep: stop
    (10 * GIB, 6 * GIB, 40 * MIB, 40 * MIB),            # the starting budget caps the total
    (10 * GIB, 6 * GIB, 40 * MIB + 5, 40 * MIB),        # rounded down to whole pages
])
def test_balloon_chunk_size(available, keep, budget, expected):
    assert pcb.balloon_chunk_size(available, keep, budget, page_size=4096) == expected


@pytest.mark.parametrize("args, expected", [
    ((False, "fadvise", True, 100, 0, 0, 0), True),
    ((False, "fadvise", True, 100, 100, 0, 0), False),
    ((False, "fadvise", True, 0, 0, 5, 1), False),        # with paths, Cached does not matter
    ((False, "drop_caches", False, 0, 0, 5, 1), True),    # without paths, Cached decides
    ((False, "balloon", False, 0, 0, 5, 5), False),
    ((True, "fadvise", True, 100, 100, 0, 0), True),      # check mode: would evict
    ((True, "fadvise", True, 0, 0, 9, 9), False),
    ((True, "drop_caches", False, 0, 0, 9, 9), True),
    ((True, "balloon", False, 0, 0, 9, 9), False),        # no room for a balloon
])
def test_decide_changed(args, expected):
    assert pc.decide_changed(*args) is expected


def test_decide_changed_balloon_check_mode_with_room():
    assert pc.decide_changed(True, "balloon", True, 100, 100, 0, 0, balloon_room=GIB) is True


# --- measurement ----------------------------------------------------------------------


def test_resident_bytes_matches_an_independent_measure(scratch, probe):
    empty = write_file(os.path.join(scratch, "empty"), 0)
    odd = write_file(os.path.join(scratch, "odd"), 3 * MIB + 123)
    warm(odd)
    assert pc.resident_bytes(empty) == 0
    look = Look([odd])
    look.expect(pc.resident_bytes(odd), "resident_bytes of a warm file")
    assert look.bytes % PAGE == 0 < look.bytes <= footprint(odd)
    fd = os.open(odd, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    assert pc.resident_bytes(odd) == resident(odd) == 0
    fd = os.open(odd, os.O_RDONLY)
    try:  # warm only the first MiB: FADV_RANDOM turns readahead off
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        assert len(os.pread(fd, MIB, 0)) == MIB
    finally:
        os.close(fd)
    look = Look([odd])
    look.expect(pc.resident_bytes(odd), "resident_bytes of a partly warm file")
    assert 0 < look.bytes <= MIB


def test_resident_bytes_spans_several_windows(scratch, monkeypatch):
    # A small window exercises mincore's multi-window path (real mmap and mincore per window).
    monkeypatch.setattr(pc._libc(), "use_cachestat", False)
    monkeypatch.setattr(pc, "WINDOW", MIB)
    path = write_file(os.path.join(scratch, "big"), 5 * MIB + 4097)
    warm(path)
    look = Look([path])
    look.expect(pc.resident_bytes(path), "resident_bytes over six 1 MiB windows")


# --- eviction with fadvise -----------------------------------------------------------------


def test_fadvise_evicts_a_directory_and_is_idempotent(scratch, probe):
    files = [write_file(os.path.join(scratch, "d", "f%d" % i), (i + 1) * MIB + i) for i in range(4)]
    files.append(write_file(os.path.join(scratch, "d", "sub", "deep"), 2 * MIB))
    warm(*files)
    total = sum(os.path.getsize(f) for f in files)

    look = Look(files)
    result = pc.evict([os.path.join(scratch, "d")])

    assert [resident(f) for f in files] == [0] * len(files)
    assert result["changed"] is True
    assert result["method"] == "fadvise"
    assert result["file_count"] == 5
    assert result["file_bytes"] == total
    look.expect(result["resident_bytes_before"], "resident_bytes_before")
    assert result["resident_bytes_after"] == 0
    assert result["evicted_bytes"] == result["resident_bytes_before"]
    assert result["skipped_paths"] == []
    assert result["unmeasured"] == {"files": 0, "bytes": 0}
    assert result["measured_with"] == probe
    for key in ("mem_free", "mem_available", "cached"):
        assert result["memory_before"][key] > 0 and result["memory_after"][key] > 0
    assert result["elapsed"] >= 0

    again = pc.evict([os.path.join(scratch, "d")])
    assert again["changed"] is False
    assert again["resident_bytes_before"] == 0


def test_fadvise_evicts_dirty_pages_of_a_fresh_copy(scratch):
    # A file just written is dirty: DONTNEED alone only starts writeback.
    path = write_file(os.path.join(scratch, "fresh"), 8 * MIB, sync=False)
    look = Look([path])
    result = pc.evict([path])
    assert resident(path) == 0
    look.expect(result["resident_bytes_before"], "resident_bytes_before")
    assert result["resident_bytes_after"] == 0


def _hf_layout(root):
    """models--org--name/{blobs,snapshots/<sha>} as the Hugging Face hub lays it out."""
    repo = os.path.join(root, "hub", "models--org--name")
    sha = "0123456789abcdef0123456789abcdef01234567"
    blobs = {
        "config.json": ("a" * 64, 3000),
        "model-00001-of-00002.safetensors": ("b" * 64, 3 * MIB),
        "model-00002-of-00002.safetensors": ("c" * 64, 2 * MIB + 17),
    }
    snapshot = os.path.join(repo, "snapshots", sha)
    os.makedirs(snapshot)
    blob_paths = []
    for name, (digest, size) in blobs.items():
        blob_paths.append(write_file(os.path.join(repo, "blobs", digest), size))
        os.symlink(os.path.join("..", "..", "blobs", digest), os.path.join(snapshot, name))
    return repo, snapshot, blob_paths


def test_hf_snapshot_symlinks_evict_the_blobs_once(scratch, probe):
    repo, snapshot, blobs = _hf_layout(scratch)
    warm(*blobs)
    total = sum(os.path.getsize(b) for b in blobs)

    look = Look(blobs)
    result = pc.evict([snapshot])
    assert [resident(b) for b in blobs] == [0, 0, 0]
    assert result["file_count"] == 3 and result["file_bytes"] == total
    look.expect(result["evicted_bytes"], "evicted_bytes")
    # The links into blobs/ lead outside the snapshot: followed, since they are links to files.
    assert result["skipped_paths"] == []

    # The whole repo reaches each blob twice (directly and via the snapshot): counted once.
    warm(*blobs)
    look = Look(blobs)
    result = pc.evict([repo])
    assert result["file_count"] == 3 and result["duplicates"] == 3
    look.expect(result["evicted_bytes"], "evicted_bytes")


def test_not_following_symlinks_leaves_the_blobs_and_says_so(scratch):
    _repo, snapshot, blobs = _hf_layout(scratch)
    warm(*blobs)
    look = Look(blobs)
    result = pc.evict([snapshot], follow_symlinks=False)
    look.expect(resident_total(blobs), "what fincore sees of the blobs afterwards")
    assert result["file_count"] == 0 and result["changed"] is False
    assert len(result["skipped_paths"]) == 3
    assert {s["reason"] for s in result["skipped_paths"]} == {"symlink not followed: follow_symlinks is false"}


def test_named_symlink_is_resolved_even_without_following(scratch):
    target = write_file(os.path.join(scratch, "real"), 2 * MIB)
    link = os.path.join(scratch, "link")
    os.symlink(target, link)
    warm(target)
    result = pc.evict([link], follow_symlinks=False)
    assert resident(target) == 0 and result["file_count"] == 1


def test_hard_links_and_repeated_paths_count_once(scratch):
    path = write_file(os.path.join(scratch, "d", "file"), 3 * MIB)
    os.link(path, os.path.join(scratch, "d", "hardlink"))
    warm(path)
    look = Look([path])
    result = pc.evict([path, path, os.path.join(scratch, "d"), os.path.join(scratch, "d", "hardlink")])
    assert result["file_count"] == 1
    assert result["file_bytes"] == 3 * MIB
    # Reached five times: two named paths, two names in the walk, the named hard link.
    assert result["duplicates"] == 4
    look.expect(result["evicted_bytes"], "evicted_bytes")
    assert resident(path) == 0


def test_check_mode_measures_and_evicts_nothing(scratch, probe):
    files = [write_file(os.path.join(scratch, "f%d" % i), 2 * MIB) for i in range(3)]
    warm(*files)
    look = Look(files)
    result = pc.evict([scratch], check_mode=True)
    look.expect(resident_total(files), "what fincore sees after check mode")
    assert result["changed"] is True
    look.expect(result["resident_bytes_before"], "resident_bytes_before")
    assert result["resident_bytes_after"] == result["resident_bytes_before"]
    assert result["evicted_bytes"] == 0


def test_missing_path_fails_naming_it_before_evicting(scratch):
    present = write_file(os.path.join(scratch, "present"), 2 * MIB)
    warm(present)
    gone = os.path.join(scratch, "no-such-dir")
    look = Look([present])
    with pytest.raises(PageCacheError, match="no-such-dir"):
        pc.evict([present, gone])
    look.expect(resident(present), "what fincore sees after the refusal")


def test_missing_path_ignored_is_listed(scratch):
    present = write_file(os.path.join(scratch, "present"), 2 * MIB)
    dangling = os.path.join(scratch, "dangling")
    os.symlink(os.path.join(scratch, "nowhere"), dangling)
    warm(present)
    gone = os.path.join(scratch, "no-such-dir")
    result = pc.evict([present, gone, dangling], missing="ignore")
    assert resident(present) == 0
    assert {"path": gone, "reason": "missing"} in result["skipped_paths"]
    assert {"path": dangling, "reason": "missing"} in result["skipped_paths"]


def test_odd_entries_in_a_walk_are_listed_not_hidden(scratch):
    root = os.path.join(scratch, "tree")
    data = write_file(os.path.join(root, "data"), MIB)
    os.mkfifo(os.path.join(root, "fifo"))
    os.symlink(os.path.join(root, "nowhere"), os.path.join(root, "broken"))
    os.symlink(".", os.path.join(root, "loop"))  # a directory cycle must not hang the walk
    warm(data)
    result = pc.evict([root])
    reasons = {os.path.basename(s["path"]): s["reason"] for s in result["skipped_paths"]}
    assert reasons == {"fifo": "not a regular file", "broken": "broken symlink"}
    assert result["file_count"] == 1 and resident(data) == 0


def test_directory_links_leading_outside_paths_are_not_walked(scratch):
    cache = os.path.join(scratch, "cache")
    own = write_file(os.path.join(cache, "own"), MIB)
    outside = os.path.join(scratch, "outside")
    weights = write_file(os.path.join(outside, "weights"), 2 * MIB)
    single = write_file(os.path.join(scratch, "single"), MIB)
    os.symlink(os.path.join("..", "outside"), os.path.join(cache, "relative"))
    os.symlink(outside, os.path.join(cache, "absolute"))
    os.symlink(single, os.path.join(cache, "file-link"))  # a link to a file is followed wherever it leads
    warm(own, weights, single)
    look = Look([weights])

    result = pc.evict([cache])

    look.expect(resident(weights), "what fincore sees of the file behind the directory links")
    assert resident(own) == resident(single) == 0
    assert result["file_count"] == 2
    reason = "symlink to a directory outside paths: %s" % os.path.realpath(outside)
    assert result["skipped_paths"] == [{"path": os.path.join(cache, "absolute"), "reason": reason},
                                       {"path": os.path.join(cache, "relative"), "reason": reason}]

    # Named as well, the directory is inside paths: walked once, nothing skipped.
    result = pc.evict([cache, outside])
    assert result["file_count"] == 3 and result["skipped_paths"] == []


def test_links_to_the_root_or_usr_in_a_cache_are_not_walked(scratch):
    cache = os.path.join(scratch, "cache")
    own = write_file(os.path.join(cache, "model.safetensors"), MIB)
    os.symlink("/", os.path.join(cache, "slash"))
    os.symlink("/usr", os.path.join(cache, "usr"))
    found = pcf.collect_targets([cache])
    # Walked, / or /usr would add their files (or skip entries of their own): only the two links are listed.
    assert [target.path for target in found["targets"]] == [own]
    assert found["skipped"] == [
        {"path": os.path.join(cache, "slash"), "reason": "symlink to a directory outside paths: /"},
        {"path": os.path.join(cache, "usr"), "reason": "symlink to a directory outside paths: %s" % os.path.realpath("/usr")},
    ]


@pytest.fixture
def other_fs(scratch):
    """A tmpfs mounted inside ``scratch``: another file system under the walked directory."""
    if os.geteuid() != 0:
        pytest.skip("mounting a file system needs root")
    mnt = os.path.join(scratch, "cache", "mnt")
    os.makedirs(mnt)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "pce-test", mnt],
                             capture_output=True, text=True, check=False)
    if mounted.returncode:
        pytest.skip("cannot mount a tmpfs here: %s" % mounted.stderr.strip())
    try:
        yield mnt
    finally:
        subprocess.run(["umount", mnt], check=True)


def test_other_file_systems_are_walked_only_when_asked(scratch, other_fs):
    cache = os.path.dirname(other_fs)
    own = write_file(os.path.join(cache, "own"), MIB)
    write_file(os.path.join(other_fs, "elsewhere"), MIB)
    os.symlink("mnt", os.path.join(cache, "via-link"))  # inside paths, but on the other file system

    result = pc.evict([cache])
    assert result["file_count"] == 1 and resident(own) == 0
    assert result["skipped_paths"] == [
        {"path": other_fs, "reason": "on another file system: cross_filesystems is false"},
        {"path": os.path.join(cache, "via-link"), "reason": "on another file system: cross_filesystems is false"},
    ]

    result = pc.evict([cache], cross_filesystems=True)
    assert result["file_count"] == 2 and result["skipped_paths"] == []
    # Named, the mount point is a root of its own: walked.
    assert pc.evict([other_fs])["file_count"] == 1


def test_min_size_leaves_small_files_and_counts_them(scratch):
    small = write_file(os.path.join(scratch, "small"), MIB)
    big = write_file(os.path.join(scratch, "big"), 4 * MIB)
    warm(small, big)
    look = Look([small])
    result = pc.evict([scratch], min_size=2 * MIB)
    look.expect(resident(small), "what fincore sees of the small file afterwards")
    assert resident(big) == 0
    assert result["file_count"] == 1
    assert result["below_min_size"] == {"files": 1, "bytes": MIB}


def test_unreadable_file_is_skipped_with_reason(scratch):
    readable = write_file(os.path.join(scratch, "readable"), 2 * MIB)
    locked = write_file(os.path.join(scratch, "locked"), 2 * MIB)
    warm(readable, locked)
    os.chmod(locked, 0)

    look = Look([locked])
    result = run_unprivileged(lambda: pc.evict([scratch]))

    assert result["skipped_paths"] == [{"path": locked, "reason": "unreadable: Permission denied"}]
    look.expect(resident(locked), "what fincore sees of the unreadable file afterwards")
    # A file the user may only read is still evicted: no root needed.
    assert resident(readable) == 0
    assert result["file_count"] == 1
    if os.geteuid() == 0:
        # root owns it, so mincore hides its cache from nobody: evicted, not measured.
        assert result["unmeasured"] == {"files": 1, "bytes": 2 * MIB}
        assert result["changed"] is True and result["evicted_bytes"] == 0


def test_unreadable_directory_is_skipped_with_reason(scratch):
    hidden = os.path.join(scratch, "hidden")
    write_file(os.path.join(hidden, "inner"), MIB)
    os.chmod(hidden, 0)
    try:
        result = run_unprivileged(lambda: pc.evict([scratch]))
    finally:
        os.chmod(hidden, stat.S_IRWXU)
    assert result["skipped_paths"] == [{"path": hidden, "reason": "unreadable directory: Permission denied"}]


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, message", [
    ({"paths": None}, "needs paths"),
    ({"paths": []}, "needs paths"),
    ({"min_size": -1}, "min_size must be 0 or more bytes, got -1"),
    ({"paths": [""]}, "paths has an empty entry"),
    ({"keep_gib": float("nan")}, "keep_gib must be a finite number of GiB, got nan"),
    ({"method": "balloon", "keep_gib": float("inf")}, "keep_gib must be a finite number of GiB, got inf"),
    # Under any floor (2 GiB, or an eighth of MemTotal on a smaller machine).
    ({"method": "balloon", "keep_gib": 0.01}, "keep_gib=0.01 is below the .* GiB floor"),
    ({"method": "balloon", "free_target_gib": 0.0}, "free_target_gib must be a positive finite number"),
    ({"method": "balloon", "free_target_gib": float("inf")}, "free_target_gib must be a positive finite number"),
    ({"method": "fadvise", "free_target_gib": 100.0}, "free_target_gib is for method=balloon only"),
    ({"method": "nonsense"}, "method must be one of"),
])
def test_bad_input_is_refused_before_anything_is_evicted(scratch, kwargs, message):
    present = write_file(os.path.join(scratch, "present"), 2 * MIB)
    warm(present)
    look = Look([present])
    with pytest.raises(PageCacheError, match=message):
        pc.evict(**dict({"paths": [scratch]}, **kwargs))
    look.expect(resident(present), "what fincore sees after the refusal")


def test_drop_caches_without_root_is_refused(scratch):
    with pytest.raises(PageCacheError, match="use method=fadvise .*become: true"):
        run_unprivileged(lambda: pc.evict([scratch], method="drop_caches"))


@pytest.mark.skipif(os.geteuid() != 0, reason="drop_caches needs root")
def test_drop_caches_as_root_empties_the_targets(scratch):
    if not os.access(pcb.DROP_CACHES_PATH, os.W_OK):
        pytest.skip("%s is not writable here (read-only /proc/sys)" % pcb.DROP_CACHES_PATH)
    path = write_file(os.path.join(scratch, "f"), 4 * MIB)
    warm(path)
    look = Look([path])
    result = pc.evict([path], method="drop_caches")
    assert resident(path) == 0
    assert result["changed"] is True
    # The module measured before it wrote drop_caches: that one write takes nothing from its figure.
    look.expect(result["resident_bytes_before"], "resident_bytes_before", own_drops=1)
    assert result["evicted_bytes"] == result["resident_bytes_before"]


# --- balloon ---------------------------------------------------------------------------------
#
# MemAvailable is the whole machine's: anything else running moves it by more than these tests
# could allow for. So the balloon here reads a MemAvailable made of what the test controls: a
# starting figure, less what the balloon process itself holds in anonymous memory (the kernel's
# exact count in /proc/self/smaps_rollup), less or plus what "other processes" do at a given
# reading. balloon() takes that reader (its ``read`` argument); the memory is real and touched.


BALLOON_BASE = 8 * GIB  # the MemAvailable the balloon starts from; only the difference to keep is allocated
LOW_FREE = 64 * MIB  # where MemFree stops falling in OwnMemory(free=...): the kernel reclaims page cache from there


def _anonymous():
    """Anonymous memory of the calling process, in bytes: exact (a page-table walk), unlike VmRSS."""
    with open("/proc/self/smaps_rollup") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("Anonymous:"))


class OwnMemory(object):
    """A meminfo reader for the balloon process, and what it saw, one JSON line per reading.

    ``others``: {reading number (1 is the first): bytes other processes take (negative: free) from then on}.
    ``kill_at``: once the balloon holds this much, it is SIGKILLed at its next reading, as the OOM killer
    would (from outside; for the parent the outcome is the same: killed by signal 9).
    """

    def __init__(self, log, available=BALLOON_BASE, others=None, kill_at=None, free=None):
        self.log = str(log)
        self.available = available
        # MemFree, when given: it falls with what the balloon holds down to LOW_FREE; past that the
        # kernel backs the balloon with reclaimed page cache (MemAvailable falls all the same).
        self.free = free
        self.others = others or {}
        self.kill_at = kill_at
        self.readings = 0
        self.first = None

    def __call__(self):
        held = _anonymous()
        if self.first is None:
            self.first = held
        self.readings += 1
        taken = sum(size for at, size in self.others.items() if at <= self.readings)
        available = self.available - (held - self.first) - taken
        with open("/proc/self/oom_score_adj") as handle:
            adj = int(handle.read())
        line = json.dumps({"pid": os.getpid(), "oom_score_adj": adj, "held": held - self.first,
                           "available": available}) + "\n"
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        if self.kill_at is not None and held - self.first >= self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.free is None:
            return {"MemAvailable": available, "MemFree": available, "Cached": 0}
        free = max(self.free - (held - self.first) - taken, LOW_FREE)
        return {"MemAvailable": available, "MemFree": free, "Cached": available - free}

    def seen(self):
        with open(self.log) as handle:
            return [json.loads(line) for line in handle]


def _children():
    """Processes whose parent is this one."""
    me = str(os.getpid())
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % pid) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == me:
            found.append(int(pid))
    return found


def _own_oom_score_adj():
    with open("/proc/self/oom_score_adj") as handle:
        return int(handle.read())


def test_balloon_allocates_down_to_keep_and_gives_it_back(scratch, tmp_path, monkeypatch):
    path = write_file(os.path.join(scratch, "f"), MIB)
    warm(path)
    memory = OwnMemory(tmp_path / "balloon.jsonl")
    balloon = pcb.balloon
    # On _page_cache, not _page_cache_balloon: evict() looks the name up in the module that imports it.
    monkeypatch.setattr(pc, "balloon",
                        lambda keep_bytes, target_bytes=None: balloon(keep_bytes, read=memory, target_bytes=target_bytes))
    room = 256 * MIB
    own = _own_oom_score_adj()

    result = pc.evict([path], method="balloon", keep_gib=(BALLOON_BASE - room) / GIB)

    assert result["method"] == "balloon" and result["file_count"] == 1
    # Down to keep: the room less the balloon process's own memory, within one chunk; never past it.
    assert room - pcb.BALLOON_CHUNK < result["balloon_bytes"] <= room, result["balloon_bytes"]
    seen = memory.seen()
    assert seen[-1]["held"] >= result["balloon_bytes"], seen  # touched, not only mapped
    # It was another process, the OOM killer's first choice; it is gone, and this one is as it was.
    assert {(r["pid"], r["oom_score_adj"]) for r in seen} == {(seen[0]["pid"], pcb.BALLOON_OOM_SCORE_ADJ)}
    assert seen[0]["pid"] != os.getpid() and seen[0]["pid"] not in _children()
    assert _own_oom_score_adj() == own


def test_balloon_stops_at_its_floor_when_others_take_memory(tmp_path):
    # After two chunks other processes take 192 MiB: the balloon must stop 192 MiB short of its
    # starting budget, where MemAvailable reaches keep, not go on to the budget.
    room, taken = 512 * MIB, 192 * MIB
    memory = OwnMemory(tmp_path / "balloon.jsonl", others={3: taken})
    keep = BALLOON_BASE - room
    touched, warning, _expected = pcb.balloon(keep, read=memory)
    assert warning is None
    assert room - taken - pcb.BALLOON_CHUNK < touched <= room - taken, touched
    # MemAvailable never went below keep by more than what a chunk could not see coming.
    lowest = min(r["available"] for r in memory.seen())
    assert lowest >= keep - pcb.BALLOON_MIN_CHUNK, ((keep - lowest) / MIB, memory.seen())


def test_balloon_stops_at_its_starting_budget_when_others_free_memory(tmp_path):
    # Memory freed while it inflates does not make the balloon take more than the room it started with.
    room = 256 * MIB
    memory = OwnMemory(tmp_path / "balloon.jsonl", others={3: -GIB})
    touched, warning, _expected = pcb.balloon(BALLOON_BASE - room, read=memory)
    assert warning is None
    assert room - pcb.BALLOON_CHUNK < touched <= room, touched


def test_balloon_with_a_target_stops_once_memfree_plus_the_balloon_reaches_it(tmp_path):
    # 512 MiB free, the rest of 8 GiB available is page cache: to make 1 GiB free the balloon must
    # take the 448 MiB of free memory over the watermark and then 512 MiB + 64 MiB of cache.
    memory = OwnMemory(tmp_path / "balloon.jsonl", free=512 * MIB)
    target = GIB
    touched, warning, expected = pcb.balloon(2 * GIB, read=memory, target_bytes=target)
    assert warning is None
    assert target <= expected < target + pcb.BALLOON_CHUNK, expected / MIB
    # Far less than MemAvailable down to keep (6 GiB): it stopped at the target.
    needed = target - LOW_FREE
    assert needed <= touched < needed + pcb.BALLOON_CHUNK + pcb.BALLOON_MIN_CHUNK, touched / MIB


def test_balloon_with_a_target_it_cannot_reach_stops_at_keep_and_says_so(tmp_path):
    memory = OwnMemory(tmp_path / "balloon.jsonl", free=512 * MIB)
    keep = BALLOON_BASE - 256 * MIB  # room for 256 MiB only
    touched, warning, expected = pcb.balloon(keep, read=memory, target_bytes=2 * GIB)
    assert warning is None and touched <= 256 * MIB
    assert expected < 2 * GIB


def test_evict_with_memfree_at_the_target_already_does_nothing():
    result = pc.evict(method="balloon", keep_gib=pcb.BALLOON_MIN_KEEP_GIB, free_target_gib=1.0 / 1024)
    assert result["changed"] is False and result["balloon_bytes"] == 0
    assert result["free_target"]["reached"] is True
    assert result["free_target"]["expected_free"] == result["memory_before"]["mem_free"]


def test_evict_with_a_target_reports_what_the_balloon_expects(monkeypatch):
    calls = []

    def fake(keep_bytes, target_bytes=None):
        calls.append((keep_bytes, target_bytes))
        return 64 * MIB, None, target_bytes + MIB

    monkeypatch.setattr(pc, "balloon", fake)
    total = read_meminfo()["MemTotal"]
    result = pc.evict(method="balloon", keep_gib=pcb.BALLOON_MIN_KEEP_GIB, free_target_gib=total / GIB)
    assert calls == [(int(pcb.BALLOON_MIN_KEEP_GIB * GIB), int(total / GIB * GIB))]
    assert result["free_target"] == {"bytes": int(total / GIB * GIB), "expected_free": int(total / GIB * GIB) + MIB,
                                     "reached": True}
    assert result["balloon_bytes"] == 64 * MIB


def _no_touch(*_args):
    raise AssertionError("the chunk was written page by page")


def test_a_populated_chunk_is_backed_by_memory_without_writing_a_page(monkeypatch):
    # The kernel backs every page in the mmap call: this process's anonymous memory (a page-table
    # walk, not the counter the balloon reads) grows by the chunk, and no page was written.
    assert pcb.MAP_POPULATE, "the nodes (and this machine) are Linux, whose mmap has MAP_POPULATE"
    monkeypatch.setattr(pcb, "_touch", _no_touch)
    before = _anonymous()
    region = pcb._backed_chunk(pcb.BALLOON_CHUNK, b"\x01" * MIB)
    try:
        assert _anonymous() - before >= pcb.BALLOON_CHUNK, (_anonymous() - before) / MIB
    finally:
        region.close()


def test_a_chunk_the_kernel_backed_short_is_written_page_by_page(monkeypatch):
    # Populating is best effort: where the resident size did not grow by the chunk, every page is written.
    written = []
    monkeypatch.setattr(pcb, "_touch", lambda region, size, pattern: written.append(size))
    region = pcb._backed_chunk(pcb.BALLOON_MIN_CHUNK, b"\x01" * MIB, populate=pcb.MAP_POPULATE,
                               resident=lambda: 0)
    region.close()
    assert written == [pcb.BALLOON_MIN_CHUNK]


def test_without_map_populate_every_page_is_written():
    before = _anonymous()
    region = pcb._backed_chunk(pcb.BALLOON_MIN_CHUNK, b"\x01" * MIB, populate=0)
    try:
        assert _anonymous() - before >= pcb.BALLOON_MIN_CHUNK
        assert region[pcb.BALLOON_MIN_CHUNK - 1:pcb.BALLOON_MIN_CHUNK] == b"\x01"
    finally:
        region.close()


def test_the_resident_size_reads_statm_in_pages(tmp_path):
    statm = tmp_path / "statm"
    statm.write_text("100 25 3 1 0 20 0\n")
    assert pcb._resident_bytes(str(statm)) == 25 * pcb.mmap.PAGESIZE
    assert pcb._resident_bytes(str(tmp_path / "missing")) is None
    assert pcb._resident_bytes() > 0


@pytest.mark.parametrize("total, floor", [(128 * GIB, 2.0), (16 * GIB, 2.0), (4 * GIB, 0.5), (0, 2.0)])
def test_the_keep_floor_is_2_gib_or_an_eighth_of_a_small_machine(total, floor):
    assert pcb.balloon_min_keep(total) == floor


def test_balloon_killed_by_the_oom_killer_is_a_warning_not_a_crash(tmp_path):
    memory = OwnMemory(tmp_path / "balloon.jsonl", kill_at=2 * pcb.BALLOON_CHUNK)
    touched, warning, _expected = pcb.balloon(BALLOON_BASE - GIB, read=memory)
    pid = memory.seen()[0]["pid"]
    # Killed at the reading after its second chunk: it had reported two chunks.
    assert touched == 2 * pcb.BALLOON_CHUNK
    assert warning == (
        "the balloon process (pid %d) was killed by signal 9 after touching %d bytes: memory ran out and the "
        "OOM killer took the balloon (oom_score_adj 1000) as meant; its memory is free again" % (pid, touched))
    assert pid not in _children()  # reaped: its memory went back with it


def test_balloon_check_mode_allocates_nothing():
    # Keep at the floor: the room is MemAvailable over 2 GiB, which any machine running these tests has.
    result = pc.evict(method="balloon", keep_gib=pcb.BALLOON_MIN_KEEP_GIB, check_mode=True)
    assert result["balloon_bytes"] == 0
    assert result["changed"] is True  # there is room and there is cache


def test_balloon_with_no_room_does_nothing():
    # MemAvailable never exceeds MemTotal: keeping more than all of it leaves no room.
    result = pc.evict(method="balloon", keep_gib=read_meminfo()["MemTotal"] / GIB + 1)
    assert result["balloon_bytes"] == 0 and "warnings" not in result
    assert pcb.balloon(BALLOON_BASE, read=OwnMemory(os.devnull)) == (0, None, BALLOON_BASE)


def test_file_without_mmap_support_is_skipped_with_reason(monkeypatch):
    # sysfs attributes are regular files that cannot be mapped, so mincore cannot see them.
    monkeypatch.setattr(pc._libc(), "use_cachestat", False)
    candidates = ["/sys/kernel/uevent_seqnum", "/sys/kernel/profiling", "/sys/power/state"]
    path = next((c for c in candidates if os.path.isfile(c) and os.access(c, os.R_OK)), None)
    if path is None:
        pytest.skip("no readable sysfs attribute here")
    result = pc.evict([path])
    assert result["file_count"] == 0
    assert result["skipped_paths"] == [{"path": path, "reason": "cannot measure residency: mmap: No such device"}]
