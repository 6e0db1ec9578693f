"""The test wheelhouse cache (tests/unit/plugins/wheelhouse.py) is shared by the unit tests'
two workers and the lab tests, which run side by side in `make test`: several asking for the
same wheelhouse at once must download it once, and none may see it half made or removed."""

import os
import sys
import threading

from ansible_collections.dgx_spark.glm53.tests.unit.plugins import wheelhouse

# A stand-in for `pip download`: slow enough that the askers overlap, and it counts its runs.
FAKE_PIP = ("import os, sys, time; d = sys.argv[1]; time.sleep(0.5); "
            "open(os.path.join(d, 'pip-24.2-py3-none-any.whl'), 'w').close(); "
            "open(sys.argv[2], 'a').write('x')")


def test_askers_at_once_share_one_download_and_never_see_it_incomplete(tmp_path, monkeypatch):
    monkeypatch.setattr(wheelhouse, "CACHE", str(tmp_path / "cache"))
    runs = tmp_path / "runs"
    seen, errors = [], []

    def ask():
        try:
            dest = wheelhouse._download("x86_64", "3.11", "k",
                                        lambda partial: [sys.executable, "-c", FAKE_PIP, partial, str(runs)])
            seen.append(sorted(os.listdir(dest)))
        except Exception as exc:  # pylint: disable=broad-except  # reported below, with the others
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _asker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert runs.read_text() == "x"  # one download
    assert seen == [[".complete", "pip-24.2-py3-none-any.whl"]] * 4
    assert sorted(os.listdir(tmp_path / "cache")) == ["x86_64-py3.11-k", "x86_64-py3.11-k.lock"]  # no partial left
