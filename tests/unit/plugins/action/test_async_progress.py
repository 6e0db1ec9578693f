"""async_progress through real ansible-playbook (local connection, a real async job):
progress lines appear while the job runs, the job's own result comes back when it
ends, and a job that fails fails the task with its own message."""

import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))

# The job: a shell loop that rewrites a progress file three times, a second apart.
JOB = ("for i in 1 2 3; do printf '{\"bytes_done\": %d000000, \"bytes_total\": 3000000, \"rate_bps\": 1000000, "
       "\"eta_s\": %d}' $i $((3 - i)) > {progress}.tmp && mv {progress}.tmp {progress}; sleep 1.2; done; {tail}")


def play(tmp_path, tail, extra_vars=None):
    progress = tmp_path / "progress.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [
            {"name": "start", "ansible.builtin.shell": JOB.replace("{progress}", str(progress)).replace("{tail}", tail),
             "async": 120, "poll": 0, "changed_when": False, "register": "job"},
            {"name": "wait", "dgx_spark.glm53.async_progress": {
                "jid": "{{ job.ansible_job_id }}", "progress_file": str(progress), "label": "copy", "interval": 1,
                "poll": 0.2}, "register": "waited"},
            {"name": "show", "ansible.builtin.debug": {"msg": "RC={{ waited.rc }} OUT={{ waited.stdout }}"}},
        ]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_ASYNC_DIR=str(tmp_path / "async"))
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(playbook)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_progress_lines_then_the_jobs_own_result(tmp_path):
    proc = play(tmp_path, "echo finished")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[localhost] copy:")]
    assert len(lines) >= 2, proc.stdout
    assert any("of 3 MB" in line and "1 MB/s" in line for line in lines), lines
    assert "RC=0 OUT=finished" in proc.stdout
    # The async result file is cleaned up once the job's result came back.
    assert not list((tmp_path / "async").glob("*[0-9]*")), list((tmp_path / "async").iterdir())


def test_a_failed_job_fails_the_task_with_its_message(tmp_path):
    proc = play(tmp_path, "echo 'disk full on /x' >&2; exit 3")
    assert proc.returncode != 0
    assert "disk full on /x" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
