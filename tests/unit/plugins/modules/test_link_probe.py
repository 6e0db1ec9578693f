"""dgx_spark.glm53.link_probe run as a real module by ``ansible`` and ``ansible-playbook`` (local connection).

Covers what the cx7_link role relies on: input errors named without a traceback,
the documented result keys, and the listener started with async/poll 0 that
connectors reach from later tasks, with forks=1 and with serial.
"""

import json
import os
import socket
import subprocess
import sys
import time

import pytest
import yaml

from ansible_collections.dgx_spark.glm53.plugins.modules import link_probe
from ansible_collections.dgx_spark.glm53.tests.unit.plugins import ansiballz
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.ports import Reserved
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import require

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN = os.path.dirname(sys.executable)
# Run the module with the system Python a target would use, when there is one.
TARGET_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MODULE = "dgx_spark.glm53.link_probe"
NOWHERE = "198.18.255.254"
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
           ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_NOCOLOR="1")
# Seconds a listener waits for its connects and a connect retries for its listener. Only a
# failure waits it out; a starved machine needs far more than an idle one's 1 s.
WINDOW = 90


@pytest.fixture(name="port")
def fixture_port():
    """A port on 127.0.0.1 held for the test (ports.Reserved): the module's listener still binds it."""
    with Reserved() as reserved:
        yield reserved.port


