"""node_venv's filter: the controller's `pip download` of a node platform's wheels from a role's
hash lock, run with the playbook's own Python; a value it cannot use fails the task naming it."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.glm53.plugins.filter.node_venv import FilterModule, node_venv_pip_download

LOCK = "/collection/roles/vllm_nvfp4/files/requirements-node.txt"


def test_the_download_is_checked_against_the_lock_for_the_nodes_platform():
    argv = node_venv_pip_download("/venv/bin/python", "aarch64", "3.12", LOCK,
                                  "/home/op/.cache/dgx_spark.glm53/wheels/vllm_nvfp4-aarch64-py3.12-0123456789ab")
    assert argv == [
        "/venv/bin/python", "-m", "pip", "download", "--require-hashes", "--only-binary=:all:",
        "--platform", "manylinux2014_aarch64", "--platform", "manylinux_2_17_aarch64",
        "--platform", "manylinux_2_28_aarch64",
        "--python-version", "3.12", "--implementation", "cp",
        "--dest", "/home/op/.cache/dgx_spark.glm53/wheels/vllm_nvfp4-aarch64-py3.12-0123456789ab",
        "-r", LOCK,
    ]


@pytest.mark.parametrize("args, message", [
    (("ppc64le", "3.12", LOCK, "/wh"), "node_venv wheelhouse: architecture 'ppc64le' has no wheels here"),
    (("x86_64", "2.7", LOCK, "/wh"), "node_venv wheelhouse: python version '2.7' is not a CPython 3 version"),
    (("x86_64", "3.12", "", "/wh"), "node_venv wheelhouse: lock (the hash-locked requirements file) and dest"),
])
def test_a_value_it_cannot_use_is_named(args, message):
    with pytest.raises(AnsibleFilterError) as caught:
        node_venv_pip_download("/venv/bin/python", *args)
    assert str(caught.value).startswith(message), str(caught.value)


def test_the_plugin_offers_the_filter_under_its_name():
    assert FilterModule().filters() == {"node_venv_pip_download": node_venv_pip_download}
