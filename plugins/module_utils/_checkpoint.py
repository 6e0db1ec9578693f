# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers behind checkpoint_check: is a model checkpoint directory complete, and what
is its metadata digest. Not a public API.

The checks are the vLLM recipe's before a rank starts (rank-tp2.sh): ``config.json`` and
``model.safetensors.index.json`` are there, every shard the index's ``weight_map`` names is a
file, and ``model_meta`` - the digest of the metadata files that must be equal on every rank -
is ``sha256sum <meta files> | sha256sum``. The directory is a Hugging Face hub cache snapshot,
whose files are relative links into ``../../blobs``: a link whose blob is missing, or is a
partial download (``.incomplete``), is a missing file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import json
import os
import stat

from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_cache import name_problem

INDEX = "model.safetensors.index.json"
META_FILES = ["config.json", INDEX, "chat_template.jinja", "tokenizer_config.json"]
# Names shown in a message; the rest are counted ("and N more").
SHOWN = 5
# What a failed stat or open says when there is nothing usable there (a dangling link says ENOENT).
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)
_CHUNK = 1 << 20
FETCH_FIX = ("rerun the hf_weights role (playbooks/site.yml does) so the pinned revision is fetched and verified "
             "again")
NOTHING_STARTED = "nothing was started."


class CheckpointError(Exception):
    """A failure for the operator: what is wrong, the fix (``None``: the user's read access),
    and the fields the check found so far."""

    def __init__(self, message, result=None, fix=FETCH_FIX):
        super(CheckpointError, self).__init__(message)
        self.result = result or {}
        self.fix = fix


# ----------------------------------------------------------------------------- pure parts


def option_problems(meta_files, index):
    """Messages for option values that are not plain relative file names (a meta file's name
    also goes into its digest line, so it may hold no line break), or a meta file named twice."""
    problems = []
    if not meta_files:
        problems.append("meta_files is empty; name the files model_meta is made of")
    for name in meta_files:
        problem = name_problem(name)
        if problem is None and ("\n" in name or "\r" in name):
            problem = "file name %r holds a line break" % (name,)
        if problem:
            problems.append("meta_files: %s" % problem)
    twice = sorted(set(name for name in meta_files if meta_files.count(name) > 1))
    if twice:
        problems.append("meta_files names %s twice" % ", ".join(twice))
    problem = name_problem(index)
    if problem:
        problems.append("index: %s" % problem)
    return problems


def meta_line(name, digest):
    """The line ``sha256sum`` prints for a file: its hex digest, two spaces, its name."""
    return "%s  %s\n" % (digest, name)


def model_meta(meta_files, digests):
    """sha256 hex of the digest lines of ``meta_files`` in that order (what
    ``sha256sum <meta files> | sha256sum`` prints), or '' when one has no digest."""
    if any(not digests.get(name) for name in meta_files):
        return ""
    lines = "".join(meta_line(name, digests[name]) for name in meta_files)
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def shard_names(data):
    """The distinct shard file names the values of the index's ``weight_map`` name, sorted.
    Raises ValueError saying what is wrong with the index (``data``: its bytes)."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8 text")
    except ValueError as exc:
        raise ValueError("it is not JSON (%s)" % exc)
    if not isinstance(doc, dict):
        raise ValueError("it holds a JSON %s, not an object" % type(doc).__name__)
    if "weight_map" not in doc:
        raise ValueError("it has no weight_map")
    weight_map = doc["weight_map"]
    if not isinstance(weight_map, dict):
        raise ValueError("its weight_map is a JSON %s, not an object of tensor name to shard file"
                         % type(weight_map).__name__)
    if not weight_map:
        raise ValueError("its weight_map names no shard")
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str):
            raise ValueError("weight_map[%r] is %s, not a shard file name" % (tensor, json.dumps(shard)))
    names = sorted(set(weight_map.values()))
    for name in names:
        if name_problem(name):
            raise ValueError("weight_map names the shard %r, which is not a plain relative path inside the "
                             "checkpoint directory (no leading /, no '..', '.' or empty part)" % name)
    return names


def _listed(names, total, shown=SHOWN):
    listing = ", ".join(names[:shown])
    return listing + (" and %d more" % (total - shown) if total > shown else "")


def failure_message(node, user, result, unreadable, index=INDEX, fail_on_missing=True):
    """The message the task fails with, or None: when something could not be read (always), or
    when something is missing and ``fail_on_missing``. ``unreadable``: ``[(name, reason)]``."""
    parts, fixes = [], []
    missing = result["missing"]
    if missing and fail_on_missing:
        if result.get("index_read"):
            of = "of %d shards in %s" % (result["shards"], index)
        else:
            of = "the shards are unknown without %s" % index
        parts.append("is incomplete: missing %s (%s)" % (_listed(missing, len(missing)), of))
        fixes.append(FETCH_FIX)
    if unreadable:
        said = ["%s (%s)" % pair for pair in unreadable]
        parts.append("cannot be read by %s: %s" % (user, _listed(said, len(said))))
        fixes.append("give %s read access to those files and the blobs they link to" % user)
    if not parts:
        return None
    return "%s: checkpoint %s %s. Fix: %s; %s" % (node, result["path"], "; it ".join(parts), "; ".join(fixes),
                                                  NOTHING_STARTED)


# ----------------------------------------------------------------------------- the directory


def _reason(exc):
    return exc.strerror or str(exc)


def regular_size(path):
    """The size of the regular file at ``path``, links followed, or None when there is none: no
    entry, a dangling link, a link loop, a directory or another kind of file, or a link to a
    partial download (``*.incomplete``). OSError for anything else (permission denied)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        if exc.errno in _ABSENT:
            return None
        raise
    if not stat.S_ISREG(info.st_mode) or os.path.realpath(path).endswith(".incomplete"):
        return None
    return info.st_size


