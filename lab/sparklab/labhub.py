"""The lab hub: the Hugging Face Hub simulator (lab/hub/hub.py, lab/README.md) the nodes
download from, a background process of the controller's system python3 on the management
gateway."""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path

from sparklab.commands import LabError, log
from sparklab.daemons import pid_in, process_argv, start_server, stop_pid_file, wait_ready
from sparklab.layout import LAB, STATE

HUB_HOST, HUB_PORT = "198.18.0.1", 8090  # glm53-lab-mgmt's gateway: the controller, seen from the nodes
HUB_URL = f"http://{HUB_HOST}:{HUB_PORT}"  # = glm53_hf_endpoint in lab/inventory/group_vars/sparks.yml
HUB_SCRIPT = LAB / "hub" / "hub.py"
HUB_DATA = STATE / "hub"  # generated repos and requests.jsonl
HUB_PID = STATE / "hub.pid"
HUB_LOG = STATE / "hub.log"
HUB_BENCH_ENV = "GLM53_LAB_HUB_BENCH"  # =1: also serve glm53-lab/bench-1g (1 GiB)


def is_hub_process(pid) -> bool:
    """Whether `pid` runs `lab/hub/hub.py serve` (of this checkout of the lab or another)."""
    argv = process_argv(pid)
    return b"serve" in argv and any(a.endswith(b"lab/hub/hub.py") for a in argv)


def hub_pid() -> int | None:
    """The pid in hub.pid, only while that process is still a `hub.py serve`."""
    return pid_in(HUB_PID, is_hub_process)


def hub_answer(timeout: float = 2.0) -> dict | None:
    """The hub's /_lab/status, or None when nothing answers."""
    try:
        with urllib.request.urlopen(HUB_URL + "/_lab/status", timeout=timeout) as resp:
            return json.load(resp)
    except (OSError, ValueError):
        return None


def hub_wanted() -> tuple[str, bool]:
    """(code version, bench repo wanted) a running hub must match, else `up` restarts it."""
    sys.path.insert(0, str(HUB_SCRIPT.parent))
    try:
        import hub as hub_module  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(str(HUB_SCRIPT.parent))
    return hub_module.code_version(), os.environ.get(HUB_BENCH_ENV) == "1"


def hub_matches(answer: dict | None) -> bool:
    """Whether a hub's status shows this checkout's code, data dir and options."""
    version, bench = hub_wanted()
    return (
        bool(answer)
        and answer.get("version") == version
        and answer.get("root") == str(HUB_DATA)
        and answer.get("root_inode") == _inode(HUB_DATA)
        and ("glm53-lab/bench-1g" in answer.get("repos", {})) == bench
    )


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def stop_hub() -> bool:
    """Stop the hub we started (by its pid); True when one was running."""
    return stop_pid_file(HUB_PID, is_hub_process)


def ensure_hub(changes: list[str]) -> None:
    """The hub runs at HUB_URL with the current code: started if missing, restarted if dead,
    stuck or older; nothing happens when it is fine. Needs the mgmt network (its address)."""
    pid = hub_pid()
    answer = hub_answer()
    if pid is None and answer is not None:
        if not is_hub_process(answer.get("pid")):
            raise LabError(f"something that is not the lab hub answers at {HUB_URL}; stop it and rerun")
        # Started by another checkout of this lab number (one per machine): take it over.
        pid = answer["pid"]
        HUB_PID.write_text(f"{pid}\n")
    if pid and hub_matches(answer):
        return
    reason = "not running" if pid is None else "other code, data dir or options" if answer else "not answering"
    stop_hub()
    HUB_DATA.mkdir(parents=True, exist_ok=True)
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    cmd = [python, str(HUB_SCRIPT), "serve", "--root", str(HUB_DATA), "--host", HUB_HOST, "--port", str(HUB_PORT)]
    if hub_wanted()[1]:
        cmd.append("--bench")
    log(f"starting the lab hub at {HUB_URL} ({reason}; log: {HUB_LOG})")
    proc = start_server(cmd, HUB_LOG, HUB_PID)
    # The first start generates the test repos: minutes, not seconds.
    if wait_ready(proc, lambda: hub_matches(hub_answer()), 300, 0.5, "the lab hub", HUB_LOG, 15):
        changes.append(f"{'started' if pid is None else 'restarted'} the lab hub at {HUB_URL} ({reason})")
        return
    raise LabError(f"the lab hub (pid {proc.pid}) did not answer at {HUB_URL} within 300 s; see {HUB_LOG}")


def hub_status() -> tuple[bool, str]:
    """(healthy, one report line) of the hub."""
    pid = hub_pid()
    answer = hub_answer()
    if pid is None and answer is not None and is_hub_process(answer.get("pid")):
        return False, f"hub: pid {answer['pid']} of another checkout (data {answer.get('root')}) at {HUB_URL} (`make lab-up` replaces it)"
    if pid is None:
        return False, f"hub: not running (`make lab-up` starts it at {HUB_URL})"
    if answer is None:
        return False, f"hub: pid {pid} does not answer at {HUB_URL} (log: {HUB_LOG}; `make lab-up` restarts it)"
    stale = "" if hub_matches(answer) else "; runs other code, data dir or options (`make lab-up` restarts it)"
    return not stale, f"hub: {'healthy' if not stale else 'STALE'}, pid {pid} at {HUB_URL}, {len(answer.get('repos', {}))} repos{stale}"
