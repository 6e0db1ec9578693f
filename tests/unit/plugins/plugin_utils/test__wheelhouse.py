"""pip_download_argv: the controller's `pip download` line for a node's wheelhouse, from
Ansible's architecture and Python facts."""

import pytest

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._wheelhouse import (
    WheelhouseError,
    lock_entries,
    locked_download_argv,
    pip_download_argv,
    platform_tags,
    python_x_y,
)

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