def _read(path, keep):
    """(sha256 hex, the bytes when ``keep``) of the file at ``path``, or None when it is missing.
    OSError when it cannot be read."""
    if regular_size(path) is None:
        return None
    digest, kept = hashlib.sha256(), []
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                digest.update(chunk)
                if keep:
                    kept.append(chunk)
    except (IOError, OSError) as exc:
        if exc.errno in _ABSENT:
            return None
        raise
    return digest.hexdigest(), b"".join(kept) if keep else None


def _ordered(names):
    seen, out = set(), []
    for name in names:
        if name not in seen:
            seen.add(name)
            out.append(name)
    return out


def check(path, meta_files=None, index=INDEX):
    """Look at the checkpoint directory ``path`` (``~`` expanded); read only.

    Returns ``(result, unreadable)``: ``result`` holds ``path`` (resolved), ``missing`` (the
    meta files in their order, the index unless it is one of them, then the shards sorted),
    ``shards``, ``shard_bytes``, ``meta``, ``model_meta``, ``complete`` and ``index_read``
    (whether the index could be read; not returned by the module); ``unreadable`` is
    ``[(name, reason)]`` of what exists but could not be read. Raises CheckpointError, with
    those fields, for a path that is not a directory one can look into, or an invalid index.
    """
    meta_files = list(META_FILES if meta_files is None else meta_files)
    given = os.path.expanduser(path)
    expected = _ordered(meta_files + [index])
    result = {"path": given, "missing": [], "shards": 0, "shard_bytes": 0, "meta": {}, "model_meta": "",
              "complete": False, "index_read": False}
    try:
        info = os.stat(given)
    except OSError as exc:
        if exc.errno in _ABSENT:
            result["missing"] = expected
            raise CheckpointError("checkpoint %s does not exist" % given, result)
        raise CheckpointError("checkpoint %s cannot be examined: %s" % (given, _reason(exc)), result, fix=None)
    if not stat.S_ISDIR(info.st_mode):
        result["missing"] = expected
        raise CheckpointError("checkpoint %s is not a directory" % given, result)
    root = result["path"] = os.path.realpath(given)
    if not os.access(root, os.X_OK):
        raise CheckpointError("checkpoint %s cannot be looked into: Permission denied" % root, result, fix=None)

    missing, unreadable, digests, index_data = [], [], {}, None
    for name in expected:
        try:
            read = _read(os.path.join(root, name), keep=name == index)
        except (IOError, OSError) as exc:
            unreadable.append((name, _reason(exc)))
            continue
        if read is None:
            missing.append(name)
            continue
        if name in meta_files:
            digests[name] = read[0]
        if name == index:
            index_data = read[1]
    result.update(meta=digests, model_meta=model_meta(meta_files, digests), missing=list(missing))

    if index_data is not None:
        try:
            names = shard_names(index_data)
        except ValueError as exc:
            raise CheckpointError("checkpoint index %s is not valid: %s" % (os.path.join(root, index), exc), result)
        result.update(index_read=True, shards=len(names))
        for name in names:
            try:
                size = regular_size(os.path.join(root, name))
            except OSError as exc:
                unreadable.append((name, _reason(exc)))
                continue
            if size is None:
                missing.append(name)
            else:
                result["shard_bytes"] += size
        result["missing"] = _ordered(missing)
    result["complete"] = not result["missing"] and not unreadable
    return result, unreadable


# ----------------------------------------------------------------------------- the module's run


def error_message(node, user, exc):
    """The task's message for a CheckpointError of ``check``: the node, what is wrong, the fix."""
    fix = exc.fix or "give %s read access to it and search access to its parent directories" % user
    return "%s: %s. Fix: %s; %s" % (node, exc, fix, NOTHING_STARTED)


def _public(result):
    out = dict(result, changed=False)
    out.pop("index_read", None)
    return out


def run(params, node, user):
    """checkpoint_check's result for its ``params``; raises CheckpointError, with the message the
    task fails with and the fields found so far, on a failure."""
    meta_files, index = params["meta_files"], params["index"]
    problems = option_problems(meta_files, index)
    if problems:
        raise CheckpointError("checkpoint_check: " + "; ".join(problems))
    try:
        result, unreadable = check(params["path"], meta_files, index)
    except CheckpointError as exc:
        raise CheckpointError(error_message(node, user, exc), _public(exc.result))
    message = failure_message(node, user, result, unreadable, index, params["fail_on_missing"])
    if message:
        raise CheckpointError(message, _public(result))
    return _public(result)
