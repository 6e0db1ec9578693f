"""_progress_file: the one progress file hf_snapshot and hf_mirror write for async_progress:
the record (rate and ETA from samples) and the writer (a background thread, atomic rewrites)."""

import json
import os
import time

from ansible_collections.dgx_spark.glm53.plugins.module_utils._progress_file import ProgressFile, progress_record


def test_progress_record_rate_and_eta():
    record = progress_record("fetching", 600, 1000, 1, 3, [(10.0, 100), (12.0, 300), (15.0, 600)], 1700000000.0)
    assert record == {"phase": "fetching", "bytes_done": 600, "bytes_total": 1000, "files_done": 1, "files_total": 3,
                      "rate_bps": 100, "eta_s": 4.0, "updated": 1700000000.0}
    first = progress_record("fetching", 0, 1000, 0, 3, [(10.0, 0)], 1.0)
    assert first["rate_bps"] is None and first["eta_s"] is None
    assert progress_record("done", 5, 5, 1, 1, [], 1.0)["eta_s"] == 0.0


def read_until(path, wanted, seconds=5):
    """The progress file once ``wanted(record)`` holds, else the last record read."""
    deadline = time.time() + seconds
    seen = None
    while time.time() < deadline:
        try:
            with open(path) as handle:
                seen = json.load(handle)
        except (IOError, OSError, ValueError):
            seen = None
        if seen and wanted(seen):
            break
        time.sleep(0.05)
    return seen


def test_progress_file_is_rewritten_while_a_phase_runs(tmp_path):
    path = str(tmp_path / "progress" / "p.json")
    progress = ProgressFile(path, window=10.0, interval=0.1)
    progress.start("fetching", 1000, 2)
    progress.add(400, 1)
    seen = read_until(path, lambda r: r["bytes_done"] == 400)
    assert seen["phase"] == "fetching" and seen["bytes_done"] == 400 and seen["files_done"] == 1
    progress.finish("done", 1000, 2)
    with open(path) as handle:
        final = json.load(handle)
    assert (final["phase"], final["bytes_done"], final["files_done"], final["eta_s"]) == ("done", 1000, 2, 0.0)
    assert os.listdir(os.path.dirname(path)) == ["p.json"]  # no temporary files left


def test_pending_figures_are_added_and_capped_at_the_totals(tmp_path):
    path = str(tmp_path / "p.json")
    on_the_way = {"bytes": 300, "files": 1}
    progress = ProgressFile(path, window=30.0, interval=0.1)
    progress.start("mirror", 1000, 4)
    progress.count(500, 2, pending=lambda: (on_the_way["bytes"], on_the_way["files"]))
    seen = read_until(path, lambda r: r["bytes_done"] == 800)
    assert (seen["bytes_done"], seen["files_done"]) == (800, 3)
    on_the_way.update(bytes=5000, files=9)
    seen = read_until(path, lambda r: r["bytes_done"] == 1000)
    assert (seen["bytes_done"], seen["files_done"]) == (1000, 4)
    progress.finish("failed")
    with open(path) as handle:
        final = json.load(handle)
    # Finished without totals: the counted figures stay, nothing pending is read any more.
    assert (final["phase"], final["bytes_done"], final["files_done"]) == ("failed", 500, 2)


def test_no_path_writes_nothing_and_starts_no_thread(tmp_path):
    progress = ProgressFile(None, window=10.0)
    progress.start("verifying", 10, 1)
    progress.add(10, 1)
    progress.finish("done", 10, 1)
    assert progress.thread is None and os.listdir(str(tmp_path)) == []
