"""Fault injection of the lab hub (lab/hub/hub.py): the one bandwidth limit all connections
share, and the connection drops a test asks for (POST /_lab/faults). Standard library only."""

from __future__ import annotations

import threading
import time

SEND_CHUNK = 1 << 20  # body write size when no rate limit applies


class TokenBucket:
    """One bandwidth limit (bytes/s) shared by every connection, like one office uplink.

    Each writer reserves the next slot of the line for its chunk and sleeps until that slot
    has passed; slots never overlap, so N parallel transfers share `rate` between them. No
    burst credit builds up while the line is idle."""

    def __init__(self, rate: float | None = None):
        self._lock = threading.Lock()
        self._next_free = 0.0
        self.rate = rate

    def set_rate(self, rate: float | None) -> None:
        with self._lock:
            self.rate = float(rate) if rate else None

    def chunk_size(self) -> int:
        rate = self.rate
        # About 50 slots per second: smooth sharing without a syscall storm.
        return SEND_CHUNK if not rate else int(min(SEND_CHUNK, max(4096, rate / 50)))

    def take(self, nbytes: int) -> None:
        with self._lock:
            rate = self.rate
            if not rate:
                return
            now = time.monotonic()
            start = max(now, self._next_free)
            self._next_free = start + nbytes / rate
            wait = self._next_free - now
        if wait > 0:
            time.sleep(wait)


def check_faults(faults: dict) -> dict:
    """The faults of a POST /_lab/faults body, checked: {"drop": {name: {after_bytes, times,
    reset, done: 0}}} and/or {"rate_bps": N or None}, only the keys given; ValueError naming
    what is wrong. Nothing changes until every part is checked."""
    if not isinstance(faults, dict):
        raise ValueError("faults: expected a JSON object")
    unknown = set(faults) - {"drop", "rate_bps"}
    if unknown:
        raise ValueError(f"faults: unknown key(s) {sorted(unknown)}; expected drop, rate_bps")
    checked = {}
    if "drop" in faults:
        drops = {}
        for name, spec in (faults["drop"] or {}).items():
            if not isinstance(spec, dict) or not isinstance(spec.get("after_bytes"), int) or spec["after_bytes"] < 0:
                raise ValueError(f"drop[{name!r}]: expected {{'after_bytes': N >= 0, 'times': 1 or null}}")
            times = spec.get("times", 1)
            if times is not None and (not isinstance(times, int) or times < 1):
                raise ValueError(f"drop[{name!r}].times: expected a count >= 1, or null for every time")
            drops[name] = {"after_bytes": spec["after_bytes"], "times": times, "reset": bool(spec.get("reset")), "done": 0}
        checked["drop"] = drops
    if "rate_bps" in faults:
        rate = faults["rate_bps"]
        if rate is not None and (not isinstance(rate, (int, float)) or rate <= 0):
            raise ValueError("rate_bps: expected bytes per second > 0, or null for unlimited")
        checked["rate_bps"] = rate
    return checked


class Faults:
    """The faults in force: drops by file name, and the shared bandwidth limit (`bucket`)."""

    def __init__(self, rate_bps: float | None = None):
        self.initial_rate = rate_bps
        self.bucket = TokenBucket(rate_bps)
        self._lock = threading.Lock()
        self._drops: dict[str, dict] = {}

    def clear(self) -> None:
        """No drops; the rate back to its start value."""
        with self._lock:
            self._drops.clear()
        self.bucket.set_rate(self.initial_rate)

    def set(self, faults: dict) -> dict:
        """A given "drop" replaces all drops ({} clears them); a given "rate_bps" sets the
        shared limit (None: unlimited). Returns current()."""
        checked = check_faults(faults)
        if "rate_bps" in checked:
            self.bucket.set_rate(checked["rate_bps"])
        if "drop" in checked:
            with self._lock:
                self._drops = checked["drop"]
        return self.current()

    def current(self) -> dict:
        with self._lock:
            return {"drop": {k: dict(v) for k, v in self._drops.items()}, "rate_bps": self.bucket.rate}

    def claim_drop(self, repo_id: str, filename: str, start: int, end: int) -> tuple[int, bool] | None:
        """(file offset to cut at, reset) when a drop fault applies to this response."""
        with self._lock:
            for key in (f"{repo_id}/{filename}", filename):
                drop = self._drops.get(key)
                if drop is None:
                    continue
                if drop["times"] is not None and drop["done"] >= drop["times"]:
                    return None
                cut = max(drop["after_bytes"], start)
                if cut >= end:
                    return None  # the response ends before the cut point
                drop["done"] += 1
                return cut, drop["reset"]
        return None
