# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark page-cache eviction: the module against vmtouch -e and a plain fadvise loop.

Builds a model-cache-like tree (default 4 GiB in 240 files, most under 16 MiB, a
Hugging Face snapshot of symlinks into blobs/) on disk, then for each method and
round: reads everything into the page cache, checks it is resident, times the
eviction, and measures with mincore what is left. Prints a table; removes the
tree at the end unless --keep.

    .venv/bin/python benchmarks/page_cache_evict.py [--size-gib 4] [--files 240] [--rounds 3]

Needs a disk file system for --scratch (tmpfs cannot be evicted) and, for its
row, vmtouch (apt-get install vmtouch). Run as root or as the owner of the
scratch tree, so mincore can see the cache.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".collections"))

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _page_cache as pc  # noqa: E402

MIB = 1 << 20
GIB = 1 << 30
SPEC_MIN_SIZE = 16 << 20  # the spec's evict_cache.py leaves files under 16 MiB alone
SNAPSHOT_LINKS = 8


def build_tree(root, total_bytes, file_count, seed=53):
    """Write the data set; return the list of real files (symlinks excluded)."""
    rng = random.Random(seed)
    large_count = max(1, file_count // 6)
    small_sizes = [rng.randrange(64 << 10, SPEC_MIN_SIZE) for _index in range(file_count - large_count)]
    room = total_bytes - sum(small_sizes)
    if room < large_count * SPEC_MIN_SIZE:
        raise SystemExit("--size-gib too small for --files: the large files would be under 16 MiB")
    weights = [rng.uniform(0.5, 1.5) for _index in range(large_count)]
    large_sizes = [int(room * w / sum(weights)) for w in weights]
    block = os.urandom(8 * MIB)
    hub = os.path.join(root, "hub", "models--bench--glm", "blobs")
    snapshot = os.path.join(root, "hub", "models--bench--glm", "snapshots", "5" * 40)
    for directory in (hub, snapshot, os.path.join(root, "prepared"), os.path.join(root, "misc")):
        os.makedirs(directory, exist_ok=True)
    files = []
    for index, size in enumerate(large_sizes + small_sizes):
        if index < SNAPSHOT_LINKS:
            path = os.path.join(hub, "%064x" % index)
            os.symlink(os.path.relpath(path, snapshot), os.path.join(snapshot, "model-%05d.safetensors" % index))
        elif index < large_count:
            path = os.path.join(root, "prepared", "shard-%04d.bin" % index)
        else:
            path = os.path.join(root, "misc", "%02d" % (index % 16), "file-%04d" % index)
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            left = size
            while left:
                left -= handle.write(block[:min(left, len(block))])
            handle.flush()
            os.fsync(handle.fileno())
        files.append(path)
    return files


def warm(files):
    for path in files:
        with open(path, "rb", buffering=0) as handle:
            while handle.read(8 * MIB):
                pass


def resident(files):
    """Page-cache bytes of ``files`` by util-linux fincore, not by the module being timed."""
    if not shutil.which("fincore"):
        raise SystemExit("fincore not found: install util-linux")
    total = 0
    for start in range(0, len(files), 500):  # bounded command lines
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES"] + files[start:start + 500],
                             check=True, capture_output=True, text=True).stdout
        total += sum(int(line) for line in out.split())
    return total


