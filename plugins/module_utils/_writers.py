# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers: the processes that write into a cache, as Linux ``/proc`` shows them.
Not a public API.

A module killed by Ansible's async limit (SIGKILL to the module's process group) leaves
behind whatever it started in a session of its own, and the files it was writing.
``WriterRecord`` keeps the writers of one run in a JSON file under a lock, so the next run
can end them before it starts its own; ``Writers`` runs them so (and, where ``setpriv``
works, so that they die with the module); ``open_paths`` tells which files a live process
still has open, so a temporary file is only removed once nobody writes it.

A process is named by its pid, its start time (clock ticks since boot, from
``/proc/<pid>/stat``) and the boot id: a pid the kernel has since given to another
process, or one from before a reboot, never matches.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import signal
import threading
import time

from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import command_string, run_with_timeout
from ansible_collections.dgx_spark.glm53.plugins.module_utils._files import read_text, write_atomic

# Seconds a process gets after SIGTERM, and again after SIGKILL, before it counts as surviving.
END_GRACE = 5.0
# Seconds to wait for the lock of a run that is ending or has just ended.
LOCK_WAIT = 15.0
_POLL = 0.05


class WriterError(Exception):
    """A previous run's writer that could not be ended, or a lock that could not be taken."""


# ------------------------------------------------------------------------- processes


def boot_id():
    text = read_text("/proc/sys/kernel/random/boot_id")
    return text.strip() if text else None


def proc_stat(pid):
    """``(state, start ticks, process group)`` of a process, or None when there is none."""
    text = read_text("/proc/%d/stat" % pid)
    if not text or ")" not in text:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = text.rsplit(")", 1)[1].split()
    try:
        return fields[0], int(fields[19]), int(fields[2])
    except (IndexError, ValueError):
        return None


def identity(pid):
    """``{pid, start, boot}`` of a live process, or None."""
    found = proc_stat(pid)
    if found is None or found[0] in ("Z", "X"):
        return None
    return {"pid": pid, "start": found[1], "boot": boot_id()}


def same_process(record):
    """True while the process ``record`` names (an ``identity``) still runs. A zombie has
    ended: only its parent's wait is missing."""
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int) or record["pid"] <= 0:
        return False
    now = identity(record["pid"])
    return now is not None and now["start"] == record.get("start") and now["boot"] == record.get("boot")


def cmdline(pid):
    """The process's argv, or None when it is gone."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            raw = handle.read()
    except (IOError, OSError):
        return None
    return [arg.decode("utf-8", "replace") for arg in raw.split(b"\0")[:-1]]


def group_members(pgid, argv):
    """Live processes of process group ``pgid`` that run ``argv``: what is left of a group after
    its leader died (rsync forks its receiver and generator with its own argv)."""
    found = []
    try:
        entries = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return found
    for pid in entries:
        stat_ = proc_stat(pid)
        if stat_ is not None and stat_[2] == pgid and stat_[0] not in ("Z", "X") and cmdline(pid) == argv:
            found.append(pid)
    return found


def _still_there(record, group):
    """The record's process while it is the same one, and with ``group`` the members of its group
    that run its recorded argv. A pid, or a group id, can be given to another process only
    once nothing uses it; the argv (with rsync's own temporary paths) ties the members to the record."""
    there = [record["pid"]] if same_process(record) else []
    if group and isinstance(record.get("argv"), list):
        there += [pid for pid in group_members(record["pid"], record["argv"]) if pid != record["pid"]]
    return there


def _signal(record, sig, group):
    try:
        if group:
            os.killpg(record["pid"], sig)
        else:
            os.kill(record["pid"], sig)
    except OSError as exc:
        if exc.errno != errno.ESRCH:
            raise


def _wait_gone(record, group, seconds):
    deadline = time.monotonic() + seconds
    while _still_there(record, group):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL)
    return True


def end_process(record, group=False, grace=END_GRACE):
    """End the process ``record`` names (with ``group``, its whole process group, which it
    leads, also after the leader died): SIGTERM, then SIGKILL after ``grace`` seconds. True
    when it is gone (or was already), False when it survived SIGKILL (stuck in the kernel)."""
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int) or record["pid"] <= 0:
        return True
    # Only while it is still ours: the pid (and its group id) may belong to another process later.
    if not _still_there(record, group):
        return True
    _signal(record, signal.SIGTERM, group)
    if _wait_gone(record, group, grace):
        return True
    if _still_there(record, group):
        _signal(record, signal.SIGKILL, group)
    return _wait_gone(record, group, grace)


def open_paths(paths):
    """The paths among ``paths`` that some process we may inspect has open (every process of
    this user; all of them for root), found through ``/proc/<pid>/fd``."""
    wanted = dict((os.path.realpath(path), path) for path in paths)
    found = set()
    if not wanted:
        return found
    try:
        pids = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return found
    for pid in pids:
        fd_dir = "/proc/%s/fd" % pid
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # gone, or another user's
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target in wanted:
                found.add(wanted[target])
    return found


# --------------------------------------------------------------------------- the record


