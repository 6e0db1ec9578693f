# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers of hf_mirror: copy verified Hugging Face snapshots from the head's cache to
one worker's with rsync over ssh. Not a public API.

The file set (from the manifests on the head) and its balancing over streams are module-level
functions; ``Mirror`` runs the passes: directories, a dry run of the blobs, the blobs in
parallel streams, the snapshot symlinks, and the manifests last. The options' checks live in
``_hf_mirror_inputs``, rsync's command lines and the reading of its output in
``_hf_mirror_rsync``.

Every rsync runs through ``_writers.Writers``: recorded under the head's cache while it runs,
and dying with the module where the head has ``setpriv`` (util-linux), so a run killed by
Ansible's async limit leaves no writer behind, or the next run ends it before its own start.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import re
import shlex
import shutil
import tempfile
import threading
import time

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import run_with_timeout
# The cache layout, manifest and progress file hf_snapshot writes (one definition each).
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_cache import repo_folder_name
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_manifest import manifest_rel, read_manifest
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_mirror_inputs import destination, link_address
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_mirror_rsync import (
    INSTALL_RSYNC,
    IO_TIMEOUT,
    RSYNC_MIN_VERSION,
    changes,
    disk_full,
    explain_failure,
    keepalive_options,
    last_lines,
    parse_items,
    parse_progress2,
    parse_stats,
    parse_version,
    rsync_argv,
    sends,
    ssh_command,
)
from ansible_collections.dgx_spark.glm53.plugins.module_utils._progress_file import ProgressFile
from ansible_collections.dgx_spark.glm53.plugins.module_utils._writers import WriterError, Writers

# The writers' record, under the head's hub directory: huggingface_hub's own .locks folder,
# which its cache scan skips.
RECORD_DIR = os.path.join(".locks", "dgx_spark.glm53")
# Seconds of progress samples the rate in the progress file is measured over.
RATE_WINDOW = 30.0
# Seconds allowed for `rsync --version` and for `df` on the worker after a disk-full failure.
PROBE_TIMEOUT = 30


class MirrorError(Exception):
    """A failure to report to the user as it is."""


def record_base(hub_dir, target, dest):
    """Where the writers of copies to ``target:dest`` are recorded (one record per destination)."""
    slug = re.sub(r"[^A-Za-z0-9_.@-]", "_", target or "local")[:64]
    key = hashlib.sha1(("%s\0%s" % (target, dest)).encode("utf-8")).hexdigest()[:12]
    return os.path.join(hub_dir, RECORD_DIR, "mirror-%s-%s" % (slug, key))


# --------------------------------------------------------------------------- the file set


def head_manifest(hub_dir, repo_id, revision):
    """The manifest of repo_id@revision on the head, or MirrorError saying to run hf_snapshot."""
    path = os.path.join(hub_dir, manifest_rel(repo_id, revision))
    manifest, why = read_manifest(path, repo_id, revision)
    if manifest is None and why is None:
        raise MirrorError("no verified snapshot of %s@%s on the head (no manifest %s): run hf_snapshot there first"
                          % (repo_id, revision, path))
    if why:
        raise MirrorError("the manifest %s of %s@%s on the head is unusable (%s): run hf_snapshot there again"
                          % (path, repo_id, revision, why))
    return manifest


