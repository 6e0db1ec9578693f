"""pip_download_argv: the controller's `pip download` line for a node's wheelhouse, from
Ansible's architecture and Python facts; main(): `make node-requirements`, a role's lock from
the pins in its vars."""

import os

import pytest

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _wheelhouse
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._wheelhouse import (
    WheelhouseError,
    lock_entries,
    lock_header,
    locked_download_argv,
    pip_download_argv,
    platform_tags,
    python_x_y,
)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))

REQUIREMENTS = ["huggingface_hub==2.4.0", "tqdm==4.70.1"]


def test_a_spark_node_gets_aarch64_wheels_for_its_python():
    argv = pip_download_argv("aarch64", "3.12.3", REQUIREMENTS, "/tmp/wh", "26.3")
    assert argv == [
        "pip", "download", "--only-binary=:all:",
        "--platform", "manylinux2014_aarch64", "--platform", "manylinux_2_17_aarch64",
        "--platform", "manylinux_2_28_aarch64",
        "--python-version", "3.12", "--implementation", "cp", "--dest", "/tmp/wh",
        "huggingface_hub==2.4.0", "tqdm==4.70.1", "pip==26.3",
    ]


@pytest.mark.parametrize("fact,cpu", [("x86_64", "x86_64"), ("amd64", "x86_64"), ("aarch64", "aarch64"),
                                      ("arm64", "aarch64"), ("AARCH64", "aarch64")])
def test_architecture_facts_map_to_manylinux_cpus(fact, cpu):
    assert platform_tags(fact) == ["manylinux2014_%s" % cpu, "manylinux_2_17_%s" % cpu, "manylinux_2_28_%s" % cpu]


def test_the_pip_command_is_the_callers():
    argv = pip_download_argv("x86_64", "3.11", ["tqdm==4.70.1"], "wh", "26.3",
                             pip_command=["/venv/bin/python", "-m", "pip"])
    assert argv[:4] == ["/venv/bin/python", "-m", "pip", "download"]


@pytest.mark.parametrize("version,x_y", [("3.12", "3.12"), ("3.12.3", "3.12"), ("3.13.0rc1", "3.13"),
                                         (" 3.10.14 ", "3.10")])
def test_python_versions_become_x_y(version, x_y):
    assert python_x_y(version) == x_y


@pytest.mark.parametrize("kwargs,message", [
    ({"arch": "ppc64le"}, "architecture 'ppc64le' has no wheels here; expected one of aarch64, amd64, arm64, x86_64"),
    ({"python_version": "2.7.18"}, "python version '2.7.18' is not a CPython 3 version"),
    ({"python_version": "three"}, "python version 'three' is not a CPython 3 version"),
    ({"requirements": ["tqdm"]}, "requirement 'tqdm' is not pinned as name==version"),
    ({"requirements": ["tqdm>=4.70"]}, "requirement 'tqdm>=4.70' is not pinned as name==version"),
    ({"requirements": "tqdm==4.70.1"}, "requirements must be a non-empty list"),
    ({"requirements": []}, "requirements must be a non-empty list"),
    ({"pip_version": ">=26"}, "pip_version '>=26' is not a version"),
    ({"dest": ""}, "dest (the wheelhouse directory on the controller) is empty"),
])
def test_bad_values_are_named(kwargs, message):
    values = {"arch": "aarch64", "python_version": "3.12", "requirements": REQUIREMENTS, "dest": "/tmp/wh",
              "pip_version": "26.3"}
    values.update(kwargs)
    with pytest.raises(WheelhouseError) as caught:
        pip_download_argv(**values)
    assert str(caught.value).startswith(message)


def test_the_controller_downloads_against_the_hash_lock():
    argv = locked_download_argv("arm64", "3.12.3", "/roles/hf_weights/files/requirements-node.txt", "/tmp/wh",
                                pip_command=("/venv/bin/python", "-m", "pip"))
    assert argv == [
        "/venv/bin/python", "-m", "pip", "download", "--require-hashes", "--only-binary=:all:",
        "--platform", "manylinux2014_aarch64", "--platform", "manylinux_2_17_aarch64",
        "--platform", "manylinux_2_28_aarch64",
        "--python-version", "3.12", "--implementation", "cp", "--dest", "/tmp/wh",
        "-r", "/roles/hf_weights/files/requirements-node.txt",
    ]


A, B, C = "a" * 64, "b" * 64, "c" * 64


