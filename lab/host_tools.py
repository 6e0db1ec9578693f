#!/usr/bin/env python
"""The controller's host tools: the one list of every command that the tests, the lab
and the playbooks run on the controller, with the Debian/Ubuntu package that provides it.

    python3 lab/host_tools.py doctor    # name each missing tool and its package; exit 1 if any
    python3 lab/host_tools.py install   # apt-get install the missing packages (root), then doctor

`make doctor` and `make setup` call it; lab/spark_lab.py installs from the same list. Only
the standard library, so it runs before `make setup` on a brand-new machine. A fresh Debian
has no ping, rsync or gpg: a test that needs one fails naming it here, it never skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Tool:
    command: str
    package: str  # Debian 12 / Ubuntu 24.04 package name (the same on both)
    used_by: str


TOOLS = (
    Tool("ping", "iputils-ping", "link_probe (unit tests ping a peer for real)"),
    Tool("ssh", "openssh-client", "Ansible to the lab nodes; hf_mirror and link_probe tests"),
    Tool("ssh-keygen", "openssh-client", "the lab's keys"),
    Tool("rsync", "rsync", "hf_mirror (unit and lab tests copy for real)"),
    Tool("fincore", "util-linux", "the page-cache oracle of the unit tests"),
    Tool("nsenter", "util-linux", "runs labs 2+ in their own network namespace (lab/sparklab/netns.py)"),
    Tool("mount", "mount", "tmpfs-backed disk-full tests"),
    Tool("git", "git", "the lab's git server, image content ids, tests"),
    Tool("gpg", "gpg", "apt_keyring tests check our OpenPGP parser against GnuPG"),
    Tool("ip", "iproute2", "ibdev2netdev and link tests"),
    Tool("curl", "curl", "benchmarks and the lab demo"),
    Tool("iptables", "iptables", "the lab's cables (no NAT on the links)"),
    Tool("tar", "tar", "the lab's image builds; make sanity"),
    Tool("debootstrap", "debootstrap", "the lab's node and engine images"),
    Tool("docker", "docker.io", "the lab (the client)"),
    Tool("dockerd", "docker.io", "the lab (its engine, started when none answers)"),
    Tool("shellcheck", "shellcheck", "make sanity (ansible-test skips its shellcheck test without it)"),
    Tool("stress-ng", "stress-ng", "tests/stress_unit.sh (unit suite under CPU and memory load)"),
)

# sbin holds ip and iptables; a non-root PATH may lack it.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"])


def missing(tools=TOOLS) -> list[Tool]:
    """The tools not found on PATH (or in sbin)."""
    return [t for t in tools if shutil.which(t.command, path=SEARCH_PATH) is None]


def packages(tools) -> list[str]:
    """The packages that provide `tools`, each once, in list order."""
    return list(dict.fromkeys(t.package for t in tools))


def report(tools) -> str:
    width = max(len(t.command) for t in tools)
    lines = [f"missing host tools ({len(tools)}):"]
    lines += [f"  {t.command:<{width}}  package {t.package:<15} needed by {t.used_by}" for t in tools]
    lines.append(f"fix: make setup (as root), or: apt-get install {' '.join(packages(tools))}")
    return "\n".join(lines)


def install(tools, log=print) -> list[str]:
    """apt-get install the packages of `tools` when any is missing; return what it installed.
    Raises RuntimeError with the fix when not root or apt fails."""
    pkgs = packages(tools)
    if not pkgs:
        return []
    if os.geteuid() != 0:
        raise RuntimeError(f"missing {', '.join(pkgs)} and only root can install them: apt-get install {' '.join(pkgs)}")
    log(f"installing {' '.join(pkgs)} with apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # Another apt run may hold the lock on a shared machine: wait rather than fail.
    lock = ["-o", "DPkg::Lock::Timeout=600"]
    for cmd, timeout in (
        (["apt-get", *lock, "update", "-qq"], 900),
        (["apt-get", *lock, "install", "-y", "-qq", "--no-install-recommends", *pkgs], 1800),
    ):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` exited {proc.returncode}:\n{proc.stdout}{proc.stderr}".rstrip())
    return pkgs


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in (["doctor"], ["install"]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if args == ["install"]:
        try:
            install(missing())
        except RuntimeError as err:
            print(f"host_tools: {err}", file=sys.stderr)
            return 1
    gone = missing()
    if gone:
        print(report(gone), file=sys.stderr)
        return 1
    print(f"host tools: all {len(TOOLS)} present")
    return 0


if __name__ == "__main__":
    sys.exit(main())