def snapshot_files(hub_dir, repo_id, revision, manifest):
    """``(entries, problems)``: for each file of the manifest, ``{name, size, link, data}`` with
    paths relative to ``hub_dir``: ``link`` the snapshot symlink (None when the snapshot holds a
    regular file) and ``data`` the file holding the bytes (the blob the link points at)."""
    folder = repo_folder_name(repo_id)
    blobs_dir = os.path.join(hub_dir, folder, "blobs")
    entries, problems = [], []
    for row in manifest["files"]:
        link_rel = "/".join([folder, "snapshots", revision, row["name"]])
        path = os.path.join(hub_dir, link_rel)
        link, data_rel, data_path = None, link_rel, path
        if os.path.islink(path):
            target = os.readlink(path)
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
            if os.path.isabs(target) or os.path.dirname(resolved) != os.path.normpath(blobs_dir):
                problems.append("%s links to %s, not to a file in %s/blobs (hf_mirror copies the relative links "
                                "huggingface_hub makes)" % (row["name"], target, folder))
                continue
            link, data_rel, data_path = link_rel, "%s/blobs/%s" % (folder, os.path.basename(resolved)), resolved
            if os.path.islink(data_path):
                # huggingface_hub 2.4 keeps a Xet download in its shared store, <hub>/blobs/<xx>/<hash>, and makes
                # blobs/<etag> a relative link to it (utils/_shared_blobs.py). The blob passes send the bytes
                # (--copy-links), so only a link that stays inside this cache is followed.
                real = os.path.realpath(data_path)
                if os.path.commonpath([real, os.path.realpath(hub_dir)]) != os.path.realpath(hub_dir):
                    problems.append("%s: its blob %s/blobs/%s links to %s, outside the cache %s" % (
                        row["name"], folder, os.path.basename(resolved), os.readlink(data_path), hub_dir))
                    continue
        try:
            info = os.stat(data_path)
        except OSError:
            problems.append("%s is missing (%s)" % (row["name"], data_path))
            continue
        if info.st_size != row["size"]:
            problems.append("%s is %d bytes, the manifest says %d" % (row["name"], info.st_size, row["size"]))
            continue
        entries.append({"name": row["name"], "size": row["size"], "link": link, "data": data_rel})
    return entries, problems


def build_plan(hub_dir, models, force=None):
    """What to copy, relative to ``hub_dir``: ``{dirs, blobs: {path: size}, links, manifests: {path: size},
    forced: set of blob paths, snapshot_files, warnings}``, or MirrorError naming what is wrong on the head."""
    plan = {"dirs": [], "blobs": {}, "links": [], "manifests": {}, "forced": set(), "snapshot_files": 0,
            "warnings": []}
    by_repo = {}
    for model in models:
        repo_id, revision = model["repo_id"], model["revision"]
        manifest = head_manifest(hub_dir, repo_id, revision)
        entries, problems = snapshot_files(hub_dir, repo_id, revision, manifest)
        if problems:
            raise MirrorError("the head's snapshot of %s@%s does not match its verified manifest: %s: run "
                              "hf_snapshot there again (it fetches what is missing or wrong)"
                              % (repo_id, revision, "; ".join(problems)))
        folder = repo_folder_name(repo_id)
        for path in (folder, folder + "/blobs"):
            if path not in plan["dirs"]:
                plan["dirs"].append(path)
        for entry in entries:
            plan["blobs"][entry["data"]] = entry["size"]
            if entry["link"]:
                plan["links"].append(entry["link"])
            by_repo.setdefault(repo_id, {})[entry["name"]] = entry["data"]
        manifest_path = manifest_rel(repo_id, revision)
        plan["manifests"][manifest_path] = os.path.getsize(os.path.join(hub_dir, manifest_path))
        plan["snapshot_files"] += len(entries)
    for entry in force or []:
        files = by_repo.get(entry["repo_id"])
        if files is None:
            plan["warnings"].append("force: %s is not in models; %s not re-sent" % (entry["repo_id"], entry["name"]))
        elif entry["name"] not in files:
            raise MirrorError("force: %s is not a file of the %s snapshot on the head (its manifest lists %d "
                              "files): fix the force list" % (entry["name"], entry["repo_id"], len(files)))
        else:
            plan["forced"].add(files[entry["name"]])
    return plan


def balance(sizes, streams):
    """Split ``{path: size}`` over at most ``streams`` lists of about equal bytes: largest file
    first, each to the list with the fewest bytes (then files, then the lowest index). Lists are
    sorted by path; none is empty."""
    bins = [{"bytes": 0, "files": [], "index": index} for index in range(max(1, min(streams, len(sizes))))]
    for path, size in sorted(sizes.items(), key=lambda item: (-item[1], item[0])):
        lightest = min(bins, key=lambda b: (b["bytes"], len(b["files"]), b["index"]))
        lightest["bytes"] += size
        lightest["files"].append(path)
    return [sorted(b["files"]) for b in bins if b["files"]]


