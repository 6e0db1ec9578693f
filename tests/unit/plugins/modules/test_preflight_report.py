"""preflight_report through real ansible-playbook: the report lands on the controller in
one step (directory created), never counts as a change, also in check mode, and the
lines and gate come back for the play output."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
REPORT = {
    "status": "fail", "nodes": {"spark-head": "ok", "spark-worker": "fail"},
    "checks": [
        {"check": "node.reachable", "node": "spark-head", "status": "ok", "message": "[node.reachable] spark-head: ok"},
        {"check": "node.reachable", "node": "spark-worker", "status": "ok", "message": "[node.reachable] spark-worker: ok"},
        {"check": "link.port_up", "node": "spark-head", "status": "ok", "message": "[link.port_up] spark-head: up"},
        {"check": "link.port_up", "node": "spark-worker", "status": "fail", "message": "[link.port_up] spark-worker: down"},
    ],
}
REPORT["failures"] = [REPORT["checks"][3]]
REPORT["warnings"] = []


def play(tmp_path, *extra):
    path = tmp_path / "deep" / "dir" / "report.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [{"name": "write", "dgx_spark.glm53.preflight_report": {
            "path": str(path), "report": REPORT, "name": "cx7_link preflight", "note": "nothing was changed."},
            "register": "written"},
            {"name": "show", "ansible.builtin.debug": {"var": "written"}}],
    }]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(playbook)] + list(extra),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return path, result


@pytest.mark.parametrize("extra", [[], ["--check"]])
def test_report_is_written_in_one_step_and_is_not_a_change(tmp_path, extra):
    path, result = play(tmp_path, *extra)
    assert result["changed"] is False
    assert json.loads(path.read_text()) == REPORT
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert result["path"] == str(path)
    lines = result["lines"]
    assert lines[0] == "cx7_link preflight: fail"
    assert lines[-1] == "FAIL [link.port_up] spark-worker: down"
    assert result["gate"] == [
        "cx7_link preflight failed on spark-worker (1 check(s); report %s):" % path,
        "[link.port_up] spark-worker: down",
        "Fix the above and rerun; nothing was changed.",
    ]
