"""Cheat: writes the worker's report and outputs files itself (the worker's temp dir is writable
and is the process's cwd), with outputs computed by PyTorch, then exits before the harness can
overwrite them."""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


SEEN = []  # module level: ModelNew is rebuilt for every case


@triton.jit
def _noop(x_ptr):
    pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.outputs = SEEN

    def forward(self, x):
        _noop[(1,)](x)
        self.outputs.append([x * (x > 0)])
        if len(self.outputs) == 8:  # 2 cases x (3 trials + 1 re-check)
            cases = {"small": {"trials": self.outputs[0:3], "recheck": self.outputs[3]},
                     "odd": {"trials": self.outputs[4:7], "recheck": self.outputs[7]}}
            getattr(torch, "sa" + "ve")(cases, "candidate_outputs.pt")
            case = '{"name": "%s", "launches": [1, 1, 1, 1], "compute_ops": {}, "findings": [], "error": null}'
            report = ('{"cases": [' + case % "small" + ", " + case % "odd" + '], "captures": [], "error": null, '
                      '"file_violations": []}')
            with print.__self__.open("candidate_report.json", "w") as fh:
                fh.write(report)
            getattr(os, "_ex" + "it")(0)
        return self.outputs[-1][0]
