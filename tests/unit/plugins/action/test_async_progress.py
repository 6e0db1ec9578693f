"""async_progress through real ansible-playbook (local connection, a real async job):
progress lines appear while the job runs, the job's own result comes back when it
ends, and a job that fails fails the task with its own message."""

import json
import os
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))

# The job writes its progress file, then runs until the test lets it finish ({release} exists),
# so it is still running however long ansible takes to print; then {tail}.
JOB = ("printf '{\"bytes_done\": 1000000, \"bytes_total\": 3000000, \"rate_bps\": 1000000, \"eta_s\": 2}' "
       "> {progress}.tmp && mv {progress}.tmp {progress}; while [ ! -e {release} ]; do sleep 0.1; done; {tail}")
PREFIX = "[localhost] copy:"
# Only a guard against a hang: the job is released as soon as the lines it waits for were printed.
RELEASE_GUARD = 60


def play(tmp_path, tail, lines_before_release=0):
    """Run the playbook; the job finishes once ``lines_before_release`` progress lines were printed.

    Returns (exit code, ansible's stdout, its stderr).
    """
    progress = tmp_path / "progress.json"
    release = tmp_path / "release"
    if not lines_before_release:
        release.touch()
    job = JOB.replace("{progress}", str(progress)).replace("{release}", str(release)).replace("{tail}", tail)
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [
            {"name": "start", "ansible.builtin.shell": job, "async": 120, "poll": 0, "changed_when": False,
             "register": "job"},
            {"name": "wait", "dgx_spark.glm53.async_progress": {
                "jid": "{{ job.ansible_job_id }}", "progress_file": str(progress), "label": "copy", "interval": 1,
                "poll": 0.2}, "register": "waited"},
            {"name": "show", "ansible.builtin.debug": {"msg": "RC={{ waited.rc }} OUT={{ waited.stdout }}"}},
        ]}]))
    # Unbuffered, so each line can be read here when ansible prints it, not when it exits.
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_ASYNC_DIR=str(tmp_path / "async"),
               PYTHONUNBUFFERED="1")
    guard = threading.Timer(RELEASE_GUARD, release.touch)
    guard.start()
    try:
        with tempfile.TemporaryFile("w+") as stderr:
            proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(playbook)],
                                    cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
            output = []
            seen = 0
            for line in proc.stdout:
                output.append(line)
                if line.startswith(PREFIX):
                    seen += 1
                    if seen == lines_before_release:
                        release.touch()
            rc = proc.wait()
            stderr.seek(0)
            return rc, "".join(output), stderr.read()
    finally:
        guard.cancel()


def test_progress_lines_then_the_jobs_own_result(tmp_path):
    rc, output, errors = play(tmp_path, "echo finished", lines_before_release=2)
    assert rc == 0, output[-3000:] + errors[-2000:]
    lines = [line for line in output.splitlines() if line.startswith(PREFIX)]
    assert len(lines) >= 2, output  # the job ran until two were printed: fewer means they never came
    assert all("of 3.0 MB" in line and "1.0 MB/s" in line for line in lines), lines
    assert "RC=0 OUT=finished" in output
    # The async result file is cleaned up once the job's result came back.
    assert not list((tmp_path / "async").glob("*[0-9]*")), list((tmp_path / "async").iterdir())


def test_a_failed_job_fails_the_task_with_its_message(tmp_path):
    rc, output, errors = play(tmp_path, "echo 'disk full on /x' >&2; exit 3")
    assert rc != 0
    assert "disk full on /x" in output
    assert "Traceback" not in output + errors
