"""offline_venv through real ansible on localhost, with a real interpreter and a real
wheelhouse built on this controller by pip_download_argv (tests/unit/plugins/wheelhouse.py):
a fresh environment, nothing done on a rerun, a removed package put back, the huggingface_hub
set importable, and failures that name the package, the platform and the fix.

The ``venv-without-pip`` fallback needs an interpreter without ensurepip, which this
controller does not have (python3-venv is installed): tests/integration/test_offline_venv.py
proves it on a lab node (Debian 12 without python3-venv)."""

import json
import os
import platform
import shutil
import subprocess
import sys

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins import ansiballz, wheelhouse

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
MARKER = ".dgx_spark-requirements.json"
TQDM = "tqdm==4.70.1"
PYYAML = "pyyaml==6.0.4"


@pytest.fixture(scope="session")
def wheels(interpreter):
    """The hf_weights wheelhouse (tqdm and pyyaml are in it) for this machine's platform."""
    requirements, pip_version = wheelhouse.hf_requirements()
    return wheelhouse.build(platform.machine(), interpreter[1], requirements, pip_version)


def ansible(args, check=False, human=False):
    """`ansible localhost -m dgx_spark.glm53.offline_venv -a ARGS`: the result through the JSON
    callback, or (``human``) the text an operator reads."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    if not human:
        env.update(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-c", "local",
           "-m", "dgx_spark.glm53.offline_venv", "-a", json.dumps(args)] + (["--check"] if check else [])
    proc = ansiballz.run(cmd, cwd=ROOT, env=env, timeout=900)
    if human:
        return proc.stdout + proc.stderr
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def in_env(python, code, pythonpath=""):
    """Run code in the environment the module made, the way a later task would."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.fixture
def args(tmp_path, interpreter, wheels):
    return {"path": str(tmp_path / "venv"), "wheelhouse": wheels, "requirements": [TQDM],
            "python": interpreter[0]}


def test_fresh_environment_then_nothing_to_do(args, interpreter):
    dry = ansible(args, check=True)
    assert dry["changed"] is True and dry["method"] == "venv", dry
    assert dry["msg"].startswith("would create %s with venv (no environment yet)" % args["path"])
    assert dry["commands"][0] == "%s -m venv --clear %s" % (interpreter[0], args["path"])
    assert not os.path.exists(args["path"])

    first = ansible(args)
    assert first["changed"] is True, first
    assert first["method"] == "venv" and first["pythonpath"] == ""
    assert first["python"] == os.path.join(args["path"], "bin", "python")
    assert first["installed"] == {"tqdm": "4.70.1"}
    assert first["msg"] == ("created %s with venv (no environment yet): 1 pinned package installed offline from %s"
                            % (args["path"], args["wheelhouse"]))
    ran = in_env(first["python"], "import sys, tqdm; print(tqdm.__version__, sys.prefix)")
    assert ran.stdout.split() == ["4.70.1", args["path"]], ran.stderr
    with open(os.path.join(args["path"], MARKER)) as handle:
        marker = json.load(handle)
    assert marker["requirements"] == ["tqdm==4.70.1"] and marker["method"] == "venv"
    assert marker["python"]["version"].startswith(interpreter[1] + ".")

    again = ansible(args)
    assert again["changed"] is False, again
    assert again["commands"] == [] and again["installed"] == {"tqdm": "4.70.1"}
    assert again["msg"] == "%s already holds the 1 pinned package (venv); nothing to do" % args["path"]
    assert ansible(args, check=True)["changed"] is False


def test_a_removed_package_is_put_back(args):
    args["requirements"] = [TQDM, PYYAML]
    ansible(args)
    venv_python = os.path.join(args["path"], "bin", "python")
    removed = subprocess.run([venv_python, "-m", "pip", "uninstall", "-y", "tqdm"], capture_output=True, text=True,
                             check=False)
    assert removed.returncode == 0, removed.stderr
    assert in_env(venv_python, "import tqdm").returncode != 0

    dry = ansible(args, check=True)
    assert dry["changed"] is True and "tqdm: missing" in dry["msg"]
    assert in_env(venv_python, "import tqdm").returncode != 0

    repaired = ansible(args)
    assert repaired["changed"] is True, repaired
    assert repaired["msg"].startswith("repaired %s with venv (tqdm: missing)" % args["path"])
    assert len(repaired["commands"]) == 1 and "-m venv" not in repaired["commands"][0]
    assert in_env(venv_python, "import tqdm, yaml; print(tqdm.__version__, yaml.__version__)").stdout.split() == [
        "4.70.1", "6.0.4"]
    assert ansible(args)["changed"] is False


def test_an_added_requirement_is_installed_into_the_same_environment(args):
    ansible(args)
    args["requirements"] = [PYYAML, TQDM]
    grown = ansible(args)
    assert grown["changed"] is True and "requirements changed" in grown["msg"], grown
    assert grown["installed"] == {"pyyaml": "6.0.4", "tqdm": "4.70.1"}
    assert not any("-m venv" in command for command in grown["commands"])
    # The same set in another order is the same request.
    args["requirements"] = [TQDM, PYYAML]
    assert ansible(args)["changed"] is False


