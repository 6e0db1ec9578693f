# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers of hf_mirror: rsync and ssh's command lines, and their output read back:
progress records, itemized changes, statistics, and failures explained as the operator's next
step. Pure functions, no I/O. Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

# Seconds without data before rsync gives up (--timeout; rsync passes it to the worker's rsync
# too), and ssh's keepalive over about the same time: a dead link fails in well under a minute
# instead of holding the copy until its deadline.
IO_TIMEOUT = 30
SERVER_ALIVE_COUNT = 3
# --mkpath (create the worker's cache root when missing) needs rsync 3.2.3 on both ends.
RSYNC_MIN_VERSION = (3, 2, 3)
# Every item rsync changes is printed with this prefix, so it is found among progress and stats lines.
ITEM_PREFIX = "GLM53-ITEM "
OUT_FORMAT = "--out-format=" + ITEM_PREFIX + "%i %l %n"
INSTALL_RSYNC = "install rsync (apt install rsync)"

_PROGRESS2 = re.compile(r"^\s*([\d,]+)\s+(\d+)%\s+\S+\s+\S+"
                        r"(?:\s+\(xfr#(\d+),\s*(?:to|ir)-chk=(\d+)/(\d+)\))?\s*$")
_ITEM = re.compile(re.escape(ITEM_PREFIX) + r"(\S{2,11}) ([\d,]+) (.*)$")
_STATS = {
    "Number of regular files transferred": "files_transferred",
    "Number of created files": "files_created",
    "Total file size": "total_size",
    "Total transferred file size": "transferred_size",
    "Literal data": "literal_bytes",
    "Matched data": "matched_bytes",
    "Total bytes sent": "bytes_sent",
    "Total bytes received": "bytes_received",
}
_STAT_LINE = re.compile(r"^(%s): ([\d,]+)" % "|".join(re.escape(key) for key in _STATS))
_VERSION = re.compile(r"rsync\s+version\s+v?(\d+)\.(\d+)\.(\d+)")

# What rsync's exit codes mean (rsync(1), EXIT VALUES).
EXIT_CODES = {
    1: "syntax or usage error",
    2: "protocol incompatibility",
    3: "errors selecting input/output files or directories",
    4: "requested action not supported",
    5: "error starting the client-server protocol",
    10: "error in socket I/O",
    11: "error in file I/O",
    12: "error in the rsync protocol data stream (the connection or the remote rsync ended)",
    13: "errors with program diagnostics",
    14: "error in IPC code",
    20: "received SIGUSR1 or SIGINT",
    21: "some error returned by waitpid()",
    22: "error allocating core memory buffers",
    23: "partial transfer due to error",
    24: "partial transfer due to vanished source files",
    30: "timeout in data send/receive",
    35: "timeout waiting for daemon connection",
    127: "the remote command was not found",
    255: "ssh failed (connection, authentication or host key)",
}
_DISK_FULL = re.compile(r"No space left on device|Disk quota exceeded|\(28\)|\(122\)")
# rsync's --timeout, and ssh's ServerAlive giving up: the peer went silent.
_STALLED = re.compile(r"io timeout after \d+ seconds|Timeout, server \S+ not responding")
_REMOTE_MISSING = re.compile(r"remote command not found|rsync: (?:command )?not found")


def ssh_command(options):
    """The ``-e`` value: rsync splits it on spaces and honours quotes as a shell would."""
    return " ".join(["ssh"] + [shlex.quote(str(option)) for option in options])


