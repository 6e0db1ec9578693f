# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers: the operations state directory on the head, and the one lock. Not a public API.

tf-prod.sh's layout (seed-repo §1.1), path-independent: ``DISABLED`` (stop means stop: no tick
starts the engine), ``fails`` (unhealthy ticks in a row), ``halted`` (the heal budget is spent:
alert only until an operator starts the engine), ``heals.json`` (when each heal ran, why, how it
ended), ``watchdog.log`` (one UTC-stamped line an event, ``date -u +%FT%TZ``) and ``evidence/``.

The lock is the kit's ``$STATE_DIR/lock`` (kit §6.3): the kit's own start, the roles' starts, the
operations playbooks and a heal all take it, so no two of them ever run at once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import time

DISABLED = "DISABLED"
FAILS = "fails"
HALTED = "halted"
HEALS = "heals.json"
LOG = "watchdog.log"
EVIDENCE = "evidence"
# heals.json keeps this many entries: enough for the budget's hour and for a status.
HEALS_KEPT = 50


def utc(now=None):
    """``2026-12-02T07:01:02Z``: the spec's stamp (``date -u +%FT%TZ``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))


class State(object):
    """The files of one state directory (made on first write, never on a read)."""

    def __init__(self, directory, log_name=LOG, clock=time.time):
        self.directory = os.path.expanduser(directory)
        # tensorfold keeps tf-prod.sh's one log (tf-prod.log), which its role's starts write too.
        self.log_name = log_name
        self.clock = clock

    def path(self, name):
        return os.path.join(self.directory, name)

    def _write(self, name, text):
        os.makedirs(self.directory, exist_ok=True)
        tmp = self.path(name + ".tmp")
        with open(tmp, "w") as handle:
            handle.write(text)
        os.replace(tmp, self.path(name))

    def _read(self, name):
        try:
            with open(self.path(name)) as handle:
                return handle.read()
        except (IOError, OSError):
            return None

    def _remove(self, name):
        try:
            os.unlink(self.path(name))
            return True
        except OSError:
            return False

    def log(self, message):
        """Append one UTC-stamped line to the log and return it."""
        line = "%s %s" % (utc(self.clock()), " ".join(str(message).split()))
        os.makedirs(self.directory, exist_ok=True)
        with open(self.path(self.log_name), "a") as handle:
            handle.write(line + "\n")
        return line

    def log_tail(self, lines=10):
        return (self._read(self.log_name) or "").splitlines()[-lines:]

    # DISABLED: set by a stop before anything is stopped, cleared by a start that reached READY.
    def disabled(self):
        return os.path.exists(self.path(DISABLED))

    def disable(self, why):
        self._write(DISABLED, "%s %s\n" % (utc(self.clock()), why))

    def halted(self):
        text = self._read(HALTED)
        return text.strip() if text else None

    def halt(self, why):
        self._write(HALTED, "%s %s\n" % (utc(self.clock()), why))

    def fails(self):
        try:
            return max(0, int((self._read(FAILS) or "0").strip() or 0))
        except ValueError:
            return 0

    def set_fails(self, count):
        if count:
            self._write(FAILS, "%d\n" % count)
        else:
            self._remove(FAILS)

    def cleared_by_start(self):
        """READY: the marker, the counter and a spent budget's halt go (tf-prod.sh's start)."""
        return [name for name in (DISABLED, FAILS, HALTED) if self._remove(name)]

    def heals(self):
        try:
            value = json.loads(self._read(HEALS) or "[]")
        except ValueError:
            return []
        return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []

    def add_heal(self, entry):
        self._write(HEALS, json.dumps((self.heals() + [entry])[-HEALS_KEPT:], indent=1) + "\n")

    def update_last_heal(self, **fields):
        heals = self.heals()
        if heals:
            heals[-1].update(fields)
            self._write(HEALS, json.dumps(heals, indent=1) + "\n")

    def evidence_dir(self, stamp):
        directory = os.path.join(self.directory, EVIDENCE, stamp.replace(":", ""))
        os.makedirs(directory, exist_ok=True)
        return directory


class Lock(object):
    """``flock`` on the kit's lock file. ``acquire(wait)``: 0 = only try; True once held."""

    def __init__(self, path):
        self.path = os.path.expanduser(path)
        self.handle = None

    def acquire(self, wait=0.0, clock=time.monotonic, sleep=time.sleep):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.handle = open(self.path, "a")
        deadline = clock() + wait
        while True:
            try:
                fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except (IOError, OSError) as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if clock() >= deadline:
                self.handle.close()
                self.handle = None
                return False
            sleep(0.2)

    def held_elsewhere(self):
        """Whether another process holds the lock now (tried and let go at once)."""
        if not os.path.exists(self.path):
            return False
        if self.acquire(0):
            self.release()
            return False
        return True

    def release(self):
        if self.handle is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False
