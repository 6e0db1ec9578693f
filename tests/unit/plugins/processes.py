"""Process helpers for the tests that run real commands: measured here, around the
calls, never taken from the results under test."""

import time


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