def ansible(args, *extra):
    """Run ``ansible localhost`` with ``args`` (module arguments or a full -m/-a pair); return (rc, result, output)."""
    command = [os.path.join(BIN, "ansible"), "localhost", "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON]
    command += ["-m", MODULE, "-a", json.dumps(args)] if isinstance(args, dict) else list(args)
    command += list(extra)
    proc = ansiballz.run(command, cwd=REPO, env=ENV, timeout=120)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail("ansible printed no JSON (rc %d): %s %s" % (proc.returncode, proc.stdout, proc.stderr))
    return proc.returncode, report["plays"][0]["tasks"][0]["hosts"]["localhost"], proc.stdout + proc.stderr


def returned_keys(doc):
    """RETURN as nested {key: sub-keys or None}."""
    return dict((key, returned_keys(value["contains"]) if "contains" in value else None) for key, value in doc.items())


def assert_shape(result, shape, where="result"):
    """Every documented key is in the result and nothing undocumented is."""
    assert set(result) == set(shape), "%s: %s" % (where, sorted(set(result) ^ set(shape)))
    for key, sub in shape.items():
        if sub is None or result[key] is None:
            continue
        for index, item in enumerate(result[key] if isinstance(result[key], list) else [result[key]]):
            assert_shape(item, sub, "%s.%s[%d]" % (where, key, index))


@pytest.mark.parametrize("args, message", [
    ({"listen": {"address": "127.0.0.1", "port": 70000}}, "listen.port must be between 1 and 65535, got 70000"),
    ({"pings": [{"netdev": "lo", "target": "127.0.0.1", "size": 70000}], "ping_timeout": 0},
     "ping_timeout must be between 1 and 60 seconds, got 0; pings[0].size must be between 0 and 65507"),
    ({"ssh": [{"target": "h", "command": "true", "timeout": 0}]}, "ssh[0].timeout must be between 0.1 and 3600 seconds"),
    ({"connect": {"port": 80}}, "missing required arguments: address found in connect"),
])
def test_bad_input_is_refused_naming_the_option_without_a_traceback(args, message):
    rc, result, output = ansible(args)
    assert rc != 0 and result["failed"] is True
    assert message in result["msg"], result["msg"]
    # A crash would show as MODULE FAILURE with the traceback in module_stderr.
    assert "module_stderr" not in result and "Traceback" not in output, output


def test_bad_input_reads_as_a_plain_error_with_the_default_callback():
    command = [os.path.join(BIN, "ansible"), "localhost", "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % TARGET_PYTHON,
               "-m", MODULE, "-a", json.dumps({"connect": {"address": "127.0.0.1", "port": 0}})]
    env = dict(ENV, ANSIBLE_STDOUT_CALLBACK="default")
    proc = ansiballz.run(command, cwd=REPO, env=env, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Module failed: connect.port must be between 1 and 65535, got 0" in output, output
    assert "An exception occurred" not in output and "Traceback" not in output, output


@pytest.mark.parametrize("check", [False, True])
def test_one_call_runs_every_probe_and_returns_the_documented_keys(check, port):
    require("ping", "iputils-ping")  # the loopback ping below is expected to pass
    require("ssh", "openssh-client")
    args = {
        "pings": [{"netdev": "lo", "target": "127.0.0.1", "size": 1472, "peer": "self"},
                  {"netdev": "lo", "target": NOWHERE, "size": 1472}],
        "ping_timeout": 1,
        "listen": {"address": "127.0.0.1", "port": port, "timeout": WINDOW},
        "connect": {"address": "127.0.0.1", "port": port, "timeout": WINDOW},
        "ssh": [{"target": "nobody@%s" % NOWHERE, "options": ["-o", "ProxyCommand=sleep 30"], "command": "docker ps -q",
                 "timeout": 1, "worker": "w1"}],
    }
    rc, result, _output = ansible(args, *(["--check"] if check else []))
    assert rc == 0, result
    shape = returned_keys(yaml.safe_load(link_probe.RETURN))
    shape.update(changed=None, invocation=None, _ansible_no_log=None, action=None)
    assert_shape(result, shape)
    assert result["changed"] is False
    assert [p["ok"] for p in result["pings"]] == [True, False]
    assert result["listen"]["accepted"] == ["127.0.0.1"] and result["connect"]["connected"] is True
    (ssh,) = result["ssh"]
    assert ssh["timed_out"] is True and "within 1s" in ssh["error"]


def test_parts_not_asked_for_are_none():
    rc, result, _output = ansible({"pings": []})
    assert rc == 0, result
    assert result["pings"] == [] and result["listen"] is None and result["connect"] is None and result["ssh"] is None


def test_listener_started_async_is_reached_by_a_later_connect_and_collected(port):
    # Windows far past what an idle machine needs (the listener exits at its first connect, the
    # connect at its first success): on a starved machine (CI, when make test ran the unit tests
    # beside the lab's) the backgrounded module took over 10 s to bind, and a 10 s connect gave up.
    rc, job, _output = ansible({"listen": {"address": "127.0.0.1", "port": port, "timeout": WINDOW, "expect": 1}},
                               "-B", str(WINDOW + 30), "-P", "0")
    assert rc == 0 and job["started"], job
    rc, connected, _output = ansible({"connect": {"address": "127.0.0.1", "port": port, "timeout": WINDOW}})
    assert rc == 0 and connected["connect"]["connected"] is True, connected
    # The job's async limit (-B): it cannot run longer than that.
    deadline = time.monotonic() + WINDOW + 30
    while True:
        rc, status, _output = ansible(["-m", "ansible.builtin.async_status", "-a", "jid=%s" % job["ansible_job_id"]])
        if status.get("finished") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert rc == 0 and status["finished"], status
    assert status["listen"]["bound"] is True and status["listen"]["accepted"] == ["127.0.0.1"], status
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


PLAYBOOK = """
- name: Start the listener on the head
  hosts: head
  gather_facts: false
  tasks:
    - name: Listen for both workers
      dgx_spark.glm53.link_probe:
        listen: {address: 127.0.0.1, port: %(port)d, timeout: %(window)d, expect: 2}
      async: %(window_async)d
      poll: 0
      register: listener

- name: Connect from the workers, one at a time
  hosts: workers
  gather_facts: false
  serial: 1
  tasks:
    - name: Connect to the head
      dgx_spark.glm53.link_probe:
        connect: {address: 127.0.0.1, port: %(port)d, timeout: %(window)d}

- name: Collect the listener
  hosts: head
  gather_facts: false
  tasks:
    - name: Wait for the listener
      ansible.builtin.async_status:
        jid: "{{ listener.ansible_job_id }}"
      register: collected
      until: collected.finished
      retries: %(retries)d
      delay: 0.5
"""


def test_port_probe_passes_with_forks_1_and_serial(tmp_path, port):
    (tmp_path / "inventory").write_text(
        "[head]\nhead\n[workers]\nworker1\nworker2\n[all:vars]\nansible_connection=local\n"
        "ansible_python_interpreter=%s\n" % TARGET_PYTHON)
    (tmp_path / "play.yml").write_text(PLAYBOOK % {"port": port, "window": WINDOW, "window_async": WINDOW + 30,
                                                   "retries": 2 * (WINDOW + 30)})
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(tmp_path / "inventory"), "-f", "1",
                           str(tmp_path / "play.yml")], cwd=REPO, env=ENV, capture_output=True, text=True,
                          timeout=3 * WINDOW, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plays = json.loads(proc.stdout)["plays"]
    # The json callback lists each serial batch as a play of its own.
    assert [len(play["tasks"][0]["hosts"]) for play in plays] == [1, 1, 1, 1], plays
    connects = [play["tasks"][0]["hosts"][worker] for play, worker in zip(plays[1:3], ("worker1", "worker2"))]
    assert [c["connect"]["connected"] for c in connects] == [True, True], connects
    listened = plays[-1]["tasks"][0]["hosts"]["head"]
    assert listened["listen"]["accepted"] == ["127.0.0.1", "127.0.0.1"] and listened["listen"]["error"] is None


def _spec_from_doc(options):
    """The argument_spec the documentation describes, in argument_spec's own terms."""
    spec = {}
    for name, doc in options.items():
        entry = {"type": doc.get("type", "str")}
        for key in ("default", "elements", "choices"):
            if key in doc:
                entry[key] = doc[key]
        if doc.get("required"):
            entry["required"] = True
        if "suboptions" in doc:
            entry["options"] = _spec_from_doc(doc["suboptions"])
        spec[name] = entry
    return spec


def test_documentation_matches_the_argument_spec():
    doc = yaml.safe_load(link_probe.DOCUMENTATION)
    assert _spec_from_doc(doc["options"]) == link_probe.ARGUMENT_SPEC
    assert doc["attributes"]["check_mode"]["support"] == "full"
    assert MODULE in link_probe.EXAMPLES


def test_ansible_doc_renders_the_module():
    out = subprocess.run([os.path.join(BIN, "ansible-doc"), "--json", MODULE], cwd=REPO, env=ENV, check=True,
                         capture_output=True, text=True).stdout
    info = json.loads(out)[MODULE]
    assert set(info["doc"]["options"]) == set(link_probe.ARGUMENT_SPEC)
    assert set(info["return"]) == {"pings", "listen", "connect", "ssh", "elapsed"}
