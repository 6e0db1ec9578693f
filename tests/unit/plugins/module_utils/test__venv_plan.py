"""_venv_plan: the pure parts of offline_venv: pins, wheel names, pip's argv and environment,
when a marker still holds, what a pip failure means."""

import json
import os

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _venv_plan as plan

INTERPRETER = {"version": "3.12.3", "version_info": [3, 12], "implementation": "cpython",
               "executable": "/usr/bin/python3.12", "machine": "aarch64", "libc": "glibc 2.39",
               "venv": True, "ensurepip": True, "metadata": True}
PINNED = [("huggingface_hub", "2.4.0"), ("tqdm", "4.70.1")]


def test_requirements_are_sorted_by_normalized_name_and_deduplicated():
    assert plan.parse_requirements(["tqdm==4.70.1", "PyYAML==6.0.4", "huggingface_hub==2.4.0", "tqdm==4.70.1"]) == [
        ("huggingface_hub", "2.4.0"), ("PyYAML", "6.0.4"), ("tqdm", "4.70.1")]
    assert plan.requirement_strings(plan.parse_requirements(["Typing.Extensions==4.16.0", "hf_xet==1.8.0"])) == [
        "hf-xet==1.8.0", "typing-extensions==4.16.0"]


@pytest.mark.parametrize("requirements,message", [
    ([], "requirements is empty"),
    (["tqdm"], "requirement 'tqdm' is not pinned as name==version"),
    (["tqdm>=4"], "requirement 'tqdm>=4' is not pinned as name==version"),
    (["tqdm==4.70.1; python_version>'3'"], "requirement \"tqdm==4.70.1; python_version>'3'\" is not pinned"),
    (["hf_xet==1.8.0", "hf-xet==1.7.0"], "requirements pin hf-xet twice, to 1.8.0 and 1.7.0; keep one"),
])
def test_bad_requirements_are_named(requirements, message):
    with pytest.raises(plan.VenvError) as caught:
        plan.parse_requirements(requirements)
    assert str(caught.value).startswith(message)


def test_wheel_names_and_the_newest_pip():
    assert plan.parse_wheel("/wh/hf_xet-1.8.0-cp38-abi3-manylinux2014_aarch64.manylinux_2_17_aarch64.whl") == {
        "name": "hf-xet", "version": "1.8.0", "python": "cp38", "abi": "abi3",
        "platform": "manylinux2014_aarch64.manylinux_2_17_aarch64"}
    assert plan.parse_wheel("pkg-1.0-1build-py3-none-any.whl")["version"] == "1.0"
    assert plan.parse_wheel("pip-26.3.tar.gz") is None
    files = ["pip-9.0.1-py2.py3-none-any.whl", "pip-26.3-py3-none-any.whl", "pip-24.0-py3-none-any.whl",
             "pipx-1.0-py3-none-any.whl"]
    assert plan.pip_wheel(files) == "pip-26.3-py3-none-any.whl"
    assert plan.pip_wheel(["tqdm-4.70.1-py3-none-any.whl"]) is None
    assert plan.wheels_named("PyYAML", ["pyyaml-6.0.4-cp312-cp312-manylinux_2_17_x86_64.whl", "pip-26.3-py3-none-any.whl"]
                             ) == ["pyyaml-6.0.4-cp312-cp312-manylinux_2_17_x86_64.whl"]


