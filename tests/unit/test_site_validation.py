"""playbooks/path.yml checks every site variable on every Spark against the site contract,
before any change and without contacting a node; and cx7_link's link values, templated by
Ansible from the role's own defaults and vars, let an explicit -e win over the inventory."""

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PATH_PLAYBOOK = os.path.join(ROOT, "playbooks", "path.yml")
# TEST-NET hosts and a 1 s timeout: a play that tried to reach them would say UNREACHABLE.
HOSTS = """\
sparks:
  vars:
    glm53_link_netdev: auto
    glm53_link_second_netdev: auto
  children:
    spark_head:
      hosts:
        spark-head: {ansible_host: 192.0.2.10, glm53_link_address: 198.18.1.10}
    spark_workers:
      hosts:
        spark-worker: {ansible_host: 192.0.2.11, glm53_link_address: 198.18.1.11}
"""


def run(tmp_path, playbook, *extra, host_vars=None):
    inventory = tmp_path / "inventory"
    (inventory / "host_vars").mkdir(parents=True, exist_ok=True)
    (inventory / "hosts.yml").write_text(HOSTS)
    for host, text in (host_vars or {}).items():
        (inventory / "host_vars" / ("%s.yml" % host)).write_text(text)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_TIMEOUT="1",
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
                           str(playbook), "-e", "path=tensorfold", *extra], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    return proc, " ".join((proc.stdout + proc.stderr).split())


def test_the_example_inventorys_values_pass(tmp_path):
    proc, out = run(tmp_path, PATH_PLAYBOOK)
    assert proc.returncode == 0, out
    assert "UNREACHABLE" not in out


def test_a_list_for_a_nodes_link_netdev_is_refused_naming_variable_node_and_fix(tmp_path):
    proc, out = run(tmp_path, PATH_PLAYBOOK, host_vars={"spark-worker": "glm53_link_netdev: [enp1s0f1np1]\n"})
    assert proc.returncode != 0
    assert ('spark-worker: 1 site variable(s) do not match the site contract: glm53_link_netdev: expected a string, '
            'found list ["enp1s0f1np1"]') in out
    assert "Fix: correct the value for spark-worker in the inventory (host_vars/spark-worker.yml" in out
    assert "Nothing was changed on any host" in out
    assert "fatal: [spark-head]" not in out and "UNREACHABLE" not in out


@pytest.mark.parametrize("extra, says", [
    (["-e", json.dumps({"glm53_models": {"tensorfold": [{"repo_id": "a/b"}]}})],
     "missing required arguments: revision found in glm53_models -> tensorfold"),
    (["-e", json.dumps({"glm53_disk_need_bytes": {"vllm": {"checkpoint": -5}}})],
     "glm53_disk_need_bytes.vllm.checkpoint: expected a whole number of 0 or more, found int -5"),
    (["-e", json.dumps({"glm53_disk_need_bytes": {"VLLM": {"checkpoint": 5}}})],
     "glm53_disk_need_bytes.VLLM. Supported parameters include: tensorfold, vllm"),
    (["-e", "glm53_path=TensorFold"], "glm53_path must be one of: tensorfold, vllm, got: TensorFold"),
    # Ansible's own validation takes true for an int; the site contract's check does not.
    (["-e", json.dumps({"glm53_api_port": True})],
     "glm53_api_port: expected a whole number from 1024 to 65535, found bool true; fix: set glm53_api_port"),
    (["-e", "glm53_api_bind=spark-head"],
     "glm53_api_bind: expected an IPv4 or IPv6 address literal, found str"),
])
def test_a_bad_site_value_given_with_e_is_refused_on_every_node(tmp_path, extra, says):
    proc, out = run(tmp_path, PATH_PLAYBOOK, *extra)
    assert proc.returncode != 0
    for node in ("spark-head", "spark-worker"):
        assert re.search(r"%s: \d site variable\(s\) do not match the site contract: .*?%s.*?Fix: correct the "
                         r"value for %s" % (node, re.escape(says), node), out), out
    assert "UNREACHABLE" not in out


NODE_CONFIG = """\
- name: Template cx7_link's per-node link as the role does, with no node contacted
  hosts: sparks
  gather_facts: false
  tasks:
    - name: The role's defaults and internals
      ansible.builtin.include_vars:
        file: "{{ item }}"
      loop: ["%(role)s/defaults/main.yml", "%(role)s/vars/main.yml"]
    - name: Print the per-node link
      ansible.builtin.debug:
        msg: "NODE_CONFIG={{ _cx7_link_node_config | to_json }}"
      run_once: true
"""


def node_config(tmp_path, *extra, host_vars=None):
    playbook = tmp_path / "node_config.yml"
    playbook.write_text(NODE_CONFIG % {"role": os.path.join(ROOT, "roles", "cx7_link")})
    proc, out = run(tmp_path, playbook, *extra, host_vars=host_vars)
    assert proc.returncode == 0, out
    return json.loads(re.search(r"NODE_CONFIG=(\{.*?\}\})'", out).group(1))


