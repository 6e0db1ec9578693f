"""Process helpers for the tests that run real commands: measured here, around the
calls, never taken from the results under test."""

import json
import os
import shutil
import time

import pytest

# A call that returns at its deadline needs milliseconds past it; a test calls it late only
# at this many times its timeout. The rest is room for a loaded machine, so an upper bound
# is always ``OVERDUE * timeout`` (plus fixed, named delays the code adds), never a guess
# at this machine's speed; it still tells "returned at the deadline" from "hung".
OVERDUE = 3


def alive(pid):
    """A live process (zombies waiting for a reaper do not count)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (IOError, OSError):
        return False
    return state not in ("Z", "X")


def timed(func, *args, **kwargs):
    """``(result, wall seconds)`` of one call."""
    started = time.monotonic()
    result = func(*args, **kwargs)
    return result, time.monotonic() - started


def parent(pid):
    """The parent's pid, or None when the process is gone."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (IOError, OSError, IndexError, ValueError):
        return None


def cmdline(pid):
    """The process's argv, or [] when it is gone."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return [arg.decode("utf-8", "replace") for arg in handle.read().split(b"\0") if arg]
    except (IOError, OSError):
        return []


def descendants(pid):
    """Pids of the live processes below ``pid`` (children, their children, ...)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = parent(int(entry))
            if found is not None:
                parents[int(entry)] = found
    below, frontier = set(), {pid}
    while frontier:
        frontier = set(child for child, up in parents.items() if up in frontier) - below
        below |= frontier
    return sorted(p for p in below if alive(p))


def wait_until(condition, seconds, step=0.05):
    """Poll ``condition()`` until it returns something true or ``seconds`` pass; its last value."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(step)


def require(tool, package):
    """Path of ``tool``; fails the test (never skips) naming the Debian package when it is missing."""
    path = shutil.which(tool)
    if path is None:
        pytest.fail("%s is not installed (not on PATH): these tests run it for real; "
                    "apt-get install %s" % (tool, package))
    return path


def gone_within(pids_alive, limit):
    """Wait until ``pids_alive()`` is empty or ``limit`` seconds passed; return what is still alive.

    A killed process is gone once the kernel ran its exit, which a loaded machine can
    delay: callers pass a limit well under the process's own natural lifetime, so "still
    alive at the limit" can only mean it was not killed.
    """
    deadline = time.monotonic() + limit
    while True:
        left = pids_alive()
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def in_child(func, setup=None, passes=()):
    """``func()`` run in a forked child after ``setup()`` (privileges, namespaces: what the
    test must not do to pytest's own process); its JSON-able result comes back. An exception
    of a type in ``passes`` is raised again here with its message; any other fails the test."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        os.close(reader)
        try:
            if setup is not None:
                setup()
            payload = {"result": func()}
        except passes as exc:  # pylint: disable=catching-non-exception
            payload = {"passes": [next(i for i, kind in enumerate(passes) if isinstance(exc, kind)), str(exc)]}
        except BaseException as exc:  # reported to the parent
            payload = {"crash": repr(exc)}
        os.write(writer, json.dumps(payload).encode())
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as inp:
        data = inp.read()
    os.waitpid(pid, 0)
    payload = json.loads(data)
    assert "crash" not in payload, payload["crash"]
    if "passes" in payload:
        index, message = payload["passes"]
        raise passes[index](message)
    return payload["result"]
