# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers: the Hugging Face cache layout this collection relies on, the completion
manifest hf_snapshot writes and hf_mirror copies, and the progress file both write. One
definition, so the writer and the copier can never disagree. Not a public API.

huggingface_hub 2.4.0 (file_download.py, utils/_shared_blobs.py) also keeps Xet downloads in a
store shared by every cached repo, ``<hub>/blobs/<xx>/<xet hash>``, with the repo's
``blobs/<etag>`` a relative link to it, and downloads into ``blobs/<etag>.<8 hex>.incomplete``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import stat

from ansible_collections.dgx_spark.glm53.plugins.module_utils._writers import open_paths

# <cache>/hub/models--org--name/.glm53/<sha>.json: outside snapshots/, which the hub client's
# cache scan would treat as corrupt.
MANIFEST_SCHEMA = 1
MANIFEST_DIR = ".glm53"
VERIFY_MODES = ("size", "sha256")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_GIT_SHA1 = re.compile(r"^[0-9a-f]{40}$")


def repo_folder_name(repo_id):
    """``org/name`` -> ``models--org--name``, the model repo's folder in the hub cache."""
    return "models--" + repo_id.replace("/", "--")


def manifest_rel(repo_id, revision):
    """The manifest of a verified snapshot, relative to the hub directory."""
    return "%s/%s/%s.json" % (repo_folder_name(repo_id), MANIFEST_DIR, revision)


def name_problem(name):
    """The message for a repo file name that is not a plain relative path, else None. Names
    from the hub or a manifest become paths to read and, on repair, to delete."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name or "\0" in name:
        return "file name %r is not a relative path" % (name,)
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "file name %r is not a plain relative path" % (name,)
    return None


def manifest_problem(manifest, repo_id, revision):
    """What makes a parsed manifest unusable for repo_id@revision, else None."""
    if not isinstance(manifest, dict):
        return "not a JSON object"
    if manifest.get("schema") != MANIFEST_SCHEMA:
        return "schema %r, expected %d" % (manifest.get("schema"), MANIFEST_SCHEMA)
    if manifest.get("repo_id") != repo_id or manifest.get("revision") != revision:
        return "it is for %s@%s" % (manifest.get("repo_id"), manifest.get("revision"))
    if manifest.get("verified_with") not in VERIFY_MODES:
        return "verified_with %r" % (manifest.get("verified_with"),)
    files = manifest.get("files")
    if not isinstance(files, list) or not files:
        return "no file list"
    for row in files:
        if not isinstance(row, dict):
            return "a file entry is not an object"
        problem = name_problem(row.get("name"))
        if problem:
            return problem
        if not isinstance(row.get("size"), int) or isinstance(row.get("size"), bool) or row["size"] < 0:
            return "file %s: size %r" % (row["name"], row.get("size"))
        if not isinstance(row.get("lfs"), bool):
            return "file %s: lfs %r" % (row["name"], row.get("lfs"))
        sha256 = row.get("sha256")
        if row["lfs"] and not (isinstance(sha256, str) and _SHA256.match(sha256)):
            return "file %s: LFS file without a sha256" % row["name"]
        if not row["lfs"] and sha256 is not None:
            return "file %s: sha256 on a non-LFS file" % row["name"]
        git_sha1 = row.get("git_sha1")
        if git_sha1 is not None and not (isinstance(git_sha1, str) and _GIT_SHA1.match(git_sha1)):
            return "file %s: git_sha1 %r" % (row["name"], git_sha1)
    if manifest.get("bytes") != sum(row["size"] for row in files):
        return "bytes %r is not the sum of the file sizes" % (manifest.get("bytes"),)
    for key in ("allow_patterns", "ignore_patterns"):
        value = manifest.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(p, str) for p in value)):
            return "%s %r" % (key, value)
    return None


def progress_record(phase, bytes_done, bytes_total, files_done, files_total, samples, now):
    """The JSON the progress file holds. ``samples`` are ``(monotonic time, bytes_done)``
    pairs, oldest first; the rate is measured across them."""
    rate = None
    if len(samples) >= 2 and samples[-1][0] > samples[0][0]:
        rate = max(0.0, (samples[-1][1] - samples[0][1]) / (samples[-1][0] - samples[0][0]))
    left = max(0, bytes_total - bytes_done)
    eta = None
    if left == 0:
        eta = 0.0
    elif rate:
        eta = round(left / rate, 1)
    return {"phase": phase, "bytes_done": bytes_done, "bytes_total": bytes_total, "files_done": files_done,
            "files_total": files_total, "rate_bps": None if rate is None else int(rate), "eta_s": eta,
            "updated": round(now, 3)}


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
