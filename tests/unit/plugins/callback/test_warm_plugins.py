"""The warm_plugins callback through real ansible-playbook (local connection): a second run
uses the module payload the first one built, from the kept directory; GLM53_ANSIBALLZ_CACHE=0
keeps none; and the kept directory's name changes with a module file's size or time, so an
edited module is never served from an old payload."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / ".collections"))
from ansible_collections.dgx_spark.glm53.plugins.callback import warm_plugins  # noqa: E402  pylint: disable=wrong-import-position


def play(tmp_path, **env):
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                     "tasks": [{"ansible.builtin.ping": {}}]}]))
    run_env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), **env)
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(playbook)], cwd=ROOT,
                         env=run_env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return sorted((tmp_path / "tmp" / "dgx_spark.glm53-ansiballz").glob("*/ansible.modules.ping-*[!k]"))


def test_a_second_run_uses_the_payload_the_first_built(tmp_path):
    first = play(tmp_path)
    assert len(first) == 1, first
    built = first[0].stat()
    second = play(tmp_path)
    assert second == first
    assert (second[0].stat().st_ino, second[0].stat().st_mtime_ns) == (built.st_ino, built.st_mtime_ns)
    # The run's own temporary directory (and the link in it) is gone; the kept one stays.
    assert [p.name for p in (tmp_path / "tmp").iterdir()] == ["dgx_spark.glm53-ansiballz"]


def test_no_payload_is_kept_when_told_not_to(tmp_path):
    assert play(tmp_path, GLM53_ANSIBALLZ_CACHE="0") == []


def test_the_key_follows_the_module_files_and_the_collections_manifests(tmp_path):
    module = tmp_path / "plugins" / "modules" / "thing.py"
    module.parent.mkdir(parents=True)
    module.write_text("x = 1\n")
    manifest = tmp_path / "colls" / "ansible_collections" / "ns" / "name" / "MANIFEST.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{}")
    paths = [str(tmp_path / "colls")]
    key = warm_plugins.sources_key(str(tmp_path), paths)
    assert warm_plugins.sources_key(str(tmp_path), paths) == key
    module.write_text("x = 22\n")
    edited = warm_plugins.sources_key(str(tmp_path), paths)
    assert edited != key
    os.utime(manifest, ns=(1, 1))
    assert warm_plugins.sources_key(str(tmp_path), paths) not in (key, edited)


def test_the_checkouts_config_enables_it():
    assert "callbacks_enabled = dgx_spark.glm53.warm_plugins" in (ROOT / "ansible.cfg").read_text()
