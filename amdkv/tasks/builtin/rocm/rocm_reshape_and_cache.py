"""KV-cache write (reshape_and_cache-like): scatter new key/value tokens into a paged cache by slot mapping, fp16."""

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 1,
    "op_family": "index",
    "dtypes": ["fp16", "int64"],
    "comparator": "exact",
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """key/value: [T, H, D]; key_cache/value_cache: [num_blocks, block_size, H, D];
    slot_mapping: int64 [T], slot = block * block_size + offset, distinct, -1 = padding token (skipped).
    Functional form: returns the updated (key_cache, value_cache) as new tensors.
    """

    def __init__(self):
        super().__init__()

    def forward(self, key, value, key_cache, value_cache, slot_mapping):
        h, d = key.shape[1], key.shape[2]
        kc = key_cache.clone()
        vc = value_cache.clone()
        valid = slot_mapping >= 0
        slots = slot_mapping[valid]
        kc.view(-1, h, d)[slots] = key[valid]
        vc.view(-1, h, d)[slots] = value[valid]
        return kc, vc


def _inputs(t, h, d, num_blocks, block_size, num_pad):
    def make():
        key = torch.randn(t, h, d).to(torch.float16)
        value = torch.randn(t, h, d).to(torch.float16)
        key_cache = torch.randn(num_blocks, block_size, h, d).to(torch.float16)
        value_cache = torch.randn(num_blocks, block_size, h, d).to(torch.float16)
        slots = torch.randperm(num_blocks * block_size)[:t].to(torch.int64)
        if num_pad:
            slots[torch.randperm(t)[:num_pad]] = -1
        return [key, value, key_cache, value_cache, slots]
    return make


def get_inputs():
    return _inputs(2048, 8, 128, 2048, 16, 0)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _inputs(10, 2, 64, 8, 16, 2)},
        {"name": "odd_d80", "tags": ["correctness"], "inputs": _inputs(37, 3, 80, 5, 16, 3)},
        {"name": "prefill_2048", "tags": ["performance"], "inputs": _inputs(2048, 8, 128, 2048, 16, 0)},
        {"name": "decode_256", "tags": ["performance"], "inputs": _inputs(256, 8, 128, 4096, 16, 16)},
    ]
