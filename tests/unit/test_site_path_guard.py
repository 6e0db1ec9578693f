"""playbooks/site.yml refuses a bad `path` before contacting any host."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "playbooks", "site.yml")


def _run(tmp_path, *extra):
    # Hosts at TEST-NET addresses with a 1 s timeout: if the play ever tried to
    # reach them the recap would list them as unreachable.
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "sparks:\n  children:\n"
        "    spark_head:\n      hosts:\n        spark-head: {ansible_host: 192.0.2.10}\n"
        "    spark_workers:\n      hosts:\n        spark-worker: {ansible_host: 192.0.2.11}\n"
    )
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_TIMEOUT="1",
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    bindir = os.path.dirname(sys.executable)
    return subprocess.run(
        [os.path.join(bindir, "ansible-playbook"), "-i", str(inventory), PLAYBOOK, *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.mark.parametrize("extra, found", [
    (["-e", "path=foo"], "found: foo"),
    ([], "found: <not set>"),
    (["-e", "path=TensorFold"], "found: TensorFold"),
])
def test_bad_path_is_refused_before_any_host(tmp_path, extra, found):
    proc = _run(tmp_path, *extra)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Variable 'path' must be one of: tensorfold, vllm" in out
    assert found in out
    assert "spark-head" not in out and "spark-worker" not in out
    assert "UNREACHABLE" not in out


def test_tensorfold_with_two_workers_is_refused_naming_vllm(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "sparks:\n  children:\n"
        "    spark_head:\n      hosts:\n        spark-head: {ansible_host: 192.0.2.10}\n"
        "    spark_workers:\n      hosts:\n        spark-worker: {ansible_host: 192.0.2.11}\n"
        "        spark-worker-2: {ansible_host: 192.0.2.12}\n"
    )
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_TIMEOUT="1",
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
                           PLAYBOOK, "-e", "path=tensorfold"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "path=tensorfold serves exactly two Sparks (one head, one worker), but the inventory has 2 workers" in out
    assert "Use -e path=vllm for more nodes" in out
    assert "192.0.2" not in out and "UNREACHABLE" not in out