class WriterRecord(object):
    """The writers of one run on one destination: ``<base>.json`` (this module's identity
    and each writer's, with its command) under an exclusive ``flock`` on ``<base>.lock``,
    held for the whole run. The kernel drops the lock when the module dies, however it dies;
    the JSON stays, so the next run knows what to end."""

    def __init__(self, base, what):
        self.json_path = base + ".json"
        self.lock_path = base + ".lock"
        self.what = what
        self.fd = None
        self.writers = {}
        self.mutex = threading.Lock()

    def _previous(self):
        text = read_text(self.json_path)
        try:
            previous = json.loads(text) if text else {}
        except ValueError:
            previous = {}
        return previous if isinstance(previous, dict) else {}

    def _try_lock(self):
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (IOError, OSError) as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def claim(self, grace=END_GRACE, wait=LOCK_WAIT):
        """Take the lock, ending first a previous run on the same destination that still
        runs, then every writer it recorded that still runs. Returns what was ended, as
        ``{pid, command}``; WriterError when something survives or the lock stays taken."""
        directory = os.path.dirname(self.lock_path)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        self.fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        ended = []
        previous = self._previous()
        if not self._try_lock():
            module = previous.get("module")
            # Its controller may be gone (a play interrupted): two runs must not write the same files.
            if same_process(module):
                if not end_process(module, grace=grace):
                    self._fail("the earlier run %s (pid %d) survived SIGKILL, stuck in the kernel: wait for it to "
                               "end (or reboot), then rerun" % (self.what, module["pid"]))
                ended.append({"pid": module["pid"], "command": "the previous run (%s)" % previous.get("command", "?")})
            deadline = time.monotonic() + wait
            while not self._try_lock():
                if time.monotonic() >= deadline:
                    self._fail("another run %s still holds %s after %gs: wait for it to finish, or end it, then rerun"
                               % (self.what, self.lock_path, wait))
                time.sleep(_POLL)
            previous = self._previous()
        for writer in previous.get("writers") or []:
            if not isinstance(writer, dict) or not _still_there(writer, True):
                continue
            if not end_process(writer, group=True, grace=grace):
                self._fail("pid %d of an earlier run %s (%s) survived SIGKILL, stuck in the kernel: wait for it to "
                           "end (or reboot), then rerun" % (writer["pid"], self.what, writer.get("command")))
            ended.append({"pid": writer["pid"], "command": writer.get("command")})
        self._write()
        return ended

    def _fail(self, message):
        self.release(remove=False)
        raise WriterError(message)

    def _write(self):
        doc = {"module": identity(os.getpid()), "command": self.what,
               "writers": sorted(self.writers.values(), key=lambda w: w["pid"])}
        write_atomic(self.json_path, json.dumps(doc, sort_keys=True) + "\n")

    def add(self, pid, argv, command):
        """Record a writer as soon as it started (before it writes much): ``argv`` as it will
        run (after any wrapper's exec), ``command`` for messages."""
        record = identity(pid)
        if record is None:  # already ended
            return
        record["argv"] = [str(arg) for arg in argv]
        record["command"] = command
        with self.mutex:
            self.writers[pid] = record
            self._write()

    def remove(self, pid):
        with self.mutex:
            if self.writers.pop(pid, None) is not None:
                self._write()

    def release(self, remove=True):
        """At the end of a run: no writer is left, so the record goes; then the lock."""
        if self.fd is None:
            return
        if remove:
            try:
                os.unlink(self.json_path)
            except OSError:
                pass
        os.close(self.fd)
        self.fd = None


class Writers(object):
    """Runs the writing commands of one module run (``run_with_timeout``), each recorded in a
    ``WriterRecord`` while it runs and, once ``use_pdeathsig`` found a working ``setpriv``,
    killed by the kernel when the thread that started it (and waits for it) dies: with the
    module, however it dies. A preexec_fn calling prctl would do the same without setpriv,
    but runs Python between fork and exec, which can deadlock in a module running threads."""

    def __init__(self, base, what, env=None):
        self.record = WriterRecord(base, what)
        self.env = env
        self.prefix = []
        self.claimed = False

    def use_pdeathsig(self, setpriv, probe, timeout):
        """True when ``setpriv --pdeathsig KILL -- probe...`` works (util-linux 2.33 or later)."""
        prefix = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
        if prefix and run_with_timeout(prefix + list(probe), timeout, env=self.env)["rc"] == 0:
            self.prefix = prefix
        return bool(self.prefix)

    def claim(self):
        """``WriterRecord.claim``: what an earlier run left running is ended first."""
        ended = self.record.claim()
        self.claimed = True
        return ended

    def run(self, argv, timeout, stdout_path=None):
        """``run_with_timeout(argv, ...)``, recorded while it runs; ``command`` is ``argv``'s."""
        started = []

        def on_start(pid):
            started.append(pid)
            if self.claimed:
                try:
                    self.record.add(pid, argv, command_string(argv))
                except (IOError, OSError):
                    pass  # it still dies with the module; the run itself does not depend on the record

        result = run_with_timeout(self.prefix + list(argv), timeout, env=self.env, stdout_path=stdout_path,
                                  on_start=on_start)
        result["command"] = command_string(argv)
        if started and self.claimed:
            try:
                self.record.remove(started[0])
            except (IOError, OSError):
                pass
        return result

    def release(self):
        if self.claimed:
            self.record.release()
            self.claimed = False
