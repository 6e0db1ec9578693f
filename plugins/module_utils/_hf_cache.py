# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers: the Hugging Face cache layout this collection relies on (hf_snapshot
writes it, hf_mirror copies it). One definition, so the writer and the copier can never
disagree. The manifest is _hf_manifest's, the progress file _progress_file's. Not a public API.

huggingface_hub 2.4.0 (file_download.py, utils/_shared_blobs.py) also keeps Xet downloads in a
store shared by every cached repo, ``<hub>/blobs/<xx>/<xet hash>``, with the repo's
``blobs/<etag>`` a relative link to it, and downloads into ``blobs/<etag>.<8 hex>.incomplete``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

from ansible_collections.dgx_spark.glm53.plugins.module_utils._writers import open_paths


def repo_folder_name(repo_id):
    """``org/name`` -> ``models--org--name``, the model repo's folder in the hub cache."""
    return "models--" + repo_id.replace("/", "--")


def repo_folder(cache_dir, repo_id):
    """``<cache_dir>/hub/models--org--name``, as huggingface_hub lays it out."""
    return os.path.join(cache_dir, "hub", repo_folder_name(repo_id))


def snapshot_folder(repo_dir, revision):
    return os.path.join(repo_dir, "snapshots", revision)


def file_path(snap_dir, name):
    return os.path.join(snap_dir, *name.split("/"))


def name_problem(name):
    """The message for a repo file name that is not a plain relative path, else None. Names
    from the hub or a manifest become paths to read and, on repair, to delete."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name or "\0" in name:
        return "file name %r is not a relative path" % (name,)
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "file name %r is not a plain relative path" % (name,)
    return None


def shared_store_file(blob):
    """The file in huggingface_hub's shared store (``<hub>/blobs/<xx>/<hash>``) that the repo blob
    ``<hub>/models--org--name/blobs/<etag>`` links to, else None."""
    if not os.path.islink(blob):
        return None
    real = os.path.realpath(blob)
    store = os.path.realpath(os.path.join(os.path.dirname(blob), "..", "..", "blobs"))
    return real if os.path.dirname(os.path.dirname(real)) == store else None


def stale_partials(repo_dir):
    """``[(name, bytes)]`` of huggingface_hub's temporary files in ``blobs/`` (``<etag>.<8 hex>.incomplete``,
    older clients ``<etag>.incomplete``) that no process has open, nor the client's lock of their blob
    (``<hub>/.locks/<repo folder>/<etag>.lock``, held through the final rename): a killed run leaves
    them, and no later download reuses them (each takes a name of its own)."""
    blobs = os.path.join(repo_dir, "blobs")
    locks = os.path.join(os.path.dirname(repo_dir), ".locks", os.path.basename(repo_dir))
    try:
        names = sorted(n for n in os.listdir(blobs) if n.endswith(".incomplete"))
    except OSError:
        return []
    files, sizes = {}, {}
    for name in names:
        try:
            info = os.lstat(os.path.join(blobs, name))
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            files[name] = (os.path.join(blobs, name), os.path.join(locks, name.split(".", 1)[0] + ".lock"))
            sizes[name] = info.st_size
    busy = open_paths([path for pair in files.values() for path in pair])
    return [(name, sizes[name]) for name in sorted(files) if not set(files[name]) & busy]
