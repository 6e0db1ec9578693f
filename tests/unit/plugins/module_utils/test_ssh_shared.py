"""One ssh connection per worker for a whole wait: the options and the cleanup."""

import os

from ansible_collections.dgx_spark.glm53.plugins.module_utils._ssh import SharedConnection, batch_options


def test_options_share_one_master_per_target_and_the_callers_win(tmp_path):
    made = []

    def make_dir():
        made.append(str(tmp_path / "ssh"))
        os.mkdir(made[-1], 0o700)
        return made[-1]

    shared = SharedConnection(persist=90, make_dir=make_dir)
    options = shared.options("spark@spark-worker")
    assert options == ["-o", "ControlMaster=auto", "-o", "ControlPath=%s/%%C" % made[0], "-o", "ControlPersist=90"]
    shared.options("spark@spark-worker2")
    assert len(made) == 1, "one private directory for every worker"
    # A caller's ControlMaster=no comes first, so ssh keeps it.
    combined = batch_options(5, ["-o", "ControlMaster=no"] + options)
    assert combined.index("ControlMaster=no") < combined.index("ControlMaster=auto")
    shared.close(timeout=5)
    assert not os.path.exists(made[0]) and shared.directory is None


def test_close_without_use_does_nothing():
    shared = SharedConnection(make_dir=lambda: (item for item in ()).throw(AssertionError("made a directory")))
    shared.close()
