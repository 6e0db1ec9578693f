"""The operations program as one zipapp (plugins/plugin_utils/_ops_bundle.py, built by the action
plugin dgx_spark.glm53.ops_bundle): the same sources give the same bytes (a rerun copies nothing to
the nodes), the packages it holds, and that it runs on a node with nothing but a Python interpreter."""

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO / "plugins" / "module_utils"
PREFIX = "ansible_collections/dgx_spark/glm53/plugins/module_utils/"
# What a node's login shell would give a command run over ssh, no more.
CLEAN_ENV = {"PATH": "/usr/bin:/bin"}


@pytest.fixture(scope="module")
def bundle():
    from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _ops_bundle  # pylint: disable=import-outside-toplevel
    assert Path(_ops_bundle.SOURCE).resolve() == SOURCE.resolve()
    return _ops_bundle


@pytest.fixture(scope="module")
def built(bundle):
    return bundle.build(str(SOURCE))


def test_building_twice_gives_identical_bytes(bundle, built):
    assert bundle.build(str(SOURCE)) == built


def test_the_bytes_do_not_depend_on_file_times_or_listing_order(bundle, built, tmp_path):
    copy = tmp_path / "module_utils"
    shutil.copytree(str(SOURCE), str(copy), ignore=shutil.ignore_patterns("__pycache__"))
    for number, path in enumerate(sorted(copy.iterdir(), reverse=True)):
        os.utime(str(path), (1000000 + number, 1000000 + number))
    assert bundle.build(str(copy)) == built


def test_other_sources_give_other_bytes(bundle, built, tmp_path):
    copy = tmp_path / "module_utils"
    shutil.copytree(str(SOURCE), str(copy), ignore=shutil.ignore_patterns("__pycache__"))
    with open(str(copy / "_ops_state.py"), "a") as handle:
        handle.write("# changed\n")
    assert bundle.build(str(copy)) != built


def test_it_is_a_zip_behind_a_python_shebang(built):
    assert built.startswith(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(io.BytesIO(built)) as archive:
        assert archive.testzip() is None


def test_the_zip_holds_main_the_packages_and_every_module(built):
    with zipfile.ZipFile(io.BytesIO(built)) as archive:
        names = archive.namelist()
        infos = archive.infolist()
        main = archive.read("__main__.py").decode()
    assert names[:6] == [
        "__main__.py",
        "ansible_collections/__init__.py",
        "ansible_collections/dgx_spark/__init__.py",
        "ansible_collections/dgx_spark/glm53/__init__.py",
        "ansible_collections/dgx_spark/glm53/plugins/__init__.py",
        "ansible_collections/dgx_spark/glm53/plugins/module_utils/__init__.py",
    ]
    modules = sorted(p.name for p in SOURCE.iterdir() if p.name.endswith(".py"))
    assert names[6:] == [PREFIX + name for name in modules]
    assert PREFIX + "_ops_cli.py" in names
    assert len(names) == len(set(names))
    assert "_ops_cli import main" in main
    assert all(info.date_time == (2020, 1, 1, 0, 0, 0) for info in infos)
    assert all(info.external_attr >> 16 == 0o644 for info in infos)


def run_bundle(path, *args, interpreter=(sys.executable, "-I", "-S"), env=None):
    # -I -S: no site-packages, no PYTHONPATH, no user site: only the standard library and the zip.
    return subprocess.run(list(interpreter) + [str(path)] + list(args), env=env or dict(CLEAN_ENV),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60,
                          check=False)


def test_it_runs_node_facts_with_a_clean_environment(bundle, tmp_path):
    output = tmp_path / "bin" / "glm53-ops"
    assert bundle.write(str(output)) is True
    run = run_bundle(output, "node-facts", "{}")
    assert run.returncode == 0, run.stderr
    facts = json.loads(run.stdout)
    assert "memory" in facts
    assert facts["memory"]["mem_total"] > 0


def test_the_zip_comes_before_an_installed_collection(bundle, tmp_path):
    """An ansible_collections elsewhere on sys.path (the ansible package on a node) cannot shadow it."""
    output = tmp_path / "glm53-ops"
    bundle.write(str(output))
    shadow = tmp_path / "site"
    package = shadow / "ansible_collections" / "dgx_spark" / "glm53" / "plugins" / "module_utils"
    package.mkdir(parents=True)
    for depth in range(5):
        (package.parents[depth] / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "_ops_cli.py").write_text("def main():\n    print('SHADOWED')\n    return 9\n")
    run = run_bundle(output, "node-facts", "{}", interpreter=(sys.executable, "-S"),
                     env=dict(CLEAN_ENV, PYTHONPATH=str(shadow)))
    assert run.returncode == 0, run.stderr
    assert "SHADOWED" not in run.stdout
    assert "memory" in json.loads(run.stdout)


def test_it_is_written_once_then_left_alone(bundle, built, tmp_path):
    output = tmp_path / "out" / "glm53-ops"
    assert bundle.write(str(output)) is True
    assert output.read_bytes() == built
    assert output.stat().st_mode & 0o777 == 0o755
    first = output.stat().st_mtime_ns
    os.utime(str(output), ns=(first - 10 ** 9, first - 10 ** 9))
    assert bundle.write(str(output)) is False
    assert output.stat().st_mtime_ns == first - 10 ** 9  # not rewritten
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["glm53-ops"]  # no temporary file left


def test_a_file_that_differs_is_rewritten(bundle, built, tmp_path):
    output = tmp_path / "glm53-ops"
    output.write_bytes(b"old")
    assert bundle.write(str(output)) is True
    assert output.read_bytes() == built


def test_the_action_writes_then_leaves_it_and_never_reports_a_change(built, tmp_path):
    """As role ops runs it: on the controller, in ansible's own process; a rerun writes nothing."""
    output = tmp_path / "cache" / "glm53-ops"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="json")
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local"]
    play = tmp_path / "play.yml"
    play.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Build %d" % n, "dgx_spark.glm53.ops_bundle": {"dest": str(output)}} for n in (1, 2)]}]))
    run = subprocess.run(argv + [str(play)], cwd=str(REPO), env=env, stdout=subprocess.PIPE, universal_newlines=True,
                         check=True, timeout=120)
    results = [task["hosts"]["localhost"] for task in json.loads(run.stdout)["plays"][0]["tasks"]]
    assert [(r["changed"], r["written"], r["dest"]) for r in results] == [
        (False, True, str(output)), (False, False, str(output))]
    assert output.read_bytes() == built