def test_one_lock_entry_per_package_with_the_wheels_of_every_platform():
    downloads = {
        "cp312 aarch64": {"tqdm-4.70.1-py3-none-any.whl": A, "PyYAML-6.0.4-cp312-cp312-manylinux_2_17_aarch64.whl": B},
        "cp312 x86_64": {"tqdm-4.70.1-py3-none-any.whl": A, "PyYAML-6.0.4-cp312-cp312-manylinux_2_17_x86_64.whl": C},
    }
    assert lock_entries(downloads) == [
        {"name": "pyyaml", "version": "6.0.4", "files": {"PyYAML-6.0.4-cp312-cp312-manylinux_2_17_aarch64.whl": B,
                                                         "PyYAML-6.0.4-cp312-cp312-manylinux_2_17_x86_64.whl": C}},
        {"name": "tqdm", "version": "4.70.1", "files": {"tqdm-4.70.1-py3-none-any.whl": A}},
    ]


@pytest.mark.parametrize("downloads, message", [
    ({"cp311 x86_64": {"tqdm-4.70.1-py3-none-any.whl": A, "exceptiongroup-1.3.0-py3-none-any.whl": B},
      "cp312 x86_64": {"tqdm-4.70.1-py3-none-any.whl": A}},
     "cp311 x86_64 needs exceptiongroup==1.3.0, which not every platform does; pin one set that every platform "
     "installs (the lock takes no markers)"),
    ({"cp311 x86_64": {"tqdm-4.70.1-py3-none-any.whl": A}, "cp312 x86_64": {"tqdm-4.70.1-py3-none-any.whl": B}},
     "tqdm-4.70.1-py3-none-any.whl was downloaded twice with different contents (%s, %s)" % (A, B)),
])
def test_platforms_that_disagree_are_refused(downloads, message):
    with pytest.raises(WheelhouseError) as caught:
        lock_entries(downloads)
    assert str(caught.value) == message


@pytest.mark.parametrize("role, purpose", [
    ("hf_weights", "the Hugging Face client for the nodes"),
    ("vllm_nvfp4", "the Docker API client for the nodes (requests, for community.docker)"),
])
def test_the_header_is_the_committed_locks_own(role, purpose):
    # Regenerating a lock changes nothing but its pins: hf_weights' lock stays byte-identical.
    with open(os.path.join(ROOT, "roles", role, "files", "requirements-node.txt")) as handle:
        committed = handle.read().splitlines()
    header = ["# " + line for line in lock_header(role, purpose)]
    assert committed[:len(header)] == header


def test_main_writes_the_roles_lock_from_its_own_pins(tmp_path, monkeypatch):
    role_vars = tmp_path / "roles" / "some_role" / "vars" / "main.yml"
    role_vars.parent.mkdir(parents=True)
    role_vars.write_text("_some_role_requirements: [requests==2.34.2]\n_some_role_pip_version: '26.3'\n"
                         "_other_requirements: [tqdm==4.70.1]\n_other_pip_version: '26.2'\n")
    calls = []

    def fake_build_lock(requirements, pip_version, pip_command, header, index_url):
        calls.append((requirements, pip_version, header, index_url))
        return "# %s\n" % "\n# ".join(header)

    monkeypatch.setattr(_wheelhouse, "build_lock", fake_build_lock)
    out = tmp_path / "requirements-node.txt"
    _wheelhouse.main(["--vars", str(role_vars), "--out", str(out), "--purpose", "a client"])
    assert calls == [(["requests==2.34.2"], "26.3", lock_header("some_role", "a client"), _wheelhouse.PYPI)]
    text = out.read_text()
    assert text.startswith("# dgx_spark.glm53 role some_role: a client, hash-locked.\n")
    assert "from _some_role_requirements and _some_role_pip_version in\n# roles/some_role/vars/main.yml: " in text
    assert sorted(os.listdir(str(tmp_path))) == ["requirements-node.txt", "roles"]  # no .new left

    calls[:] = []
    _wheelhouse.main(["--vars", str(role_vars), "--out", str(out), "--purpose", "a client", "--prefix", "_other"])
    assert calls[0][:2] == (["tqdm==4.70.1"], "26.2")
    assert "from _other_requirements and _other_pip_version in" in out.read_text()


@pytest.mark.parametrize("where, content, message", [
    ("vars/main.yml", "_x: 1\n", "--vars %s is not a role's roles/<role>/vars/main.yml"),
    ("roles/some_role/vars/main.yml", "_some_role_requirements: [a==1]\n",
     "%s has no _some_role_pip_version; the lock is made from _some_role_requirements (name==version list) and "
     "_some_role_pip_version"),
])
def test_main_names_vars_it_cannot_use(tmp_path, capsys, where, content, message):
    role_vars = tmp_path / where
    role_vars.parent.mkdir(parents=True)
    role_vars.write_text(content)
    out = tmp_path / "requirements-node.txt"
    with pytest.raises(SystemExit) as caught:
        _wheelhouse.main(["--vars", str(role_vars), "--out", str(out), "--purpose", "p"])
    assert caught.value.code == 1
    assert capsys.readouterr().err == "node-requirements: %s\n" % (message % role_vars)
    assert not out.exists()
