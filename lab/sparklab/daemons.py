"""The lab's background servers on the controller (the hub, the git daemon): starting one,
waiting for it to serve, which process its pid file names, and stopping it. A pid file
outlives its process and a pid is reused, so a pid counts only while its command line is
still the server's."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from sparklab.commands import LabError


def start_server(cmd: list[str], log_file: Path, pid_file: Path, env=None) -> subprocess.Popen:
    """`cmd` in the background, its output appended to `log_file`, its pid in `pid_file`."""
    with open(log_file, "ab") as out:
        # Own session, so it outlives make.
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)  # fmt: skip
    pid_file.write_text(f"{proc.pid}\n")
    return proc


def wait_ready(proc: subprocess.Popen, ready, timeout: float, interval: float, name: str, log_file: Path, tail: int) -> bool:
    """Poll ready() every `interval` s: True once it holds, False after `timeout` s. A server
    that exits first is an error that shows the last `tail` lines of its log."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            lines = log_file.read_text(errors="replace").splitlines()[-tail:]
            raise LabError(f"{name} exited {proc.returncode}; last lines of {log_file}:\n" + "\n".join(lines))
        if ready():
            return True
        time.sleep(interval)
    return False


def process_argv(pid) -> list[bytes]:
    """The command line of process `pid`; [] when there is no such process or no pid."""
    try:
        return Path(f"/proc/{int(pid)}/cmdline").read_bytes().split(b"\0")
    except (OSError, TypeError, ValueError):
        return []


def pid_in(pid_file: Path, is_ours) -> int | None:
    """The pid in `pid_file`, only while is_ours(pid) says it is still our server."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if is_ours(pid) else None


def terminate(pid: int) -> None:
    os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 10
    while Path(f"/proc/{pid}").exists() and time.time() < deadline:
        time.sleep(0.1)
    if Path(f"/proc/{pid}").exists():
        os.kill(pid, signal.SIGKILL)


def stop_pid_file(pid_file: Path, is_ours) -> bool:
    """Stop the server `pid_file` names (when is_ours) and drop the file; True when one ran."""
    pid = pid_in(pid_file, is_ours)
    pid_file.unlink(missing_ok=True)
    if pid is None:
        return False
    terminate(pid)
    return True
