# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: the completion manifest of a verified snapshot, and the verification of a
snapshot's files against a file list. Not a public API.

hf_snapshot writes the manifest once every file verifies; hf_mirror reads it on the head to
know what to copy. Both read it here (one reader, one schema check), so the writer and the
copier can never disagree. Nothing here writes, deletes or touches the network: it builds,
renders, reads and checks.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import json
import os
import re
import stat
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_cache import file_path, name_problem, repo_folder_name

# <cache>/hub/models--org--name/.glm53/<sha>.json: outside snapshots/, which the hub client's
# cache scan would treat as corrupt.
MANIFEST_SCHEMA = 1
MANIFEST_DIR = ".glm53"
VERIFY_MODES = ("size", "sha256")
HASH_CHUNK = 8 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_GIT_SHA1 = re.compile(r"^[0-9a-f]{40}$")


# ----------------------------------------------------------------------------- where


def manifest_rel(repo_id, revision):
    """The manifest of a verified snapshot, relative to the hub directory."""
    return "%s/%s/%s.json" % (repo_folder_name(repo_id), MANIFEST_DIR, revision)


def manifest_file(repo_dir, revision):
    """The manifest of ``revision`` under the repo's folder ``<cache>/hub/models--org--name``."""
    return os.path.join(repo_dir, MANIFEST_DIR, revision + ".json")


# ------------------------------------------------------------------------------ schema


def normalize_patterns(patterns):
    """``None`` for no filter (an empty list too), else the list of patterns."""
    return list(patterns) if patterns else None


def build_manifest(repo_id, revision, allow_patterns, ignore_patterns, files, verified_with):
    keep = ("name", "size", "sha256", "lfs", "git_sha1")
    rows = [dict((k, f.get(k)) for k in keep) for f in sorted(files, key=lambda f: f["name"])]
    return {
        "schema": MANIFEST_SCHEMA,
        "repo_id": repo_id,
        "revision": revision,
        "allow_patterns": normalize_patterns(allow_patterns),
        "ignore_patterns": normalize_patterns(ignore_patterns),
        "files": rows,
        "bytes": sum(f["size"] for f in rows),
        "verified_with": verified_with,
    }


def render_manifest(manifest):
    return json.dumps(manifest, indent=1, sort_keys=True) + "\n"


def _row_problem(row):
    """What makes one file entry of a manifest unusable, else None."""
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
        problem = _row_problem(row)
        if problem:
            return problem
    if manifest.get("bytes") != sum(row["size"] for row in files):
        return "bytes %r is not the sum of the file sizes" % (manifest.get("bytes"),)
    for key in ("allow_patterns", "ignore_patterns"):
        value = manifest.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(p, str) for p in value)):
            return "%s %r" % (key, value)
    return None


def read_manifest(path, repo_id, revision):
    """``(manifest, None)``, ``(None, None)`` when there is none, or ``(None, why)`` when unusable."""
    try:
        with open(path) as handle:
            text = handle.read()
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            return None, None
        return None, "unreadable (%s)" % exc.strerror
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        return None, "not JSON (%s)" % exc
    problem = manifest_problem(manifest, repo_id, revision)
    return (None, problem) if problem else (manifest, None)


def same_selection(manifest, allow_patterns, ignore_patterns):
    """True when the manifest lists the files of these patterns."""
    return (normalize_patterns(manifest.get("allow_patterns")) == normalize_patterns(allow_patterns)
            and normalize_patterns(manifest.get("ignore_patterns")) == normalize_patterns(ignore_patterns))


# ------------------------------------------------------------------------ verification


def blob_name(entry):
    """The name huggingface_hub gives the file's blob (its etag): the LFS sha256, else the git blob id."""
    return entry["sha256"] if entry["lfs"] else entry.get("git_sha1")


def _digest_of(digest, path, counter):
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(HASH_CHUNK), b""):
            digest.update(chunk)
            if counter is not None:
                counter(len(chunk))
    return digest.hexdigest()


def sha256_of(path, counter=None):
    """The file's sha256; ``counter(bytes)`` follows the reading."""
    return _digest_of(hashlib.sha256(), path, counter)


def git_blob_sha1_of(path, size, counter=None):
    """``git hash-object`` of the file (``size`` bytes, already checked)."""
    return _digest_of(hashlib.sha1(b"blob %d\0" % size), path, counter)


def check_file(snap_dir, entry, verify, counter=None):
    """``(state, detail)`` of one listed file: ``ok``, ``missing`` (nothing usable there) or
    ``bad`` (present but failing: wrong size, hash, or not a regular file)."""
    path = file_path(snap_dir, entry["name"])
    if not os.path.lexists(path):
        return "missing", "missing"
    try:
        info = os.stat(path)
    except OSError:
        return "missing", "link to a missing blob"
    if not stat.S_ISREG(info.st_mode):
        return "bad", "not a regular file"
    if info.st_size != entry["size"]:
        return "bad", "size %d, expected %d" % (info.st_size, entry["size"])
    if verify == "sha256":
        if entry.get("sha256"):
            found = sha256_of(path, counter)
            if found != entry["sha256"]:
                return "bad", "sha256 %s, expected %s" % (found, entry["sha256"])
        elif entry.get("git_sha1"):
            found = git_blob_sha1_of(path, entry["size"], counter)
            if found != entry["git_sha1"]:
                return "bad", "git blob sha1 %s, expected %s" % (found, entry["git_sha1"])
    return "ok", None


def verify_files(snap_dir, files, verify, workers=1, counter=None, on_file=None):
    """The files that do not verify, each ``{name, size, state, detail}``, in list order.
    Hashing runs on ``workers`` threads (hashlib releases the GIL on large chunks);
    ``counter(bytes)`` follows the hashing, ``on_file()`` each file checked."""

    def one(entry):
        state = check_file(snap_dir, entry, verify, counter)
        if on_file is not None:
            on_file()
        return state

    if verify != "sha256" or workers <= 1 or len(files) <= 1:
        states = [one(f) for f in files]
    else:
        with ThreadPoolExecutor(max_workers=min(workers, len(files))) as pool:
            states = list(pool.map(one, files))
    return [{"name": f["name"], "size": f["size"], "state": state, "detail": detail}
            for f, (state, detail) in zip(files, states) if state != "ok"]


def stale_blob(repo_dir, entry, verify):
    """The blob of a file missing from the snapshot when it exists but does not verify
    (huggingface_hub would link it as it is), else None."""
    name = blob_name(entry)
    if not name:
        return None
    path = os.path.join(repo_dir, "blobs", name)
    if not os.path.lexists(path):
        return None
    state, _detail = check_file(os.path.join(repo_dir, "blobs"), dict(entry, name=name), verify)
    return None if state == "ok" else path


def describe_failures(failures, limit=10):
    text = ", ".join("%s (%s)" % (f["name"], f["detail"]) for f in failures[:limit])
    if len(failures) > limit:
        text += " and %d more" % (len(failures) - limit)
    return text