# ------------------------------------------------------------------------------- rsync

# ----------------------------------------------------------------------------- progress


class OutputTail(object):
    """Follows one rsync's stdout file while it runs: the bytes and files of its latest
    progress2 record."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.pending = ""
        self.bytes = 0
        self.files = 0

    def poll(self):
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except (IOError, OSError):
            return
        self.offset += len(chunk)
        text = self.pending + chunk.decode("utf-8", "replace")
        cut = max(text.rfind("\r"), text.rfind("\n"))
        self.pending = text[cut + 1:]
        records = parse_progress2(text[:cut + 1])
        if records:
            self.bytes = records[-1]["bytes"]
            self.files = records[-1]["files"] or self.files


def streams_sent(tails):
    """``(bytes, files)`` the running streams have sent so far, from their output."""
    for tail in tails:
        tail.poll()
    return sum(tail.bytes for tail in tails), sum(tail.files for tail in tails)


# ------------------------------------------------------------------------------- the run


class Mirror(object):
    """One module run: ``run()`` returns the result or raises MirrorError."""

    def __init__(self, params, rsync, check_mode=False, setpriv=None):
        self.p = params
        self.rsync = rsync
        self.setpriv = setpriv
        self.check_mode = check_mode
        self.target = params.get("target") or ""
        self.io_timeout = params.get("io_timeout") or IO_TIMEOUT
        self.address = link_address(self.target) if self.target else None
        self.where = self.target or "local directory %s" % params["dest"]
        if self.target and params.get("node"):
            self.where = "%s (%s)" % (params["node"], self.target)
        self.hub_dir = os.path.join(os.path.abspath(os.path.expanduser(params["cache_dir"])), "hub")
        self.dest = destination(self.target, params["dest"])
        self.ssh_options = list(params["ssh_options"]) + keepalive_options(self.io_timeout)
        self.ssh = ssh_command(self.ssh_options) if self.target else None
        self.env = dict(os.environ, LC_ALL="C")  # English messages and ',' thousands for the parsers
        self.started = time.monotonic()
        self.deadline = self.started + params["timeout"]
        self.commands = []
        self.workdir = None
        self.needed = None  # bytes this run sends, once the dry run told
        self.writers = Writers(record_base(self.hub_dir, self.target, params["dest"]), "copying to %s" % self.where,
                               env=self.env)
        self.ended = []
        self.warnings = []

    def remaining(self):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise MirrorError("the copy to %s did not finish within timeout %gs: rerun to resume (what was sent is "
                              "kept)" % (self.where, self.p["timeout"]))
        return left

    def check_rsync(self):
        if not self.rsync:
            raise MirrorError("rsync is missing on the head: " + INSTALL_RSYNC)
        run = run_with_timeout([self.rsync, "--version"], PROBE_TIMEOUT, env=self.env)
        version = parse_version(run["stdout"])
        if run["rc"] != 0 or version is None:
            raise MirrorError("rsync on the head does not run (`%s`: %s): %s" % (
                run["command"], run["error"] or last_lines(run["stderr"]) or "rc %s" % run["rc"], INSTALL_RSYNC))
        if version < RSYNC_MIN_VERSION:
            raise MirrorError("rsync %s on the head is too old: hf_mirror needs %s or later (--mkpath): upgrade rsync"
                              % (".".join(map(str, version)), ".".join(map(str, RSYNC_MIN_VERSION))))

    def claim(self):
        """Before writing anything: rsyncs that die with the module, recorded under the head's cache,
        and whatever an earlier run to the same destination left running ended first."""
        if not self.writers.use_pdeathsig(self.setpriv, [self.rsync, "--version"], PROBE_TIMEOUT):
            self.warnings.append("setpriv --pdeathsig (util-linux) does not work on the head: an rsync of this copy "
                                 "outlives the module if it is killed, until the next run ends it")
        try:
            self.ended = self.writers.claim()
        except WriterError as exc:
            raise MirrorError("cannot start copying to %s: %s" % (self.where, exc))
        except (IOError, OSError) as exc:
            raise MirrorError("cannot record the rsync processes of the copy to %s under %s: %s: check that this "
                              "user may write the head's cache" % (self.where, os.path.dirname(exc.filename or "")
                                                                   or self.hub_dir, exc))
        if self.ended:
            self.warnings.append("ended %d process(es) of an earlier copy to %s that still ran (pids %s) before "
                                 "starting this one" % (len(self.ended), self.where,
                                                        ", ".join(str(e["pid"]) for e in self.ended)))

    def list_file(self, name, paths):
        path = os.path.join(self.workdir, name)
        with open(path, "w") as handle:
            handle.write("".join(p + "\n" for p in paths))
        return path

    def argv(self, list_path, **kwargs):
        return rsync_argv(self.rsync, list_path, self.hub_dir + "/", self.dest, ssh=self.ssh,
                          io_timeout=self.io_timeout, **kwargs)

    def execute(self, argv, stdout_path=None):
        """Run one rsync; its output parsed, or MirrorError explaining the failure."""
        self.commands.append(list(argv))
        run = self.writers.run(argv, self.remaining(), stdout_path=stdout_path)
        if run["rc"] != 0:
            raise MirrorError(self.failure(run))
        return {"items": parse_items(run["stdout"]), "stats": parse_stats(run["stdout"])}

    def failure(self, run):
        free = self.free_bytes() if disk_full(run.get("stderr")) else None
        meaning, fix = explain_failure(run, self.where, free, self.needed, address=self.address,
                                       io_timeout=self.io_timeout)
        return "copying to %s failed (%s): %s. rsync said: %s. Command: %s" % (
            self.where, meaning, fix, last_lines(run.get("stderr")) or "nothing", run["command"])

    def free_bytes(self):
        """Free bytes where the hub directory goes on the worker, or None when df cannot tell."""
        path = self.dest.split(":", 1)[1] if self.target else self.dest
        command = "df -P -B1 -- %s" % shlex.quote(path or ".")
        argv = ["sh", "-c", command] if not self.target else (
            ["ssh"] + self.ssh_options + [self.target, command])
        run = run_with_timeout(argv, PROBE_TIMEOUT, env=self.env)
        rows = [line.split() for line in run["stdout"].splitlines()[1:] if line.strip()]
        if run["rc"] != 0 or not rows or len(rows[-1]) < 4 or not rows[-1][3].isdigit():
            return None
        return int(rows[-1][3])

    def blob_streams(self, to_send, forced, base_bytes, base_files, progress):
        """Send ``to_send`` in parallel streams balanced by bytes; the number of streams."""
        lists = balance(to_send, self.p["streams"])
        bwlimit = max(1, self.p["bwlimit"] // len(lists)) if self.p.get("bwlimit") else None
        runs, tails, threads = [None] * len(lists), [], []
        timeout = self.remaining()
        for index, paths in enumerate(lists):
            argv = self.argv(self.list_file("blobs-%d" % index, paths), ignore_times=bool(forced & set(paths)),
                             bwlimit=bwlimit, progress=True, copy_links=True)
            out = os.path.join(self.workdir, "stream-%d.out" % index)
            tails.append(OutputTail(out))
            self.commands.append(argv)
            threads.append(threading.Thread(target=self._stream, args=(runs, index, argv, out, timeout),
                                            name="hf_mirror-stream-%d" % index))
        progress.count(base_bytes, base_files, pending=lambda: streams_sent(tails))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        failed = [run for run in runs if run is None or run["rc"] != 0]
        if failed:
            first = failed[0]
            message = self.failure(first) if first else "a stream of the copy to %s did not run" % self.where
            if len(failed) > 1:
                message += " (%d of %d streams failed; the first is shown)" % (len(failed), len(lists))
            raise MirrorError(message)
        sent = sum(parse_stats(run["stdout"]).get("transferred_size", 0) for run in runs)
        items = [item for run in runs for item in parse_items(run["stdout"])]
        return len(lists), sent, items

    def _stream(self, runs, index, argv, out, timeout):
        runs[index] = self.writers.run(argv, timeout, stdout_path=out)

    def run(self):
        self.check_rsync()
        plan = build_plan(self.hub_dir, self.p["models"], self.p.get("force"))
        bytes_total = sum(plan["blobs"].values()) + sum(plan["manifests"].values())
        files_total = len(plan["blobs"]) + len(plan["manifests"])
        progress = ProgressFile(None if self.check_mode else self.p.get("progress_file"), RATE_WINDOW,
                                name="hf_mirror-progress")
        if not self.check_mode:  # a dry run writes nothing, so it ends nothing either
            self.claim()
        self.workdir = tempfile.mkdtemp(prefix="glm53-hf-mirror-")
        try:
            progress.start("mirror", bytes_total, files_total)
            result = self._passes(plan, progress)
        except MirrorError:
            progress.finish("failed")
            raise
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.writers.release()
        progress.finish("done", bytes_total, files_total)
        elapsed = time.monotonic() - self.started
        result.update({
            "bytes_total": bytes_total,
            "files": files_total,
            "links": len(plan["links"]),
            "snapshot_files": plan["snapshot_files"],
            "elapsed": round(elapsed, 3),
            "rate_bps": 0 if self.check_mode or elapsed <= 0 else int(result["bytes_copied"] / elapsed),
            "target": self.target,
            "destination": self.dest,
            "commands": self.commands,
            "ended_writers": self.ended,
            "warnings": plan["warnings"] + self.warnings,
        })
        return result

    def _passes(self, plan, progress):
        dry = self.check_mode
        # Directories first, in one run: parallel streams creating the same directory race on mkdir.
        # It also fails fast, before any stream starts, when ssh or the worker's rsync does not work.
        made = self.execute(self.argv(self.list_file("dirs", plan["dirs"]), dry_run=dry))["items"]
        # What the worker lacks, by size and time; forced files are re-sent whatever it says.
        would = self.execute(self.argv(self.list_file("blobs", sorted(plan["blobs"])), dry_run=True,
                                       copy_links=True))["items"]
        to_send = dict((item["name"], plan["blobs"][item["name"]]) for item in would if item["name"] in plan["blobs"])
        for path in plan["forced"]:
            to_send[path] = plan["blobs"][path]
        # Files whose data goes over (the rest of to_send only has attributes fixed).
        data = set(plan["forced"]) | set(item["name"] for item in would if sends(item))
        sending = sum(to_send[path] for path in data)
        self.needed = sending
        streams, bytes_copied, files_copied, items = 0, 0, 0, list(made)
        if dry:
            streams = len(balance(to_send, self.p["streams"])) if to_send else 0
            bytes_copied, files_copied = sending, len(data)
            items += [{"flags": ">f", "size": to_send[path], "name": path} for path in data]
            items += [item for item in would if item["name"] in to_send and item["name"] not in data]
        elif to_send:
            base_files = len(plan["blobs"]) - len(to_send)
            streams, bytes_copied, sent_items = self.blob_streams(
                to_send, plan["forced"], sum(plan["blobs"].values()) - sending, base_files, progress)
            files_copied = len([item for item in sent_items if sends(item)])
            items += sent_items
        progress.count(sum(plan["blobs"].values()), len(plan["blobs"]))
        # Links after their blobs, the manifests last: a worker never holds a manifest before its files.
        for name, paths in (("links", plan["links"]), ("manifests", sorted(plan["manifests"]))):
            if not paths:
                continue
            done = self.execute(self.argv(self.list_file(name, paths), dry_run=dry))
            items += done["items"]
            sent = [item for item in done["items"] if sends(item)]
            files_copied += len(sent)
            bytes_copied += (sum(item["size"] for item in sent) if dry
                             else done["stats"].get("transferred_size", 0))
        changed_items = changes(items)
        return {
            "changed": bool(bytes_copied or changed_items),
            "bytes_copied": bytes_copied,
            "files_copied": files_copied,
            "streams": streams,
            "items_changed": len(changed_items),
        }
