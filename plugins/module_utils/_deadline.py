# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helper: run a command on a node with a hard deadline. Not a public API.

``run_with_timeout`` is the one way node-side code runs a command that can wedge
(ping, ssh, docker, nvidia-smi, ibdev2netdev): its own process group, a hard
deadline, and the whole group killed when the deadline passes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import shlex
import signal
import subprocess
import tempfile

# Seconds a timed-out group gets after SIGTERM, and again after SIGKILL, before we give up on it.
KILL_GRACE = 0.5


def command_string(argv):
    """The command as a shell would need it typed, for messages and results."""
    return " ".join(shlex.quote(str(arg)) for arg in argv)


def os_error(exc):
    """``ECONNREFUSED (Connection refused)`` rather than ``[Errno 111] Connection refused``."""
    name = errno.errorcode.get(getattr(exc, "errno", None) or 0)
    if name and getattr(exc, "strerror", None):
        return "%s (%s)" % (name, exc.strerror)
    return str(exc) or type(exc).__name__


def _signal_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except OSError:  # the group is already gone
        pass


def _reaped(proc, timeout):
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


def _read(handle):
    handle.seek(0)
    return handle.read().decode("utf-8", "replace")


def run_with_timeout(argv, timeout, env=None, stdout_path=None, on_start=None):
    """Run ``argv`` with stdin from /dev/null, in a new session, for at most ``timeout`` seconds.

    Returns ``{rc, stdout, stderr, timed_out, command, timeout, error}``. ``rc`` is the
    exit status, negative for a signal (``-15`` after a timeout), None when the command
    could not be started or could not be reaped. ``error`` is None unless the command
    could not be started or timed out; then it names the command and the timeout.

    On timeout the whole process group gets SIGTERM, then SIGKILL after KILL_GRACE, so
    children that ignore SIGTERM die too; the call returns within about timeout + 1 s
    even then. The new session also means ssh cannot prompt on a terminal. Output goes to
    temporary files rather than pipes, so a descendant that escaped the group and keeps
    the output open cannot hold the call past its deadline.

    With ``stdout_path``, stdout goes to that file instead (created or emptied), so another
    thread can follow a long command's output while it runs (rsync's progress); it is still
    returned in ``stdout``.

    ``on_start(pid)`` is called once the command runs, before the call waits for it (to
    record it somewhere another process can find it).
    """
    argv = [str(arg) for arg in argv]
    result = {"rc": None, "stdout": "", "stderr": "", "timed_out": False, "command": command_string(argv),
              "timeout": timeout, "error": None}
    opened = open(stdout_path, "w+b") if stdout_path else tempfile.TemporaryFile()
    with opened as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, close_fds=True,
                                    start_new_session=True, env=env)
        except OSError as exc:
            result["error"] = "cannot run %s: %s" % (argv[0], os_error(exc))
            return result
        if on_start is not None:
            on_start(proc.pid)
        if not _reaped(proc, timeout):
            result["timed_out"] = True
            _signal_group(proc.pid, signal.SIGTERM)
            _reaped(proc, KILL_GRACE)
            # Also after the leader exited: group members that trapped SIGTERM may remain.
            _signal_group(proc.pid, signal.SIGKILL)
            reaped = _reaped(proc, KILL_GRACE)
            result["error"] = "`%s` did not finish within %gs; its process group was killed" % (result["command"], timeout)
            if not reaped:  # e.g. stuck in the kernel (state D): leave it rather than wedge ourselves
                result["error"] = "`%s` did not finish within %gs and survived SIGKILL (pid %d)" % (
                    result["command"], timeout, proc.pid)
        result["rc"] = proc.returncode
        result["stdout"] = _read(out)
        result["stderr"] = _read(err)
    return result
