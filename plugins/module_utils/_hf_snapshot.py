# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers for hf_snapshot: the run. Not a public API.

One pinned revision of a Hugging Face model repo in the hub cache layout
(``<cache>/hub/models--org--name/{blobs,snapshots/<sha>}``): its file list (from the hub
once, then from a manifest kept beside the snapshot), verification by size or sha256, and
the fetch of what is missing through huggingface_hub's own ``hf_hub_download``.
huggingface_hub is imported only when the file list or a fetch needs the network.
The manifest and the verification of files against it are _hf_manifest's (pure, shared
with hf_mirror); this file runs them, fetches, repairs and reports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from ansible_collections.dgx_spark.glm53.plugins.module_utils._sha import is_full_sha
# The cache layout, manifest and progress file are shared with hf_mirror (one definition each).
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_cache import (
    file_path, name_problem, repo_folder, shared_store_file, snapshot_folder, stale_partials)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_manifest import (
    VERIFY_MODES, blob_name, build_manifest, describe_failures, manifest_file, normalize_patterns, read_manifest,
    render_manifest, same_selection, stale_blob, verify_files)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._files import write_atomic
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_errors import (
    CACHE_ERRNOS, SPACE_ERRNOS, hub_error_message, is_definite, scrub)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._human import human_bytes
from ansible_collections.dgx_spark.glm53.plugins.module_utils._progress_file import ProgressFile

# Seconds of progress samples the rate is measured over.
RATE_WINDOW = 10.0


class SnapshotError(Exception):
    """A failure for the operator: the message, plus what the run found so far."""

    def __init__(self, message, result=None):
        super(SnapshotError, self).__init__(message)
        self.result = result or {}


# ----------------------------------------------------------------------------- inputs


def revision_problem(repo_id, revision):
    """The message for a revision that is not a full commit sha (branches move), else None."""
    if is_full_sha(revision):
        return None
    return "revision for %s must be a full 40-hex commit sha, found %r" % (repo_id, revision)


def repo_id_problem(repo_id):
    """The message for a repo id that cannot name a model repo (and a cache folder), else None."""
    parts = repo_id.split("/") if isinstance(repo_id, str) else []
    if not parts or len(parts) > 2 or not all(parts) or any(p in (".", "..") or p != p.strip() for p in parts):
        return "repo_id must be a Hugging Face model repo id like org/name, found %r" % (repo_id,)
    return None


def input_problems(repo_id, revision, verify, max_workers, timeout):
    """Every bad input, checked before anything touches the disk or the network."""
    problems = [p for p in (repo_id_problem(repo_id), revision_problem(repo_id, revision)) if p]
    if verify not in VERIFY_MODES:
        problems.append("verify must be one of %s, found %r" % (", ".join(VERIFY_MODES), verify))
    if not isinstance(max_workers, int) or max_workers < 1:
        problems.append("max_workers must be 1 or more, found %r" % (max_workers,))
    if not isinstance(timeout, int) or timeout < 1:
        problems.append("timeout must be 1 second or more, found %r" % (timeout,))
    return problems


# ------------------------------------------------------------------------ file lists


def entries_from_siblings(siblings):
    """The file list of a ``model_info(files_metadata=True)`` answer: one dict per file with
    name, size, sha256 (LFS files) or null, lfs, and git_sha1 (the git blob id of a non-LFS file)."""
    entries = []
    for sibling in siblings or []:
        lfs = getattr(sibling, "lfs", None)
        size = getattr(sibling, "size", None)
        name = getattr(sibling, "rfilename", None)
        if lfs is not None:
            sha256 = lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)
            size = size if size is not None else (lfs.get("size") if isinstance(lfs, dict) else getattr(lfs, "size", None))
        else:
            sha256 = None
        if not isinstance(size, int):
            raise SnapshotError("the hub gave no size for %r: cannot verify it" % (name,))
        entries.append({"name": name, "size": size, "sha256": sha256, "lfs": lfs is not None,
                        "git_sha1": None if lfs is not None else getattr(sibling, "blob_id", None)})
    return sorted(entries, key=lambda e: e["name"])


def select_files(entries, allow_patterns, ignore_patterns, filter_fn):
    """The entries the patterns select, with the client's own pattern semantics (``filter_fn``
    is ``huggingface_hub.utils.filter_repo_objects``)."""
    return list(filter_fn(entries, allow_patterns=allow_patterns, ignore_patterns=ignore_patterns,
                          key=lambda e: e["name"]))


