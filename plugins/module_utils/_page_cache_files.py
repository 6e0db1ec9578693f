# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers for page_cache_evict: find the files to evict. Not a public API.

Walk the named paths into distinct regular files (by device and inode), recording
what is missing, skipped and why, duplicated or below the size floor.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat


class Target(object):
    """One real file to measure and evict."""

    __slots__ = ("path", "size", "dev", "ino")

    def __init__(self, path, size, dev, ino):
        self.path = path
        self.size = size
        self.dev = dev
        self.ino = ino


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