def test_an_explicit_netdev_wins_on_every_node_over_the_inventorys_auto(tmp_path):
    # issue 16 item 7: -e cx7_link_netdev=... was silently replaced by glm53_link_netdev: auto.
    config = node_config(tmp_path, "-e", "cx7_link_netdev=enp1s0f1np1")
    assert {node: c["netdev"] for node, c in config.items()} == {"spark-head": "enp1s0f1np1",
                                                                 "spark-worker": "enp1s0f1np1"}
    assert {node: c["address"] for node, c in config.items()} == {"spark-head": "198.18.1.10",
                                                                  "spark-worker": "198.18.1.11"}


def test_without_a_role_input_each_node_keeps_its_own_site_values(tmp_path):
    config = node_config(tmp_path, host_vars={"spark-worker": "glm53_link_netdev: enP2p1s0f1np1\n"
                                                              "cx7_link_address: 10.9.9.9\n"})
    assert config["spark-head"]["netdev"] == "auto" and config["spark-worker"]["netdev"] == "enP2p1s0f1np1"
    assert config["spark-worker"]["address"] == "198.18.1.11"
    assert config["spark-head"]["sysfs_root"] == "/sys" and config["spark-head"]["second_netdev"] == "auto"


def test_the_contract_is_found_when_path_yml_is_imported_from_another_directory(tmp_path):
    # molecule/site/converge.yml imports site.yml from elsewhere: playbook_dir is not playbooks/.
    (tmp_path / "elsewhere").mkdir()
    top = tmp_path / "elsewhere" / "converge.yml"
    top.write_text("- name: Import\n  ansible.builtin.import_playbook: %s\n" % PATH_PLAYBOOK)
    proc, out = run(tmp_path, top, host_vars={"spark-head": "glm53_sysfs_root: [/sys]\n"})
    assert proc.returncode != 0
    assert "spark-head: 1 site variable(s) do not match the site contract: glm53_sysfs_root: expected a string" in out


TF_API = """\
- name: Template the tensorfold role's API values as the role does, with no node contacted
  hosts: sparks
  gather_facts: false
  tasks:
    - name: The role's defaults and internals
      ansible.builtin.include_vars:
        file: "{{ item }}"
      loop: ["%(role)s/defaults/main.yml", "%(role)s/vars/main.yml"]
    - name: Print where the role probes the API and prod.env's HOST and PORT
      ansible.builtin.debug:
        msg: "TF_API={{ {'url': _tensorfold_api, 'env': _tensorfold_site_env.env,
          'errors': _tensorfold_site_env.errors} | to_json }}"
"""
CLUSTER = {"schema": 1, "path": "tensorfold", "head": "spark-head", "workers": ["spark-worker"],
           "master_address": "198.18.1.10", "master_port": 29551, "ssh_user": "spark",
           "nodes": {name: {"rank": rank, "role": role, "link_address": address, "netdev": "enp1s0f1np1",
                            "env": {"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "NCCL_IB_HCA": "rocep1s0f1"}}
                     for rank, (name, role, address) in enumerate((("spark-head", "head", "198.18.1.10"),
                                                                   ("spark-worker", "worker", "198.18.1.11")))}}


def tf_api(tmp_path, host_vars=None):
    playbook = tmp_path / "tf_api.yml"
    playbook.write_text(TF_API % {"role": os.path.join(ROOT, "roles", "tensorfold")})
    proc, out = run(tmp_path, playbook, "-e", json.dumps({"glm53_cluster": CLUSTER}), host_vars=host_vars)
    assert proc.returncode == 0, out
    # One line per host (`ok: [node] => msg: 'TF_API={...}'`); the include_vars items print `ok: [node]` too.
    return {host: json.loads(found) for host, found in re.findall(r"ok: \[([a-z-]+)\] => msg: 'TF_API=(\{.*?\})'",
                                                                  out)}


def test_the_role_probes_where_the_head_binds_and_writes_the_same_host_and_port(tmp_path):
    # The head's values count on every node; the worker's own are not the API's.
    seen = tf_api(tmp_path, host_vars={"spark-head": "glm53_api_bind: 0.0.0.0\nglm53_api_port: 9000\n",
                                       "spark-worker": "glm53_api_bind: 10.9.9.9\nglm53_api_port: 9100\n"})
    assert sorted(seen) == ["spark-head", "spark-worker"]
    for node, got in seen.items():
        # (No hf_weights facts here: only the weights' errors, none about the API.)
        assert [error for error in got["errors"] if "glm53_api" in error] == [], (node, got)
        assert got["url"] == "http://127.0.0.1:9000", node
        assert (got["env"]["HOST"], got["env"]["PORT"]) == ("0.0.0.0", "9000"), node


def test_without_site_values_the_role_uses_the_contracts_defaults(tmp_path):
    got = tf_api(tmp_path)["spark-head"]
    assert got["url"] == "http://127.0.0.1:8000"
    assert (got["env"]["HOST"], got["env"]["PORT"]) == ("127.0.0.1", "8000")