def test_pip_runs_without_the_nodes_pip_settings_or_python_paths():
    env = plan.pip_environment({"PATH": "/usr/bin", "HOME": "/home/spark", "PIP_INDEX_URL": "http://mirror",
                                "PIP_CONSTRAINT": "/etc/c.txt", "PYTHONPATH": "/opt/x", "VIRTUAL_ENV": "/v"})
    assert env == {"PATH": "/usr/bin", "HOME": "/home/spark", "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1",
                   "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def test_each_method_creates_and_installs_its_own_way():
    assert plan.create_argv("python3", "venv", "/v") == ["python3", "-m", "venv", "--clear", "/v"]
    assert plan.create_argv("python3", "venv-without-pip", "/v") == [
        "python3", "-m", "venv", "--clear", "--without-pip", "/v"]
    assert plan.create_argv("python3", "target", "/v") is None
    common = plan.PIP_INSTALL_OPTIONS + ["--find-links", "/wh"]
    assert plan.install_argv("venv", "/v/bin/python", "/wh/pip-26.3-py3-none-any.whl", "/wh", ["tqdm==4.70.1"]) == [
        "/v/bin/python", "-m", "pip"] + common + ["tqdm==4.70.1"]
    assert plan.install_argv("venv-without-pip", "/v/bin/python", "/wh/pip-26.3-py3-none-any.whl", "/wh",
                             ["tqdm==4.70.1"]) == [
        "/v/bin/python", "/wh/pip-26.3-py3-none-any.whl/pip"] + common + ["tqdm==4.70.1"]
    assert plan.install_argv("target", "/usr/bin/python3", "/wh/pip-26.3-py3-none-any.whl", "/wh", ["tqdm==4.70.1"],
                             target="/v/site.new") == [
        "/usr/bin/python3", "/wh/pip-26.3-py3-none-any.whl/pip"] + common + ["--target", "/v/site.new", "tqdm==4.70.1"]
    assert "--no-index" in common and "--only-binary=:all:" in common


def test_a_marker_holds_until_pins_or_interpreter_change():
    marker = plan.marker_content(PINNED, INTERPRETER, "venv", "")
    assert json.loads(json.dumps(marker)) == {
        "schema": 1, "requirements": ["huggingface-hub==2.4.0", "tqdm==4.70.1"],
        "python": {"executable": "/usr/bin/python3.12", "version": "3.12.3"}, "method": "venv", "pythonpath": ""}
    assert plan.marker_differences(marker, PINNED, INTERPRETER) == []
    # A patch release of the same Python keeps the plan.
    assert plan.marker_differences(marker, PINNED, dict(INTERPRETER, version="3.12.9")) == []
    assert plan.marker_differences(marker, PINNED, dict(INTERPRETER, version="3.13.1")) == [
        "Python changed from 3.12.3 to 3.13.1"]
    assert plan.marker_differences(marker, PINNED[:1], INTERPRETER) == ["requirements changed"]
    assert plan.marker_differences(marker, PINNED, dict(INTERPRETER, executable="/opt/py/bin/python3.12")) == [
        "interpreter changed from /usr/bin/python3.12 to /opt/py/bin/python3.12"]
    assert plan.marker_differences(None, PINNED, INTERPRETER) == ["no readable marker"]
    assert plan.mismatches(PINNED, {"huggingface_hub": "2.3.0", "tqdm": None}) == [
        "huggingface_hub: 2.4.0 wanted, 2.3.0 installed", "tqdm: missing"]


def test_pip_failures_say_what_to_fix():
    result = {"command": "pip install x", "rc": 1, "stdout": "",
              "stderr": "ERROR: Cannot install a==1 and b==2 because these package versions have conflicting "
                        "dependencies.\nERROR: ResolutionImpossible: for help visit https://pip.pypa.io"}
    message = plan.pip_failure(result, "/wh", [], INTERPRETER)
    assert message.startswith("the pinned requirements conflict with each other: `pip install x` failed:")
    missing = {"command": "pip install x", "rc": 1, "stdout": "",
               "stderr": "ERROR: No matching distribution found for anyio>=4.5 (from httpx2==2.16.2)"}
    message = plan.pip_failure(missing, "/wh", ["anyio-4.0.0-py3-none-any.whl"], INTERPRETER)
    assert message.startswith("the wheelhouse /wh has no wheel for anyio>=4.5 matching cp312 aarch64 (glibc 2.39): "
                              "it holds anyio-4.0.0-py3-none-any.whl. Rebuild it on the controller for this node: "
                              "pip download --only-binary=:all: --platform manylinux2014_aarch64 ")
    other = {"command": "pip install x", "rc": 2, "stdout": "", "stderr": "\n".join("line %d" % n for n in range(30))}
    assert plan.pip_failure(other, "/wh", [], INTERPRETER) == "`pip install x` failed (rc=2):\n" + "\n".join(
        "line %d" % n for n in range(18, 30))


def test_counts_and_output_tails_read_as_a_message():
    assert plan.packages(1) == "1 pinned package" and plan.packages(15) == "15 pinned packages"
    assert plan.tail("\n a\n\nb\nc \n", lines=2) == "b\nc"
    assert plan.platform_label(dict(INTERPRETER, libc="")) == "cp312 aarch64"
    assert plan.version_key("26.3") > plan.version_key("9.0.1")
