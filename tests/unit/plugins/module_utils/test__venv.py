"""_venv: the pure parts (pins, wheel names, pip's argv and environment, when a marker still
holds, which method comes first, what a pip failure means) and, with a real interpreter and
a real wheelhouse, the ``target`` install, the node's pip settings being ignored, and the
deadline."""

import json
import os
import platform
import subprocess

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _venv as venv
from ansible_collections.dgx_spark.glm53.tests.unit.plugins import wheelhouse

INTERPRETER = {"version": "3.12.3", "version_info": [3, 12], "implementation": "cpython",
               "executable": "/usr/bin/python3.12", "machine": "aarch64", "libc": "glibc 2.39",
               "venv": True, "ensurepip": True, "metadata": True}
PINNED = [("huggingface_hub", "2.4.0"), ("tqdm", "4.70.1")]


def test_requirements_are_sorted_by_normalized_name_and_deduplicated():
    assert venv.parse_requirements(["tqdm==4.70.1", "PyYAML==6.0.4", "huggingface_hub==2.4.0", "tqdm==4.70.1"]) == [
        ("huggingface_hub", "2.4.0"), ("PyYAML", "6.0.4"), ("tqdm", "4.70.1")]
    assert venv.requirement_strings(venv.parse_requirements(["Typing.Extensions==4.16.0", "hf_xet==1.8.0"])) == [
        "hf-xet==1.8.0", "typing-extensions==4.16.0"]


@pytest.mark.parametrize("requirements,message", [
    ([], "requirements is empty"),
    (["tqdm"], "requirement 'tqdm' is not pinned as name==version"),
    (["tqdm>=4"], "requirement 'tqdm>=4' is not pinned as name==version"),
    (["tqdm==4.70.1; python_version>'3'"], "requirement \"tqdm==4.70.1; python_version>'3'\" is not pinned"),
    (["hf_xet==1.8.0", "hf-xet==1.7.0"], "requirements pin hf-xet twice, to 1.8.0 and 1.7.0; keep one"),
])
def test_bad_requirements_are_named(requirements, message):
    with pytest.raises(venv.VenvError) as caught:
        venv.parse_requirements(requirements)
    assert str(caught.value).startswith(message)


def test_wheel_names_and_the_newest_pip():
    assert venv.parse_wheel("/wh/hf_xet-1.8.0-cp38-abi3-manylinux2014_aarch64.manylinux_2_17_aarch64.whl") == {
        "name": "hf-xet", "version": "1.8.0", "python": "cp38", "abi": "abi3",
        "platform": "manylinux2014_aarch64.manylinux_2_17_aarch64"}
    assert venv.parse_wheel("pkg-1.0-1build-py3-none-any.whl")["version"] == "1.0"
    assert venv.parse_wheel("pip-26.3.tar.gz") is None
    files = ["pip-9.0.1-py2.py3-none-any.whl", "pip-26.3-py3-none-any.whl", "pip-24.0-py3-none-any.whl",
             "pipx-1.0-py3-none-any.whl"]
    assert venv.pip_wheel(files) == "pip-26.3-py3-none-any.whl"
    assert venv.pip_wheel(["tqdm-4.70.1-py3-none-any.whl"]) is None
    assert venv.wheels_named("PyYAML", ["pyyaml-6.0.4-cp312-cp312-manylinux_2_17_x86_64.whl", "pip-26.3-py3-none-any.whl"]
                             ) == ["pyyaml-6.0.4-cp312-cp312-manylinux_2_17_x86_64.whl"]


