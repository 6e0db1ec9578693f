"""lab/host_tools.py: the one list of controller tools, `make doctor` and `make setup`'s check.
Run as a child process with a PATH of the test's own, the way `make doctor` runs it."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TOOL = REPO / "lab" / "host_tools.py"
sys.path.insert(0, str(REPO / "lab"))
import host_tools  # noqa: E402  pylint: disable=wrong-import-position


def doctor(path: str):
    env = dict(os.environ, PATH=path)
    return subprocess.run([sys.executable, str(TOOL), "doctor"], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def fake_bin(tmp_path, present):
    """A PATH directory with an executable stub for each name in `present`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in present:
        stub = bin_dir / name
        stub.write_text("#!/bin/sh\n")
        stub.chmod(0o755)
    return str(bin_dir)


def test_doctor_names_a_missing_ping_and_its_package(tmp_path, monkeypatch):
    everything_but_ping = [t.command for t in host_tools.TOOLS if t.command != "ping"]
    # sbin is searched too; keep it out of reach so the stubs are all there is.
    monkeypatch.setattr(host_tools, "SEARCH_PATH", fake_bin(tmp_path, everything_but_ping))
    assert [t.command for t in host_tools.missing()] == ["ping"]
    text = host_tools.report(host_tools.missing())
    assert text.splitlines()[0] == "missing host tools (1):"
    assert "  ping  package iputils-ping" in text
    assert text.splitlines()[-1] == "fix: make setup (as root), or: apt-get install iputils-ping"


def test_doctor_exits_1_and_lists_each_package_once(tmp_path):
    proc = doctor(fake_bin(tmp_path, ["ping", "rsync"]))
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert not any(line.split()[0] in ("ping", "rsync") for line in lines[1:-1]), lines
    # ssh and ssh-keygen come from one package: named once in the fix.
    fix = lines[-1].split("apt-get install ", 1)[1].split()
    assert fix.count("openssh-client") == 1 and "iputils-ping" not in fix and "docker.io" in fix


def test_doctor_passes_when_every_tool_is_there(tmp_path):
    proc = doctor(fake_bin(tmp_path, [t.command for t in host_tools.TOOLS]))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"host tools: all {len(host_tools.TOOLS)} present\n"


def test_every_tool_the_tests_look_up_is_on_the_list():
    # What the suites call by name on the controller (shutil.which / subprocess argv).
    listed = {t.command for t in host_tools.TOOLS}
    assert {"ping", "ssh", "rsync", "fincore", "git", "gpg", "ip", "curl", "docker", "debootstrap"} <= listed
