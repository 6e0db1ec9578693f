"""The simulated TensorFold's page-cache measurement (mincore) against util-linux fincore.

The engine reports this number at every start (and fits its slots with it under
GLM53_LAB_LOAD=mapped), so it must agree with what another tool sees in the same kernel. fincore runs as a separate process; the
measurement is bounded by fincore's look and what the kernel reclaimed since
(page_cache_oracle.Look).
"""

import os
import sys

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.page_cache_oracle import (
    MIB,
    PAGE,
    Look,
    Reclaim,
    evictable_base,
    expect_warm,
    resident,
    write_file,
)

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                   "lab", "sim", "tensorfold", "src")
sys.path.insert(0, SRC)

from tensorfold.sim import residency  # noqa: E402  pylint: disable=wrong-import-position


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_range(path, start, length):
    """Read ``length`` bytes from ``start``: those pages, and no others, enter the page cache.

    FADV_RANDOM turns readahead off for this file. Without it a partial read also caches
    pages past the range, and the kernel may add them after read() returned, after the
    oracle's look (seen: fincore 6 MiB, then mincore 7 MiB).
    """
    with open(path, "rb") as handle:
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        handle.seek(start)
        left = length
        while left > 0:
            data = handle.read(min(left, 4 * MIB))
            if not data:
                break
            left -= len(data)


@pytest.fixture(name="workdir")
def fixture_workdir(tmp_path_factory):
    base = evictable_base()
    path = os.path.join(base, "tf-residency-%d" % os.getpid())
    os.makedirs(path, exist_ok=True)
    yield path
    for top, dirs, names in os.walk(path, topdown=False):
        for name in names:
            os.unlink(os.path.join(top, name))
        for name in dirs:
            os.rmdir(os.path.join(top, name))
    os.rmdir(path)


def test_resident_bytes_matches_fincore_cold_partial_and_warm(workdir):
    # An odd size: the partial last page counts as a whole page, as fincore counts it.
    shard = write_file(os.path.join(workdir, "shard.bin"), 17 * MIB + 123)
    evict(shard)
    assert resident(shard) == 0, "fincore still sees the evicted file in the page cache"
    assert residency.resident_bytes(shard) == 0

    since = Reclaim()
    read_range(shard, 4 * MIB, 6 * MIB)
    look = Look([shard])
    # What was read and no more (readahead is off), less what the kernel may have taken since.
    lost = since.lost_at_most(6 * MIB, need=6 * MIB - look.bytes)
    assert 6 * MIB - lost <= look.bytes <= 6 * MIB, "fincore: %d bytes after reading 6 MiB (%d taken at most)" % (
        look.bytes, lost)
    look.expect(residency.resident_bytes(shard), "mincore of a partly read file")

    since = Reclaim()
    read_range(shard, 0, 18 * MIB)
    look = expect_warm(since, [shard])
    measured = look.expect(residency.resident_bytes(shard), "mincore of a fully read file")
    assert measured % PAGE == 0


def test_measure_follows_snapshot_links_once_and_skips_small_files(workdir):
    blobs = os.path.join(workdir, "models--org--m", "blobs")
    snapshot = os.path.join(workdir, "models--org--m", "snapshots", "rev1")
    os.makedirs(snapshot)
    big = write_file(os.path.join(blobs, "aaaa"), 16 * MIB)
    other = write_file(os.path.join(blobs, "bbbb"), 20 * MIB)
    small = write_file(os.path.join(blobs, "cccc"), MIB)
    os.symlink("../../blobs/aaaa", os.path.join(snapshot, "model-00001.safetensors"))
    os.symlink("../../blobs/bbbb", os.path.join(snapshot, "model-00002.safetensors"))
    os.symlink("../../blobs/cccc", os.path.join(snapshot, "tokenizer.json"))
    # The same blob reached twice (a drafter sharing a file) counts once.
    drafter = os.path.join(workdir, "drafter")
    os.makedirs(drafter)
    os.symlink(big, os.path.join(drafter, "shared.safetensors"))
    for path in (big, other, small):
        evict(path)
    read_range(big, 0, 16 * MIB)

    look = Look([big, other])
    measured = residency.measure([snapshot, drafter])
    assert measured.files == 2
    assert measured.size == 36 * MIB
    look.expect(measured.resident, "mincore of the snapshot's shards")
    assert 0.4 < measured.fraction < 0.5, measured.fraction

    since = Reclaim()
    assert residency.read_all([snapshot]) == 36 * MIB
    look = expect_warm(since, [big, other])
    measured = residency.measure([snapshot])
    look.expect(measured.resident, "mincore after the simulated load")
    assert measured.fraction > 0.5


def test_missing_roots_measure_nothing(workdir):
    measured = residency.measure([os.path.join(workdir, "absent"), None, ""])
    assert (measured.files, measured.size, measured.resident, measured.fraction) == (0, 0, 0, 0.0)
