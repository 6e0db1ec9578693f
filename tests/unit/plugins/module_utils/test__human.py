"""_human: the one byte formatter, as the progress lines, the preflight and hf_snapshot show sizes."""

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils._human import human_bytes


@pytest.mark.parametrize("value, text", [
    (0, "0 B"),
    (None, "0 B"),
    (999, "999 B"),
    (1234, "1.2 kB"),
    (512 * 10 ** 6, "512.0 MB"),
    (1.2e9, "1.2 GB"),
    (165 * 10 ** 9, "165.0 GB"),
    (3 * 10 ** 12, "3.0 TB"),
])
def test_decimal_units_by_default(value, text):
    assert human_bytes(value) == text


@pytest.mark.parametrize("value, text", [
    (1023, "1023 B"),
    (1 << 10, "1.0 KiB"),
    (12 << 20, "12.0 MiB"),
    (3 << 30, "3.0 GiB"),
    (int(1.5 * (1 << 40)), "1.5 TiB"),
])
def test_binary_units_when_asked(value, text):
    assert human_bytes(value, binary=True) == text


def test_a_fixed_unit_keeps_figures_comparable_with_the_setting():
    # 10 GiB of a disk reads in GB like the weight sizes; memory reads in GiB like its gate.
    assert human_bytes(10 << 30, unit="GB") == "10.7 GB"
    assert human_bytes(110 << 30, unit="GiB") == "110.0 GiB"
    assert human_bytes(5 * 10 ** 8, unit="GB") == "0.5 GB"
