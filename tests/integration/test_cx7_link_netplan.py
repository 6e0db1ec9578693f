"""The optional netplan step: rendered content, and the clear skip where netplan is absent (the lab)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_template_declares_only_the_link_netdevs(tmp_path):
    dest = tmp_path / "40-glm53-cx7.yaml"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", str(REPO / "tests/integration/cx7_link/render_netplan.yml"),
         "-e", json.dumps({"dest": str(dest)})],
        cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    doc = yaml.safe_load(dest.read_text())
    assert doc["network"]["version"] == 2
    assert set(doc["network"]) == {"version", "ethernets"}
    ethernets = doc["network"]["ethernets"]
    assert ethernets == {
        "enp1s0f1np1": {"dhcp4": False, "dhcp6": False, "link-local": [], "addresses": ["198.18.1.10/24"], "mtu": 9000},
        "enP2p1s0f1np1": {"dhcp4": False, "dhcp6": False, "link-local": [], "addresses": ["198.18.2.10/25"], "mtu": 1500},
    }


def test_configure_is_skipped_with_a_message_without_netplan(run_playbook, tmp_path):
    result = run_playbook("playbooks/preflight.yml", extravars={
        "cx7_link_configure": True, "cx7_link_report_path": str(tmp_path / "r.json")})
    messages = result.task_results("Say why the link is not configured")
    assert set(messages) == {"spark-head", "spark-worker"}
    assert "/usr/sbin/netplan not found" in messages["spark-head"]["msg"]
    # Nothing of the configure step changed anything. (The cluster contract may be rewritten
    # when an earlier test left another cluster's contract on the nodes.)
    changed = {ev["event_data"].get("task") for ev in result.events
               if ev.get("event") == "runner_on_ok" and (ev["event_data"].get("res") or {}).get("changed")}
    assert changed <= {"Persist the cluster contract on every node"}, changed