def test_pip_runs_without_the_nodes_pip_settings_or_python_paths():
    env = venv.pip_environment({"PATH": "/usr/bin", "HOME": "/home/spark", "PIP_INDEX_URL": "http://mirror",
                                "PIP_CONSTRAINT": "/etc/c.txt", "PYTHONPATH": "/opt/x", "VIRTUAL_ENV": "/v"})
    assert env == {"PATH": "/usr/bin", "HOME": "/home/spark", "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1",
                   "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def test_each_method_creates_and_installs_its_own_way():
    assert venv.create_argv("python3", "venv", "/v") == ["python3", "-m", "venv", "--clear", "/v"]
    assert venv.create_argv("python3", "venv-without-pip", "/v") == [
        "python3", "-m", "venv", "--clear", "--without-pip", "/v"]
    assert venv.create_argv("python3", "target", "/v") is None
    common = venv.PIP_INSTALL_OPTIONS + ["--find-links", "/wh"]
    assert venv.install_argv("venv", "/v/bin/python", "/wh/pip-26.3-py3-none-any.whl", "/wh", ["tqdm==4.70.1"]) == [
        "/v/bin/python", "-m", "pip"] + common + ["tqdm==4.70.1"]
    assert venv.install_argv("venv-without-pip", "/v/bin/python", "/wh/pip-26.3-py3-none-any.whl", "/wh",
                             ["tqdm==4.70.1"]) == [
        "/v/bin/python", "/wh/pip-26.3-py3-none-any.whl/pip"] + common + ["tqdm==4.70.1"]
    assert venv.install_argv("target", "/usr/bin/python3", "/wh/pip-26.3-py3-none-any.whl", "/wh", ["tqdm==4.70.1"],
                             target="/v/site.new") == [
        "/usr/bin/python3", "/wh/pip-26.3-py3-none-any.whl/pip"] + common + ["--target", "/v/site.new", "tqdm==4.70.1"]
    assert "--no-index" in common and "--only-binary=:all:" in common


@pytest.mark.parametrize("probe,method", [
    ({"venv": True, "ensurepip": True}, "venv"),
    ({"venv": True, "ensurepip": False}, "venv-without-pip"),
    ({"venv": False, "ensurepip": False}, "target"),
])
def test_the_first_method_follows_what_the_interpreter_has(tmp_path, probe, method):
    offline = venv.OfflineVenv(str(tmp_path / "v"), ["tqdm==4.70.1"], str(tmp_path))
    offline.interpreter = dict(INTERPRETER, **probe)
    assert offline.first_method() == method


def test_a_marker_holds_until_pins_or_interpreter_change():
    marker = venv.marker_content(PINNED, INTERPRETER, "venv", "")
    assert json.loads(json.dumps(marker)) == {
        "schema": 1, "requirements": ["huggingface-hub==2.4.0", "tqdm==4.70.1"],
        "python": {"executable": "/usr/bin/python3.12", "version": "3.12.3"}, "method": "venv", "pythonpath": ""}
    assert venv.marker_differences(marker, PINNED, INTERPRETER) == []
    # A patch release of the same Python keeps the venv.
    assert venv.marker_differences(marker, PINNED, dict(INTERPRETER, version="3.12.9")) == []
    assert venv.marker_differences(marker, PINNED, dict(INTERPRETER, version="3.13.1")) == [
        "Python changed from 3.12.3 to 3.13.1"]
    assert venv.marker_differences(marker, PINNED[:1], INTERPRETER) == ["requirements changed"]
    assert venv.marker_differences(marker, PINNED, dict(INTERPRETER, executable="/opt/py/bin/python3.12")) == [
        "interpreter changed from /usr/bin/python3.12 to /opt/py/bin/python3.12"]
    assert venv.marker_differences(None, PINNED, INTERPRETER) == ["no readable marker"]
    assert venv.mismatches(PINNED, {"huggingface_hub": "2.3.0", "tqdm": None}) == [
        "huggingface_hub: 2.4.0 wanted, 2.3.0 installed", "tqdm: missing"]


def test_pip_failures_say_what_to_fix():
    result = {"command": "pip install x", "rc": 1, "stdout": "",
              "stderr": "ERROR: Cannot install a==1 and b==2 because these package versions have conflicting "
                        "dependencies.\nERROR: ResolutionImpossible: for help visit https://pip.pypa.io"}
    message = venv.pip_failure(result, "/wh", [], INTERPRETER)
    assert message.startswith("the pinned requirements conflict with each other: `pip install x` failed:")
    missing = {"command": "pip install x", "rc": 1, "stdout": "",
               "stderr": "ERROR: No matching distribution found for anyio>=4.5 (from httpx2==2.16.2)"}
    message = venv.pip_failure(missing, "/wh", ["anyio-4.0.0-py3-none-any.whl"], INTERPRETER)
    assert message.startswith("the wheelhouse /wh has no wheel for anyio>=4.5 matching cp312 aarch64 (glibc 2.39): "
                              "it holds anyio-4.0.0-py3-none-any.whl. Rebuild it on the controller for this node: "
                              "pip download --only-binary=:all: --platform manylinux2014_aarch64 ")
    other = {"command": "pip install x", "rc": 2, "stdout": "", "stderr": "\n".join("line %d" % n for n in range(30))}
    assert venv.pip_failure(other, "/wh", [], INTERPRETER) == "`pip install x` failed (rc=2):\n" + "\n".join(
        "line %d" % n for n in range(18, 30))


# -- with a real interpreter and wheelhouse -------------------------------------------------------

@pytest.fixture(scope="module")
def wheels(interpreter):
    requirements, pip_version = wheelhouse.hf_requirements()
    return wheelhouse.build(platform.machine(), interpreter[1], requirements, pip_version)


def test_a_target_install_runs_with_pythonpath_and_is_kept(tmp_path, interpreter, wheels, monkeypatch):
    """The ``target`` way, for an interpreter without a venv module: forced here on a real
    interpreter that has one, since no such interpreter is at hand."""
    path = str(tmp_path / "env")
    monkeypatch.setattr(venv.OfflineVenv, "first_method", lambda self: "target")
    result = venv.OfflineVenv(path, ["tqdm==4.70.1", "pyyaml==6.0.4"], wheels, python=interpreter[0]).run()
    assert result["changed"] is True and result["method"] == "target"
    assert result["pythonpath"] == os.path.join(path, "site")
    assert result["python"] == os.path.realpath(subprocess.check_output(
        [interpreter[0], "-c", "import sys; print(sys.executable)"], text=True).strip())
    assert result["commands"] == [venv.command_string(
        [result["python"], os.path.join(wheels, "pip-26.3-py3-none-any.whl", "pip")] + venv.PIP_INSTALL_OPTIONS
        + ["--find-links", wheels, "--target", os.path.join(path, "site.new"), "pyyaml==6.0.4", "tqdm==4.70.1"])]
    env = dict(os.environ, PYTHONPATH=result["pythonpath"])
    ran = subprocess.run([result["python"], "-c", "import tqdm, yaml; print(tqdm.__file__, yaml.__version__)"],
                         capture_output=True, text=True, env=env, check=False)
    assert ran.stdout.split() == [os.path.join(path, "site", "tqdm", "__init__.py"), "6.0.4"], ran.stderr
    assert sorted(os.listdir(path)) == [venv.MARKER, "site"]

    monkeypatch.undo()  # from here on the marker decides
    again = venv.OfflineVenv(path, ["pyyaml==6.0.4", "tqdm==4.70.1"], wheels, python=interpreter[0]).run()
    assert again["changed"] is False and again["method"] == "target" and again["commands"] == []

    for name in os.listdir(os.path.join(path, "site")):
        if name.startswith("tqdm"):
            subprocess.run(["rm", "-r", os.path.join(path, "site", name)], check=True)
    repaired = venv.OfflineVenv(path, ["pyyaml==6.0.4", "tqdm==4.70.1"], wheels, python=interpreter[0]).run()
    assert repaired["changed"] is True and repaired["msg"].startswith("repaired %s with target (tqdm: missing)" % path)
    assert repaired["installed"] == {"pyyaml": "6.0.4", "tqdm": "4.70.1"}
    assert sorted(os.listdir(path)) == [venv.MARKER, "site"]


def test_the_nodes_pip_settings_cannot_change_the_install(tmp_path, interpreter, wheels):
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("tqdm<4\n")
    environ = dict(os.environ, PIP_CONSTRAINT=str(constraints), PIP_INDEX_URL="http://127.0.0.1:9/simple",
                   PIP_NO_BINARY=":all:")
    result = venv.OfflineVenv(str(tmp_path / "v"), ["tqdm==4.70.1"], wheels, python=interpreter[0],
                              environ=environ).run()
    assert result["installed"] == {"tqdm": "4.70.1"}


def test_the_deadline_covers_all_commands(tmp_path, interpreter, wheels):
    offline = venv.OfflineVenv(str(tmp_path / "v"), ["tqdm==4.70.1"], wheels, python=interpreter[0], timeout=0.5)
    with pytest.raises(venv.VenvError) as caught:
        offline.run()  # making a venv with pip takes seconds
    assert "raise timeout" in str(caught.value)
    assert "did not finish within" in str(caught.value) or "was spent before" in str(caught.value)
