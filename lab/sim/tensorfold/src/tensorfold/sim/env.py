"""Environment knobs, the log and the lab's fault switches."""

import os
import time
import sys
import threading

_LOG_LOCK = threading.Lock()


def log(line):
    """One line on stdout (docker logs), flushed at once."""
    with _LOG_LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def text(name, default=""):
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def number(name, default, kind=float):
    """A numeric knob; a value that is not a number is a start-up error (SystemExit)."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return kind(value)
    except ValueError:
        log("[tensorfold] %s=%s: not a%s number" % (name, value, "n integer" if kind is int else ""))
        raise SystemExit(1)


def flag(name, default=False):
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


# --- lab-only knobs (not in the real engine) -------------------------------------

def boot_seconds():
    """Least time from launch to serving (GLM53_LAB_BOOT_S, default 2)."""
    return number("GLM53_LAB_BOOT_S", 2.0)


def rendezvous_timeout():
    return number("GLM53_LAB_RDZV_TIMEOUT_S", 30.0)


def collective_timeout():
    return number("GLM53_LAB_COLLECTIVE_TIMEOUT_S", 600.0)


def heartbeat_seconds():
    return number("GLM53_LAB_HEARTBEAT_S", 1.0)


def round_seconds():
    return number("GLM53_LAB_ROUND_S", 0.02)


def prefill_tps():
    return number("GLM53_LAB_PREFILL_TPS", 4000.0)


def busy_free_gb():
    """Free device memory the simulated GB10 shows while a request runs."""
    return number("GLM53_LAB_BUSY_FREE_GB", 1.5)


def switch_dir():
    return text("GLM53_LAB_SWITCH_DIR", "/sessions")


def switch(name):
    """Is the lab fault switch ``name`` (lab-hang, lab-fatal) present?"""
    return os.path.exists(os.path.join(switch_dir(), name))


HANG = "lab-hang"
# A real hang is the process's state: a restart clears it. A switch that says "once" hangs only
# the engine that ran when it was made (by its mtime), never one started after it; an empty
# one hangs every engine while it is there.
STARTED = time.time()


def hung():
    """Is this engine hung by the lab-hang switch?"""
    path = os.path.join(switch_dir(), HANG)
    try:
        with open(path) as handle:
            once = handle.read().strip() == "once"
        return not once or os.path.getmtime(path) >= STARTED
    except OSError:
        return False


FATAL = "lab-fatal"