def test_the_huggingface_hub_set_imports(args):
    requirements, _pip = wheelhouse.hf_requirements()
    args["requirements"] = requirements
    result = ansible(args)
    assert result["changed"] is True and result["method"] == "venv", result
    assert result["installed"]["huggingface_hub"] == "2.4.0" and result["installed"]["hf-xet"] == "1.8.0"
    assert sorted(result["installed"]) == sorted(item.split("==")[0] for item in requirements)
    ran = in_env(result["python"], "import huggingface_hub, hf_xet, httpx2; print(huggingface_hub.__version__)")
    assert ran.stdout.strip() == "2.4.0", ran.stderr
    assert ansible(args)["changed"] is False


def test_a_wheelhouse_for_another_cpu_names_package_platform_and_fix(args, interpreter):
    other = "aarch64" if platform.machine() == "x86_64" else "x86_64"
    _requirements, pip_version = wheelhouse.hf_requirements()
    args["wheelhouse"] = wheelhouse.build(other, interpreter[1], [PYYAML], pip_version)
    args["requirements"] = [PYYAML]
    result = ansible(args)
    assert result["failed"] is True
    tag = "cp%s" % interpreter[1].replace(".", "")
    assert result["msg"].startswith("the wheelhouse %s has no wheel for pyyaml==6.0.4 matching %s %s (glibc "
                                    % (args["wheelhouse"], tag, platform.machine())), result["msg"]
    assert "it holds pyyaml-6.0.4-%s-%s-manylinux" % (tag, tag) in result["msg"]
    assert "_%s.whl" % other in result["msg"]
    assert ("Rebuild it on the controller for this node: pip download --only-binary=:all: --platform "
            "manylinux2014_%s" % platform.machine()) in result["msg"]
    assert "--python-version %s" % interpreter[1] in result["msg"]
    # The interpreter has ensurepip, so the environment is a venv and its own pip ran (`-m pip`;
    # pip run from its wheel, `.../pip install`, is for the venv-without-pip and target methods).
    assert ("(`%s -m pip install --no-index --only-binary=:all: --no-cache-dir --disable-pip-version-check "
            "--no-input --no-warn-script-location --find-links %s pyyaml==6.0.4` said: ERROR: Could not find a "
            "version that satisfies the requirement pyyaml==6.0.4"
            % (os.path.join(args["path"], "bin", "python"), args["wheelhouse"])) in result["msg"], result["msg"]
    text = ansible(args, human=True)
    assert "has no wheel for pyyaml==6.0.4" in text
    assert "traceback" not in text.lower() and "exception" not in text.lower(), text


def test_a_wheelhouse_without_pip_is_refused_before_anything_runs(args, tmp_path):
    bare = tmp_path / "wheels"
    bare.mkdir()
    for name in os.listdir(args["wheelhouse"]):
        if name.startswith("tqdm-"):
            shutil.copy(os.path.join(args["wheelhouse"], name), str(bare))
    args["wheelhouse"] = str(bare)
    result = ansible(args)
    assert result["failed"] is True
    assert result["msg"] == ("wheelhouse %s has no pip-*.whl (it holds 1 wheels); add pip to the download "
                             "(pip==<version> on the pip download line) so the node can install without its own pip"
                             % bare)
    assert not os.path.exists(args["path"])


def test_unpinned_requirements_are_refused(args):
    args["requirements"] = ["tqdm>=4"]
    result = ansible(args)
    assert result["failed"] is True
    assert result["msg"].startswith("requirement 'tqdm>=4' is not pinned as name==version")
    assert not os.path.exists(args["path"])


def test_a_directory_that_is_not_an_environment_is_never_cleared(args):
    os.makedirs(args["path"])
    notes = os.path.join(args["path"], "notes.txt")
    with open(notes, "w") as handle:
        handle.write("keep me\n")
    result = ansible(args)
    assert result["failed"] is True
    assert "is not empty and holds neither a virtualenv (pyvenv.cfg) nor %s; refusing to clear it" % MARKER in \
        result["msg"]
    assert os.listdir(args["path"]) == ["notes.txt"]


def test_a_missing_interpreter_is_named(args):
    args["python"] = "/nonexistent/python3"
    result = ansible(args)
    assert result["failed"] is True
    assert result["msg"].startswith("python /nonexistent/python3 cannot run on this node: cannot run "
                                    "/nonexistent/python3: ENOENT")


@pytest.fixture(name="other_python")
def fixture_other_python(tmp_path, interpreter):
    """(path, X.Y) of another interpreter than ``interpreter``, on any machine: a copy of it
    (``venv --copies``) in tmp_path. The module tells interpreters apart by their real path,
    and the copy has its own; it has ensurepip, so it can make a venv."""
    home = tmp_path / "other-python"
    made = subprocess.run([interpreter[0], "-m", "venv", "--copies", "--without-pip", str(home)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert made.returncode == 0, made.stderr
    python = str(home / "bin" / "python3")
    info = wheelhouse.python_info(python)
    assert info and info[1], "the copy of %s cannot make a venv: %r" % (interpreter[0], info)
    return python, info[0]


def test_another_interpreter_makes_the_environment_anew(args, other_python):
    other = other_python
    ansible(args)
    stale = os.path.join(args["path"], "left-by-the-first-environment")
    open(stale, "w").close()
    args["python"] = other[0]
    result = ansible(args)
    assert not os.path.exists(stale), "the environment was not made anew"
    assert result["changed"] is True and "interpreter changed" in result["msg"], result
    assert result["commands"][0] == "%s -m venv --clear %s" % (other[0], args["path"])
    ran = in_env(result["python"], "import sys, tqdm; print('%d.%d' % sys.version_info[:2], tqdm.__version__)")
    assert ran.stdout.split() == [other[1], "4.70.1"], ran.stderr
    assert ansible(args)["changed"] is False
