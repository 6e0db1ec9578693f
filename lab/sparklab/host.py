"""The controller: its host tools, its Docker engine (started when none answers) and the
Debian mirror the image builds use."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import host_tools

from sparklab.commands import LabError, docker, log
from sparklab.layout import ENGINE_DATA, ENGINE_HOST, ENGINE_RUN, LAB_ID, STATE


# Controller engine, when we start one: its own bridge and pool inside 198.18.0.0/15,
# clear of the lab networks (networks.py) and of the nodes' inner pools (198.19.0.0/16).
ENGINE_BIP = "198.18.250.1/24"
ENGINE_POOL = "base=198.18.128.0/18,size=24"


def ensure_tools(changes: list[str]) -> None:
    """Every host tool of lab/host_tools.py (the one list `make setup` installs too)."""
    try:
        installed = host_tools.install(host_tools.missing(), log=log)
    except RuntimeError as err:
        raise LabError(str(err)) from None
    if installed:
        changes.append("installed " + " ".join(installed))


def engine_args() -> list[str]:
    """Lab N > 1: an engine of its own beside lab 1's (netns.py runs this process in the lab's
    namespace): its own socket, state, runtime files and configuration."""
    if LAB_ID == 1:
        return []
    if os.environ.get("DOCKER_HOST") != ENGINE_HOST:
        raise LabError(f"lab {LAB_ID}: run it as `spark_lab.py --lab {LAB_ID} ...` (DOCKER_HOST must be {ENGINE_HOST})")
    ENGINE_RUN.mkdir(parents=True, exist_ok=True)
    config = STATE / "dockerd.json"
    config.write_text("{}\n")  # not the controller's /etc/docker/daemon.json: lab 1's engine reads that
    return [
        "--host", ENGINE_HOST, "--data-root", str(ENGINE_DATA / "docker"), "--exec-root", str(ENGINE_RUN / "exec"),
        "--pidfile", str(ENGINE_RUN / "dockerd.pid"), "--config-file", str(config),
    ]


def engine_answers() -> bool:
    return docker("version", "--format", "{{.Server.Version}}", check=False, timeout=30).returncode == 0


def ensure_engine(changes: list[str]) -> None:
    if engine_answers():
        return
    if os.geteuid() != 0:
        raise LabError("no Docker engine answers and only root can start one; start dockerd, or run as root")
    STATE.mkdir(parents=True, exist_ok=True)
    logfile = STATE / "dockerd.log"
    log(f"no Docker engine answers: starting dockerd in the background (log: {logfile})")
    with open(logfile, "ab") as out:
        # Own session so it outlives make; its own bridge in 198.18/15, not 172.17/16.
        subprocess.Popen(
            ["dockerd", "--bip", ENGINE_BIP, "--default-address-pool", ENGINE_POOL, *engine_args()],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.time() + 60
    while time.time() < deadline:
        if engine_answers():
            changes.append("started dockerd")
            return
        time.sleep(1)
    tail = logfile.read_text(errors="replace").splitlines()[-20:]
    raise LabError("dockerd did not answer within 60 s; last log lines:\n" + "\n".join(tail))


def debian_mirror() -> str:
    """The Debian mirror apt on this controller uses (the only one reachable)."""
    if os.environ.get("GLM53_LAB_MIRROR"):
        return os.environ["GLM53_LAB_MIRROR"]
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for src in sources:
        try:
            text = src.read_text()
        except OSError:
            continue
        # deb822: "URIs: http://.../debian" ; one-line: "deb http://.../debian bookworm main"
        for m in re.finditer(r"^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+/debian)/?\s*(?:$|\s)", text, re.M):
            return m.group(1)
    return "http://deb.debian.org/debian"
