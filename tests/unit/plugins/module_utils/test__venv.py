"""_venv: which method comes first and, with a real interpreter and a real wheelhouse, the
``target`` install, the node's pip settings being ignored, and the deadline. The pure parts
are test__venv_plan.py's."""

import os
import platform
import subprocess

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _venv as venv
from ansible_collections.dgx_spark.glm53.plugins.module_utils._deadline import command_string
from ansible_collections.dgx_spark.glm53.plugins.module_utils._venv_plan import MARKER, PIP_INSTALL_OPTIONS
from ansible_collections.dgx_spark.glm53.tests.unit.plugins import wheelhouse
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.module_utils.test__venv_plan import INTERPRETER


@pytest.mark.parametrize("probe,method", [
    ({"venv": True, "ensurepip": True}, "venv"),
    ({"venv": True, "ensurepip": False}, "venv-without-pip"),
    ({"venv": False, "ensurepip": False}, "target"),
])
def test_the_first_method_follows_what_the_interpreter_has(tmp_path, probe, method):
    offline = venv.OfflineVenv(str(tmp_path / "v"), ["tqdm==4.70.1"], str(tmp_path))
    offline.interpreter = dict(INTERPRETER, **probe)
    assert offline.first_method() == method


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
    assert result["commands"] == [command_string(
        [result["python"], os.path.join(wheels, "pip-26.3-py3-none-any.whl", "pip")] + PIP_INSTALL_OPTIONS
        + ["--find-links", wheels, "--target", os.path.join(path, "site.new"), "pyyaml==6.0.4", "tqdm==4.70.1"])]
    env = dict(os.environ, PYTHONPATH=result["pythonpath"])
    ran = subprocess.run([result["python"], "-c", "import tqdm, yaml; print(tqdm.__file__, yaml.__version__)"],
                         capture_output=True, text=True, env=env, check=False)
    assert ran.stdout.split() == [os.path.join(path, "site", "tqdm", "__init__.py"), "6.0.4"], ran.stderr
    assert sorted(os.listdir(path)) == [MARKER, "site"]

    monkeypatch.undo()  # from here on the marker decides
    again = venv.OfflineVenv(path, ["pyyaml==6.0.4", "tqdm==4.70.1"], wheels, python=interpreter[0]).run()
    assert again["changed"] is False and again["method"] == "target" and again["commands"] == []

    for name in os.listdir(os.path.join(path, "site")):
        if name.startswith("tqdm"):
            subprocess.run(["rm", "-r", os.path.join(path, "site", name)], check=True)
    repaired = venv.OfflineVenv(path, ["pyyaml==6.0.4", "tqdm==4.70.1"], wheels, python=interpreter[0]).run()
    assert repaired["changed"] is True and repaired["msg"].startswith("repaired %s with target (tqdm: missing)" % path)
    assert repaired["installed"] == {"pyyaml": "6.0.4", "tqdm": "4.70.1"}
    assert sorted(os.listdir(path)) == [MARKER, "site"]


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
