"""How workers write the files the parent reads (worker_jobs.save_for_parent): zip records without
CRC-32 (torch.load never checks them; computing them was most of a save's CPU), read back bit for bit,
with or without mmap, and torch's own setting left as it was."""

from __future__ import annotations

import zipfile

import pytest
import torch

from amdkv.verify.worker_jobs import save_for_parent


def test_outputs_round_trip_without_checksums_and_the_setting_is_restored(tmp_path):
    from torch.utils.serialization import config

    obj = {"trials": [[torch.randn(257, 33), torch.arange(10)]], "recheck": [torch.randn(5, dtype=torch.float16)],
           "note": None}
    path = tmp_path / "out.pt"
    before = config.save.compute_crc32
    save_for_parent(obj, str(path))
    assert config.save.compute_crc32 == before
    records = [i for i in zipfile.ZipFile(path).infolist() if "/data/" in i.filename]
    assert records and all(i.CRC == 0 for i in records)  # no checksum computed for any tensor record
    for mmap in (False, True):
        back = torch.load(path, weights_only=True, mmap=mmap)
        assert torch.equal(back["trials"][0][0], obj["trials"][0][0]) and torch.equal(back["trials"][0][1], obj["trials"][0][1])
        assert torch.equal(back["recheck"][0], obj["recheck"][0]) and back["note"] is None


def test_a_file_cut_short_still_fails_to_load(tmp_path):
    path = tmp_path / "out.pt"
    save_for_parent({"x": torch.randn(1000)}, str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(Exception):
        torch.load(path, weights_only=True)