def footprint(files):
    page = pc.PAGE_SIZE
    return sum(-(-os.path.getsize(path) // page) * page for path in files)


# --- the contenders -------------------------------------------------------------------


def run_module_python(root):
    result = pc.evict([root])
    return "file_count=%d, measured_with=%s" % (result["file_count"], result["measured_with"])


def run_module_python_mincore(root):
    """The module as on kernels older than 6.5, which lack cachestat."""
    libc = pc._libc()
    libc.use_cachestat = False
    try:
        result = pc.evict([root])
    finally:
        libc.use_cachestat = True
    return "file_count=%d, measured_with=%s" % (result["file_count"], result["measured_with"])


def run_module_ansible(root):
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    command = [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-i", "localhost,",
               "-c", "local", "-e", "ansible_python_interpreter=%s" % python,
               "-m", "dgx_spark.glm53.page_cache_evict", "-a", json.dumps({"paths": [root]})]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    if proc.returncode:
        raise SystemExit("ansible run failed: %s" % result.get("msg"))
    return "module's own elapsed %.2f s" % result["elapsed"]


def run_vmtouch(root):
    subprocess.run(["vmtouch", "-e", "-q", root], check=True)
    return ""


def run_fadvise_loop(root):
    """The spec's evict_cache.py, from its description: regular files of 16 MiB and up,
    no symlinks followed, errors ignored."""
    count = 0
    for directory, _dirs, names in os.walk(root, followlinks=False):
        for name in names:
            path = os.path.join(directory, name)
            try:
                if os.path.islink(path) or os.path.getsize(path) < SPEC_MIN_SIZE:
                    continue
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
                count += 1
            except OSError:
                pass
    return "files advised=%d" % count


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--size-gib", type=float, default=4.0)
    parser.add_argument("--files", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scratch", default=os.path.join(REPO, ".build", "bench-page-cache"))
    parser.add_argument("--keep", action="store_true", help="leave the data set in place")
    args = parser.parse_args()

    contenders = [
        ("module (python call)", run_module_python, None),
        ("module (python call, mincore probe)", run_module_python_mincore, None),
        ("module (ansible ad hoc)", run_module_ansible,
         None if os.path.exists(os.path.join(os.path.dirname(sys.executable), "ansible"))
         else "ansible not in this Python's bin directory: run with .venv/bin/python"),
        ("vmtouch -e", run_vmtouch,
         None if shutil.which("vmtouch") else "vmtouch not installed: apt-get install vmtouch"),
        ("fadvise loop >= 16 MiB", run_fadvise_loop, None),
    ]

    if os.path.exists(args.scratch):
        shutil.rmtree(args.scratch)
    os.makedirs(args.scratch)
    try:
        started = time.monotonic()
        files = build_tree(args.scratch, int(args.size_gib * GIB), args.files)
        total = sum(os.path.getsize(path) for path in files)
        full = footprint(files)
        small = sum(1 for path in files if os.path.getsize(path) < SPEC_MIN_SIZE)
        print("data set: %d files, %.2f GiB (%d under 16 MiB), %d snapshot symlinks, in %s (built in %.0f s)"
              % (len(files), total / GIB, small, SNAPSHOT_LINKS, args.scratch, time.monotonic() - started))

        timings = {name: [] for name, _run, _skip in contenders}
        left = {name: [] for name, _run, _skip in contenders}
        notes = {name: skip or "" for name, _run, skip in contenders}
        for round_no in range(args.rounds):
            # Rotate the order so no method always runs right after the data was read.
            order = contenders[round_no % len(contenders):] + contenders[:round_no % len(contenders)]
            for name, run, skip in order:
                if skip:
                    continue
                warm(files)
                before = resident(files)
                if before < 0.99 * full:
                    raise SystemExit("could not warm the data set (%d of %d bytes resident): "
                                     "is there enough free memory?" % (before, full))
                t0 = time.perf_counter()
                note = run(args.scratch)
                timings[name].append(time.perf_counter() - t0)
                left[name].append(resident(files))
                notes[name] = note
                if left[name][-1] == before and name.startswith("module"):
                    raise SystemExit("nothing was evicted: is %s on tmpfs?" % args.scratch)

        print()
        header = "| method | seconds (median of %d) | GiB/s | left resident (max) | notes |" % args.rounds
        print(header)
        print("|---|---:|---:|---:|---|")
        for name, _run, skip in contenders:
            if skip:
                print("| %s | - | - | - | skipped: %s |" % (name, skip))
                continue
            seconds = statistics.median(timings[name])
            worst = max(left[name])
            print("| %s | %.3f | %.1f | %.1f MiB (%.2f%%) | %s |"
                  % (name, seconds, total / GIB / seconds, worst / MIB, 100.0 * worst / full, notes[name]))
        if timings["module (python call)"] and timings["vmtouch -e"]:
            module = statistics.median(timings["module (python call)"])
            vmtouch = statistics.median(timings["vmtouch -e"])
            worst = max(left["module (python call)"])
            print()
            print("target: module at least as fast as vmtouch -e: %s (%.2fx); leaves <= 1%%: %s (%.2f%%)"
                  % ("yes" if module <= vmtouch else "NO", vmtouch / module,
                     "yes" if worst <= 0.01 * full else "NO", 100.0 * worst / full))
    finally:
        if not args.keep:
            shutil.rmtree(args.scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
