"""Running commands: the host's, the Docker CLI's and a node's (docker exec), and the
error every lab failure is raised as."""

from __future__ import annotations

import json
import subprocess


class LabError(RuntimeError):
    """A failure with a message that says what to do."""


def log(msg: str) -> None:
    print(f"[lab] {msg}", flush=True)


def run(cmd, check=True, input=None, timeout=600, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    if check and proc.returncode != 0:
        raise LabError(f"`{' '.join(map(str, cmd))}` exited {proc.returncode}:\n{proc.stdout}{proc.stderr}".rstrip())
    return proc


def docker(*args, check=True, input=None, timeout=600) -> subprocess.CompletedProcess:
    return run(["docker", *args], check=check, input=input, timeout=timeout)


def node_exec(node: str, script: str, user: str = "root", check=True, input=None, timeout=120):
    """bash -c `script` inside a node container, as `user`."""
    args = ["exec", "-u", user, "-e", "LC_ALL=C"] + (["-i"] if input is not None else []) + [node, "bash", "-c", script]
    return docker(*args, check=check, input=input, timeout=timeout)


def inspect(kind: str, name: str) -> dict | None:
    proc = docker(kind, "inspect", name, check=False)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)[0]
