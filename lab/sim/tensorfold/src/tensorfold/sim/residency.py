"""Page-cache residency of the weight files, measured with mincore(2).

The simulator reports it at every start and, with GLM53_LAB_LOAD=mapped, counts only
the weights not resident as what the load takes (sim/memory.py): on a GB10 the page
cache counts as used memory when the real engine fits its slots at load. Standard
library only: libc's mmap/mincore/munmap through ctypes (Python's mmap object
exposes no address to hand to mincore).

Since Linux 5.2 mincore shows a file's cache only to its owner, a user who may
write it, or root; to anyone else a fresh mapping reads as not resident. The
engine runs as root in its container, the tests own their files.
"""

import ctypes
import mmap
import os
import stat

PAGE_SIZE = mmap.PAGESIZE
MIN_SIZE = 16 << 20  # weight shards; config and tokenizer files are not counted
WINDOW = 1 << 30  # bytes mapped per mincore() call (bounds the vector)
# mincore sets bit 0 of a vector byte for a resident page; the other bits are reserved.
_LSB = bytes(i & 1 for i in range(256))


class _Libc(object):
    def __init__(self):
        libc = ctypes.CDLL(None, use_errno=True)
        self.mmap = getattr(libc, "mmap64", None) or libc.mmap
        self.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        self.mmap.restype = ctypes.c_void_p
        self.mincore = libc.mincore
        self.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        self.mincore.restype = ctypes.c_int
        self.munmap = libc.munmap
        self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.munmap.restype = ctypes.c_int


_LIBC = []
MAP_FAILED = ctypes.c_void_p(-1).value


def _libc():
    if not _LIBC:
        _LIBC.append(_Libc())
    return _LIBC[0]


def _oserror(call):
    err = ctypes.get_errno()
    return OSError(err, "%s: %s" % (call, os.strerror(err)))


def resident_bytes(path):
    """Bytes of ``path`` in the page cache, in whole pages (as fincore counts them)."""
    libc = _libc()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        total = 0
        for offset in range(0, size, WINDOW):
            length = min(WINDOW, size - offset)
            addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
            if addr in (None, MAP_FAILED):
                raise _oserror("mmap")
            try:
                pages = (length + PAGE_SIZE - 1) // PAGE_SIZE
                vec = (ctypes.c_ubyte * pages)()
                # mincore looks at the cache only; it faults nothing in.
                if libc.mincore(addr, length, vec) != 0:
                    raise _oserror("mincore")
                total += bytes(vec).translate(_LSB).count(1) * PAGE_SIZE
            finally:
                libc.munmap(addr, length)
        return total
    finally:
        os.close(fd)


def weight_files(roots, min_size=MIN_SIZE):
    """Distinct regular files of at least ``min_size`` bytes under ``roots``.

    Symlinks are followed (a Hugging Face snapshot holds only links into
    ``blobs/``); a file reached twice counts once. Missing roots are skipped.
    """
    seen = set()
    found = []
    for root in roots:
        if not root or not os.path.exists(root):
            continue
        candidates = [root] if not os.path.isdir(root) else (
            os.path.join(top, name)
            for top, dirs, names in os.walk(root, followlinks=True)
            for name in sorted(names))
        for path in candidates:
            try:
                st = os.stat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_size < min_size:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            found.append((path, st.st_size))
    return found


class Residency(object):
    """What part of the weights sits in the page cache."""

    def __init__(self, files):
        self.files = len(files)
        self.size = sum(size for path, size in files)
        # A file's footprint is whole pages: compare like with like.
        self.footprint = sum(-(-size // PAGE_SIZE) * PAGE_SIZE for path, size in files)
        self.resident = sum(resident_bytes(path) for path, size in files)

    @property
    def fraction(self):
        return float(self.resident) / self.footprint if self.footprint else 0.0


def measure(roots, min_size=MIN_SIZE):
    return Residency(weight_files(roots, min_size=min_size))


def read_all(roots, min_size=MIN_SIZE, chunk=8 << 20):
    """Read every weight file once, as a load does (this fills the page cache)."""
    total = 0
    for path, size in weight_files(roots, min_size=min_size):
        with open(path, "rb", buffering=0) as handle:
            while True:
                data = handle.read(chunk)
                if not data:
                    break
                total += len(data)
    return total
