"""The module tests' replay of a module's AnsiballZ payload (tests/unit/plugins/ansiballz.py)
reports what real ansible reports for the same call - a change, check mode, nothing to do, a
failure the module names, an option it refuses - and leaves to real ansible the commands it
cannot replay."""

import json
import os
import subprocess
import sys

from ansible_collections.dgx_spark.glm53.tests.unit.plugins import ansiballz

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
MODULE = "dgx_spark.glm53.cluster_contract"
NODE = {"link_address": "198.18.1.10", "netdev": "enp1s0f1np1", "env": {"NCCL_IB_GID_INDEX": "3"}}
CONTRACT = {"schema": 1, "path": "tensorfold", "head": "spark-head", "workers": ["spark-worker"],
            "master_address": "198.18.1.10", "master_port": 29551, "ssh_user": "spark", "links": [],
            "nodes": {"spark-head": dict(NODE, rank=0, role="head"),
                      "spark-worker": dict(NODE, rank=1, role="worker", link_address="198.18.1.11")}}


def command(args, check=False, module=MODULE):
    return [ANSIBLE, "localhost", "-i", "localhost,", "-c", "local", "-e",
            "ansible_python_interpreter=%s" % sys.executable, "-m", module, "-a", json.dumps(args)] + \
        (["--check"] if check else [])


def host(proc):
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_a_replay_reports_what_ansible_reports(tmp_path, monkeypatch):
    monkeypatch.setattr(ansiballz, "_PAYLOADS", {})
    present = {"state": "present", "contract": CONTRACT, "node": "spark-head"}
    calls = [(present, True), (present, False), (present, False), ({"state": "read"}, False),
             ({"state": "read", "unknown": 1}, False)]
    ansiballz.run(command(dict(present, config_dir=str(tmp_path / "first")), check=True), env=ENV, cwd=ROOT)
    assert list(ansiballz._PAYLOADS) == [(MODULE, "ansible_python_interpreter=%s" % sys.executable)]  # pylint: disable=protected-access
    seen = []
    for args, check in calls:
        replayed = ansiballz.run(command(dict(args, config_dir=str(tmp_path / "replay")), check), env=ENV, cwd=ROOT)
        real = subprocess.run(command(dict(args, config_dir=str(tmp_path / "real")), check), env=ENV, cwd=ROOT,
                              capture_output=True, text=True, check=False)
        assert replayed.returncode == real.returncode
        assert json.loads(json.dumps(host(replayed)).replace("/replay", "/real")) == host(real)
        seen.append((real.returncode, host(real)["changed"]))
    assert seen == [(0, True), (0, True), (0, False), (0, False), (2, False)]


def test_what_it_cannot_replay_runs_as_given():
    # A module with an action plugin (its controller half), and the text an operator reads.
    assert ansiballz._parse(command({}, module="dgx_spark.glm53.preflight_report")) is None  # pylint: disable=protected-access
    assert ansiballz._parse(command({}) + ["-v"]) is None  # pylint: disable=protected-access
    text = dict(ENV, ANSIBLE_STDOUT_CALLBACK="default")
    proc = ansiballz.run(command({"state": "bogus"}), env=text, cwd=ROOT)
    assert "value of state must be one of" in proc.stdout and not proc.stdout.lstrip().startswith("{")