def keepalive_options(io_timeout):
    """ssh options that end a session whose peer stopped answering after about ``io_timeout``
    seconds. Put after the user's options: ssh keeps the first value it is given."""
    interval = max(1, -(-io_timeout // SERVER_ALIVE_COUNT))
    return ["-o", "ServerAliveInterval=%d" % interval, "-o", "ServerAliveCountMax=%d" % SERVER_ALIVE_COUNT]


def rsync_argv(rsync, files_from, source, dest, ssh=None, dry_run=False, ignore_times=False, bwlimit=None,
               progress=False, copy_links=False, io_timeout=None):
    """One rsync run over a ``--files-from`` list. Never ``-z``: weights do not compress, and
    the link is faster than the compressor. ``copy_links`` sends what a link points at (the
    blob passes: a blob may be a link into huggingface_hub's shared store); ``io_timeout``
    ends a run that moves no data for that many seconds."""
    argv = [rsync, "-a", "--partial", "--inplace", "--mkpath", "--files-from=" + files_from, "--stats", OUT_FORMAT]
    if copy_links:
        argv.append("--copy-links")
    if io_timeout:
        argv.append("--timeout=%d" % io_timeout)
    if progress:
        argv.append("--info=progress2")
    if dry_run:
        argv.append("--dry-run")
    if ignore_times:
        argv.append("--ignore-times")
    if bwlimit:
        argv.append("--bwlimit=%d" % bwlimit)
    if ssh:
        argv += ["-e", ssh]
    return argv + [source, dest]


def _number(text):
    return int(text.replace(",", ""))


def _segments(text):
    return re.split(r"[\r\n]", text or "")


def parse_progress2(text):
    """The ``--info=progress2`` records in rsync's output, oldest first: ``{bytes, percent,
    files, to_check, total}`` (``files`` is ``xfr#``, the files transferred so far; the last three
    are None on a line without the counters)."""
    records = []
    for segment in _segments(text):
        match = _PROGRESS2.match(segment)
        if match:
            records.append({"bytes": _number(match.group(1)), "percent": int(match.group(2)),
                            "files": int(match.group(3)) if match.group(3) else None,
                            "to_check": int(match.group(4)) if match.group(4) else None,
                            "total": int(match.group(5)) if match.group(5) else None})
    return records


def parse_items(text):
    """What rsync changed (or would, with --dry-run): ``{flags, size, name}`` per item, flags as
    ``--itemize-changes`` writes them (``>f+++++++++`` a file sent, ``cL+++++++++`` a link made)."""
    items = []
    for segment in _segments(text):
        match = _ITEM.search(segment)
        if match:
            items.append({"flags": match.group(1), "size": _number(match.group(2)), "name": match.group(3)})
    return items


def parse_stats(text):
    """The ``--stats`` figures as ints, e.g. ``transferred_size`` for "Total transferred file size"."""
    stats = {}
    for segment in _segments(text):
        match = _STAT_LINE.match(segment.strip())
        if match:
            stats[_STATS[match.group(1)]] = _number(match.group(2))
    return stats


def parse_version(text):
    match = _VERSION.search(text or "")
    return tuple(int(part) for part in match.groups()) if match else None


def sends(item):
    """True when rsync sends the item's data: ``<`` to a remote worker, ``>`` to a local destination."""
    return item["flags"][:1] in ("<", ">") and item["flags"][1:2] == "f"


def changes(items):
    """Items that change the worker: files sent, links made or replaced, file attributes; a
    directory's time alone is not a change."""
    return [item for item in items if len(item["flags"]) > 1 and item["flags"][1] != "d"
            and item["flags"][0] in "<>ch."]


def last_lines(text, lines=6):
    """The last ``lines`` non-blank lines of ``text`` on one line, for a message."""
    kept = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return " | ".join(kept[-lines:])


def disk_full(stderr):
    """True when rsync's messages say the destination's disk (or quota) is full."""
    return bool(_DISK_FULL.search(stderr or ""))


def explain_failure(run, where, free=None, needed=None, address=None, io_timeout=None):
    """``(meaning, fix)`` for a failed rsync run. ``where`` names the worker (or local directory);
    ``free`` and ``needed`` are bytes free at the destination and still to send, when known;
    ``address`` is the worker's link address and ``io_timeout`` rsync's --timeout."""
    rc, stderr = run.get("rc"), run.get("stderr") or ""
    if run.get("timed_out"):
        return ("it did not finish within %gs and was killed" % run["timeout"],
                "rerun to resume (what was sent is kept: --partial --inplace), or raise timeout")
    if rc is None:
        return (run.get("error") or "it could not be started", "rsync is missing on the head: " + INSTALL_RSYNC)
    meaning = "exit %d: %s" % (rc, EXIT_CODES.get(rc, "unknown exit code"))
    if "Failed to exec ssh" in stderr:
        return meaning, "the OpenSSH client is missing on the head: install it (apt install openssh-client)"
    if rc == 127 or _REMOTE_MISSING.search(stderr):
        return meaning, "rsync is missing on the worker %s: %s" % (where, INSTALL_RSYNC)
    if "unknown option" in stderr:
        return meaning, ("rsync on the worker %s is too old (needs %s or later for --mkpath): upgrade rsync there"
                         % (where, ".".join(str(part) for part in RSYNC_MIN_VERSION)))
    if disk_full(stderr):
        figures = [] if free is None else ["%d bytes free there now" % free]
        figures += [] if needed is None else ["this copy sends %d bytes" % needed]
        free_text = " (%s)" % ", ".join(figures) if figures else ""
        return meaning, ("the worker's disk under the destination is full%s: free space there or choose another "
                         "dest, then rerun (what was sent is kept)" % free_text)
    if rc == 30 or _STALLED.search(stderr):
        silent = "no data moved for %ss" % io_timeout if io_timeout else "the peer went silent"
        return meaning, ("%s: the link to %s is down or the worker %s stopped answering: check the CX7 link on both "
                         "nodes (ip link; the cx7_link preflight), then rerun to resume (what was sent is kept)"
                         % (silent, address or where, where))
    if rc == 255 or "ssh:" in stderr or "Permission denied (publickey" in stderr:
        if "Host key verification failed" in stderr:
            fix = "the head does not know the worker's host key: add it to the head user's known_hosts"
        elif "Permission denied" in stderr:
            fix = "the worker refused the head's ssh key: authorize the head user's key for that user on the worker"
        else:
            fix = ("the head cannot ssh to %s: check the CX7 link and the worker's address (the cx7_link preflight) "
                   "and that sshd runs on the worker" % where)
        return meaning, fix
    if rc in (10, 12, 30):
        return meaning, "the connection to the worker broke during the copy: rerun to resume (what was sent is kept)"
    if rc == 24:
        return meaning, "files changed on the head during the copy: rerun"
    if rc in (11, 23) and "Permission denied" in stderr:
        return meaning, "the worker user may not write the destination: fix the ownership of dest on the worker"
    if rc in (11, 23):
        return meaning, "a file could not be read on the head or written on the worker (see rsync's message)"
    return meaning, "see rsync's message"