# ------------------------------------------------------------------------------ repair


def _inside(path, directory):
    return os.path.commonpath([os.path.abspath(path), os.path.abspath(directory)]) == os.path.abspath(directory)


def remove_entry(repo_dir, revision, entry):
    """Remove a failing file: its snapshot entry and the blob it links to (never trusted again;
    huggingface_hub would otherwise link or keep it as it is). Returns the paths removed."""
    blobs = os.path.join(repo_dir, "blobs")
    snap = file_path(snapshot_folder(repo_dir, revision), entry["name"])
    removed = []
    if os.path.islink(snap):
        target = os.path.normpath(os.path.join(os.path.dirname(snap), os.readlink(snap)))
        os.unlink(snap)
        removed.append(snap)
        if _inside(target, blobs) and os.path.lexists(target):
            os.unlink(target)
            removed.append(target)
    elif os.path.isdir(snap):
        raise SnapshotError("%s is a directory where the file %s should be: remove it" % (snap, entry["name"]))
    elif os.path.lexists(snap):
        os.unlink(snap)
        removed.append(snap)
    return removed


# ------------------------------------------------------------------------------- space


def free_bytes(path):
    """Free bytes for this user on the file system that holds ``path`` (or its nearest existing parent)."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    return shutil.disk_usage(probe).free


def space_message(repo_id, revision, path, free, needed):
    text = ("no space left for %s@%s under %s: %s (%d bytes) free, %s (%d bytes) still needed: free space there "
            "or set hf_weights cache_dir to a larger disk")
    return text % (repo_id, revision, path, human_bytes(free, binary=True), free, human_bytes(needed, binary=True),
                   needed)


# ---------------------------------------------------------------------------- progress


def partial_bytes(blobs_dir, names, since):
    """Bytes huggingface_hub has written so far for these blobs: their ``<blob>.<id>.incomplete``
    temporary files (and legacy ``<blob>.incomplete``) written since ``since`` (epoch seconds)."""
    wanted = set(names)
    total = 0
    try:
        listing = os.listdir(blobs_dir)
    except OSError:
        return 0
    for entry in listing:
        if not entry.endswith(".incomplete") or entry.split(".", 1)[0] not in wanted:
            continue
        try:
            info = os.stat(os.path.join(blobs_dir, entry))
        except OSError:
            continue
        if info.st_mtime >= since:
            total += info.st_size
    return total


# ------------------------------------------------------------------------------ client


def load_client(timeout):
    """huggingface_hub, imported now that the network is needed, with the per-request timeout
    and no progress bars; SnapshotError naming this interpreter when it is not installed."""
    # The client reads these when it is imported.
    os.environ["HF_HUB_DOWNLOAD_TIMEOUT"] = str(timeout)
    os.environ["HF_HUB_ETAG_TIMEOUT"] = str(timeout)
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    # 2.4 moves a Xet download into a store shared by every repo (<hub>/blobs/<xx>/<hash>) and links
    # blobs/<etag> to it; on a refetch it links that entry again after checking only its size, so a
    # corrupt entry would come back forever. Every blob this module fetches is a file of the repo's own.
    os.environ["HF_HUB_DISABLE_SHARED_BLOBS"] = "1"
    try:
        import huggingface_hub  # pylint: disable=import-outside-toplevel
        from huggingface_hub.utils import filter_repo_objects  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        missing = str(exc)
    else:
        huggingface_hub.logging.set_verbosity_error()
        return Client(huggingface_hub, filter_repo_objects)
    raise SnapshotError("huggingface_hub is not importable by %s (%s): the hf_weights role creates a virtualenv "
                        "with it; run this module with that virtualenv's python (ansible_python_interpreter)"
                        % (sys.executable, missing))


class Client(object):
    """The few huggingface_hub calls this module makes."""

    def __init__(self, hub, filter_fn):
        self.hub = hub
        self.filter_fn = filter_fn

    def default_endpoint(self):
        return self.hub.constants.ENDPOINT

    def has_token(self, token):
        return bool(token or self.hub.get_token())

    def model_info(self, repo_id, revision, endpoint, token, timeout):
        api = self.hub.HfApi(endpoint=endpoint, token=token)
        return api.model_info(repo_id, revision=revision, files_metadata=True, timeout=timeout)

    def download(self, repo_id, filename, revision, hub_cache, endpoint, token, timeout):
        return self.hub.hf_hub_download(repo_id, filename, revision=revision, cache_dir=hub_cache, endpoint=endpoint,
                                        token=token, etag_timeout=timeout)


# --------------------------------------------------------------------------------- run


class _Run(object):
    """One task: the inputs, the paths and what was found so far."""

    def __init__(self, params, check_mode, load):
        self.p = params
        self.check_mode = check_mode
        self.load = load
        self.client = None
        self.started = time.monotonic()
        self.started_epoch = time.time()
        self.allow = normalize_patterns(params.get("allow_patterns"))
        self.ignore = normalize_patterns(params.get("ignore_patterns"))
        self.repo_dir = repo_folder(params["cache_dir"], params["repo_id"])
        self.snap = snapshot_folder(self.repo_dir, params["revision"])
        self.manifest_path = manifest_file(self.repo_dir, params["revision"])
        # Check mode writes nothing, the progress file included.
        self.progress = ProgressFile(None if check_mode else params.get("progress_file"), RATE_WINDOW,
                                     name="hf_snapshot-progress")
        self.files = []
        self.missing = []
        self.repaired = []
        self.downloaded = 0
        self.partials = []
        self.warnings = []

    @property
    def where(self):
        return "%s@%s" % (self.p["repo_id"], self.p["revision"])

    def endpoint(self):
        return self.p.get("endpoint") or self.client.default_endpoint()

    def result(self, verified):
        return {
            "path": self.snap,
            "files": len(self.files),
            "bytes": sum(f["size"] for f in self.files),
            "downloaded_bytes": self.downloaded,
            "missing": [m["name"] for m in self.missing],
            "missing_bytes": sum(m["size"] for m in self.missing),
            "repaired": list(self.repaired),
            "removed_partials": [name for name, _size in self.partials],
            "removed_partial_bytes": sum(size for _name, size in self.partials),
            "verified": verified,
            "manifest": self.manifest_path,
            "elapsed": round(time.monotonic() - self.started, 3),
            "changed": (bool(self.missing or self.partials) if self.check_mode
                        else bool(self.downloaded or self.repaired or self.partials)),
            "warnings": self.warnings,
        }

    def done(self, verified):
        self.progress.finish("done", sum(f["size"] for f in self.files), len(self.files))
        return self.result(verified)

    def cache_message(self, exc):
        return ("%s: cannot use the cache under %s: %s%s: check that this user may write there, or set another "
                "cache_dir" % (self.where, self.p["cache_dir"], exc.strerror or exc,
                               " (%s)" % exc.filename if getattr(exc, "filename", None) else ""))

    def fail(self, message):
        self.progress.finish("failed")
        raise SnapshotError(scrub(message, self.p.get("token")), self.result(False))

    def ensure_client(self):
        if self.client is None:
            try:
                self.client = self.load(self.p["timeout"])
            except SnapshotError as exc:
                error = str(exc)
            else:
                return self.client
            self.fail(error)
        return self.client

    def hub_message(self, exc, filename=None):
        return hub_error_message(exc, self.p["repo_id"], self.p["revision"], self.endpoint(),
                                 self.client.has_token(self.p.get("token")), filename, self.p["timeout"])

    # -- file list

    def list_from_hub(self):
        self.ensure_client()
        self.progress.start("listing", 0, 0)
        try:
            info = self.client.model_info(self.p["repo_id"], self.p["revision"], self.p.get("endpoint"),
                                          self.p.get("token"), self.p["timeout"])
        except Exception as exc:  # pylint: disable=broad-except  # every client error becomes one message
            error = self.hub_message(exc)
        else:
            error = None
        if error:
            self.fail(error)
        if getattr(info, "sha", None) not in (None, self.p["revision"]):
            self.fail("the hub answered commit %s for %s: expected the pinned commit itself" % (info.sha, self.where))
        try:
            entries = entries_from_siblings(info.siblings)
        except SnapshotError as exc:
            entries, error = [], str(exc)
        if error:
            self.fail("%s: %s" % (self.where, error))
        bad_names = [p for p in (name_problem(e["name"]) for e in entries) if p]
        if bad_names:
            self.fail("the hub listed unusable names for %s: %s" % (self.where, "; ".join(bad_names)))
        files = select_files(entries, self.allow, self.ignore, self.client.filter_fn)
        if not files:
            self.fail("allow_patterns %s and ignore_patterns %s select none of the %d files of %s (%s): fix the "
                      "patterns" % (self.allow, self.ignore, len(entries), self.where,
                                    ", ".join(e["name"] for e in entries[:20])))
        return files

    # -- verification

    def verify(self, files, verify, phase="verifying"):
        """verify_files, followed in the progress file (bytes hashed, files checked)."""
        hashed = verify == "sha256"
        self.progress.start(phase, sum(f["size"] for f in files) if hashed else 0, len(files))
        return verify_files(self.snap, files, verify, self.p["max_workers"],
                            counter=self.progress.add if hashed else None,
                            on_file=lambda: self.progress.add(0, 1))

    def sweep_partials(self):
        """Remove (in check mode, list) the temporary files a killed run left, before the space check."""
        self.partials = stale_partials(self.repo_dir)
        if self.check_mode:
            return
        for name, _size in self.partials:
            try:
                os.unlink(os.path.join(self.repo_dir, "blobs", name))
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    raise

    def write_manifest(self, verified_with):
        manifest = build_manifest(self.p["repo_id"], self.p["revision"], self.allow, self.ignore, self.files,
                                  verified_with)
        write_atomic(self.manifest_path, render_manifest(manifest))

    # -- fetch

    def fetch(self, todo):
        """Fetch every entry of ``todo`` with hf_hub_download on max_workers threads;
        ``(fetched names, [(entry, exception)])``."""
        blobs = os.path.join(self.repo_dir, "blobs")
        hub_cache = os.path.join(self.p["cache_dir"], "hub")
        pending = dict((e["name"], e) for e in todo)
        lock = threading.Lock()
        stop = threading.Event()

        def on_disk():
            with lock:
                names = [blob_name(e) for e in pending.values() if blob_name(e)]
            return partial_bytes(blobs, names, self.started_epoch - 1)

        def one(entry):
            if stop.is_set():
                return False
            self.client.download(self.p["repo_id"], entry["name"], self.p["revision"], hub_cache,
                                 self.p.get("endpoint"), self.p.get("token"), self.p["timeout"])
            return True

        self.progress.start("fetching", sum(e["size"] for e in todo), len(todo), pending=lambda: (on_disk(), 0))
        fetched, errors = [], []
        # Largest first: the long transfers start together and the small files fill in.
        order = sorted(todo, key=lambda e: (-e["size"], e["name"]))
        with ThreadPoolExecutor(max_workers=min(self.p["max_workers"], len(order))) as pool:
            futures = dict((pool.submit(one, entry), entry) for entry in order)
            for future in as_completed(futures):
                entry = futures[future]
                try:
                    done = future.result()
                except Exception as exc:  # pylint: disable=broad-except  # reported per file below
                    errors.append((entry, exc))
                    if is_definite(exc):
                        stop.set()
                    continue
                if done:
                    with lock:
                        pending.pop(entry["name"], None)
                    fetched.append(entry["name"])
                    self.progress.add(entry["size"], 1)
        return fetched, errors

    def fetch_error(self, errors, todo, fetched):
        """The message for a fetch that did not complete: the most telling error first."""
        errors.sort(key=lambda item: (not is_definite(item[1]), item[0]["name"]))
        entry, exc = errors[0]
        if getattr(exc, "errno", None) in SPACE_ERRNOS:
            left = sum(e["size"] for e in todo if e["name"] not in fetched)
            blobs = os.path.join(self.repo_dir, "blobs")
            message = space_message(self.p["repo_id"], self.p["revision"], blobs, free_bytes(blobs), left)
        elif getattr(exc, "errno", None) in CACHE_ERRNOS:
            message = self.cache_message(exc)
        else:
            message = self.hub_message(exc, entry["name"])
        not_fetched = sorted(e["name"] for e in todo if e["name"] not in fetched)
        names = ", ".join(not_fetched[:10]) + (" ..." if len(not_fetched) > 10 else "")
        return "%s; %d of %d files not fetched: %s" % (message, len(not_fetched), len(todo), names)


def sync(params, check_mode=False, load=load_client):
    """Make ``params['repo_id']@params['revision']`` complete and verified in the hub cache
    (see the module's documentation); the result dict, or SnapshotError."""
    problems = input_problems(params.get("repo_id"), params.get("revision"), params.get("verify"),
                              params.get("max_workers"), params.get("timeout"))
    if problems:
        raise SnapshotError("; ".join(problems))
    run = _Run(params, check_mode, load)
    try:
        return _sync(run, params, check_mode)
    except (IOError, OSError) as exc:
        # The cache itself (permissions, a read-only or full disk): name the path and the error.
        message = run.cache_message(exc)
    return run.fail(message)


def _sync(run, params, check_mode):
    verify = params["verify"]
    if not params["offline"]:
        run.sweep_partials()
    manifest, why = read_manifest(run.manifest_path, params["repo_id"], params["revision"])
    if manifest is not None and not same_selection(manifest, run.allow, run.ignore):
        manifest, why = None, ("it lists the files of allow_patterns %s and ignore_patterns %s, this task selects "
                               "%s and %s" % (manifest.get("allow_patterns"), manifest.get("ignore_patterns"),
                                              run.allow, run.ignore))
    if manifest is not None:
        run.files = manifest["files"]
    elif params["offline"]:
        detail = " (the manifest %s is unusable: %s)" % (run.manifest_path, why) if why else ""
        run.fail("no verified manifest for %s under %s%s: download it on this node or copy it from the head"
                 % (run.where, run.repo_dir, detail))
    else:
        if why:
            run.warnings.append("not trusting the manifest %s (%s): listing the files on the hub again"
                                % (run.manifest_path, why))
        run.files = run.list_from_hub()

    failures = run.verify(run.files, verify)
    run.missing = failures
    if not failures:
        upgrade = manifest is not None and verify == "sha256" and manifest.get("verified_with") != "sha256"
        if (manifest is None or upgrade) and not check_mode:
            run.write_manifest(verify)
        return run.done(True)
    if params["offline"]:
        run.fail("offline: %d of %d files of %s fail verification under %s: %s; copy them from the head or run "
                 "without offline" % (len(failures), len(run.files), run.where, run.snap, describe_failures(failures)))
    # Present but failing: re-fetched below (in check mode, would be).
    run.repaired = [f["name"] for f in failures if f["state"] == "bad"]
    if check_mode:
        return run.done(False)

    run.ensure_client()
    by_name = dict((f["name"], f) for f in run.files)
    todo = [by_name[f["name"]] for f in failures]
    blobs = os.path.join(run.repo_dir, "blobs")
    for entry in todo:
        store = shared_store_file(os.path.join(run.repo_dir, "blobs", blob_name(entry) or ""))
        if store and entry["name"] in run.repaired:
            run.warnings.append("%s linked to %s in huggingface_hub's shared store, which fails verification; this run "
                                "fetches it into the repo's own blobs/ and leaves that store file to any other cached "
                                "repo that links it" % (entry["name"], store))
        # Never trusted again: huggingface_hub keeps a snapshot link, and links an existing blob, as they are.
        remove_entry(run.repo_dir, params["revision"], entry)
        blob = stale_blob(run.repo_dir, entry, verify)
        if blob:
            os.unlink(blob)
    # An intact blob whose link was lost is linked again by the client, without a transfer.
    before = set(e["name"] for e in todo if blob_name(e) and os.path.exists(os.path.join(blobs, blob_name(e))))
    needed = sum(e["size"] for e in todo if e["name"] not in before)
    free = free_bytes(blobs)
    if free < needed:
        run.fail(space_message(params["repo_id"], params["revision"], blobs, free, needed))
    fetched, errors = run.fetch(todo)
    run.downloaded = sum(by_name[n]["size"] for n in fetched if n not in before)
    if errors:
        run.fail(run.fetch_error(errors, todo, fetched))

    # What was fetched is checked as thoroughly as asked; the rest passed before and must still be there.
    fetched_set = set(fetched)
    after = run.verify([f for f in run.files if f["name"] in fetched_set], verify, phase="checking")
    after += verify_files(run.snap, [f for f in run.files if f["name"] not in fetched_set], "size")
    if after:
        for failure in after:
            if failure["name"] in fetched_set:
                remove_entry(run.repo_dir, params["revision"], by_name[failure["name"]])
        run.fail("%s: %d files fail verification after the fetch (the fetched ones are removed again): %s; rerun, "
                 "and if it repeats check the endpoint" % (run.where, len(after), describe_failures(after)))
    run.write_manifest(verify)
    return run.done(True)
