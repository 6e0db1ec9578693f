"""Progress lines: what an operator reads while a long download or copy runs."""

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._progress import (
    human_duration, parse_progress, progress_line)


def test_durations_read_like_an_operator_writes_them():
    # Sizes are module_utils/_human's (test__human.py).
    assert human_duration(45.4) == "45 s"
    assert human_duration(185) == "3 min 05 s"
    assert human_duration(3720) == "1 h 02 min"


def test_full_line_has_bytes_percent_rate_eta_and_files():
    line = progress_line("spark-head", "weights", {
        "phase": "download", "bytes_done": 1.2e9, "bytes_total": 3.4e9, "rate_bps": 48.1e6, "eta_s": 46,
        "files_done": 2, "files_total": 9}, elapsed=70)
    assert line == ("[spark-head] weights (download): 1.2 GB of 3.4 GB (35%), 48.1 MB/s, ETA 46 s, "
                    "2 of 9 files (1 min 10 s)")


def test_no_eta_once_done_and_running_when_nothing_known():
    assert progress_line("w", "copy", {"bytes_done": 5, "bytes_total": 5, "eta_s": 0}, 3) == "[w] copy: 5 B of 5 B (100%) (3 s)"
    assert progress_line("w", "start", {}, 12) == "[w] start: running (12 s)"


def test_unreadable_progress_is_empty():
    assert parse_progress("") == {}
    assert parse_progress("{half") == {}
    assert parse_progress("[1, 2]") == {}
    assert parse_progress('{"bytes_done": 3}') == {"bytes_done": 3}
