"""The models TorchAir's export system tests export (tests/st/torchair_export_st.py), shared
by tests/test_export_graph.py (op_sdk's dynamo_export, in TorchAir's terms) and
tests/npu/real/test_export_vs_torchair.py (the same exports by torch_npu's TorchAir)."""

from __future__ import annotations

import collections
import re

import torch


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class SizeOut(torch.nn.Module):  # returns a size: a SymInt output in a dynamic export
    def forward(self, x, y):
        x = x + y
        return torch.cat((x, y), 0).size()[1], x


class Weight(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.p1 = torch.nn.Parameter(torch.randn([10, 10, 10], dtype=torch.float16))

    def forward(self, x, y):
        return x + y, self.p1 * 2


class Bf16(torch.nn.Module):  # mixed dtypes: Casts to the promoted dtype; ones -> Fill
    def __init__(self):
        super().__init__()
        self.p1 = torch.nn.Parameter(torch.randn([10], dtype=torch.bfloat16))

    def forward(self, x, y):
        return x + y + torch.ones([2, 4], dtype=torch.float16), self.p1 * 2


class SizePack(torch.nn.Module):  # sizes as inputs and from tensors; lists of them
    def forward(self, x, y, z, p, m, n):
        b = p.view([x]) + z.view([x]) + z.view([x])
        c = m.view([x, x]).sum()
        a = torch.stack([n, n, n, n])
        d = (m.view([4, y, y]) + a).sum()
        return b + c - d


class WritesBoth(torch.nn.Module):  # called with one tensor twice
    def forward(self, x, y):
        x.mul_(2)
        return x, y.add_(1)


class WritesOne(torch.nn.Module):
    def forward(self, x, y):
        return y.add_(x * x)


class Fp8(torch.nn.Module):
    def forward(self, x, z):
        return x.to(torch.float8_e4m3fn).to(torch.float).to(torch.float8_e5m2), z.to(torch.float)


class SizesComputed(torch.nn.Module):  # arithmetic on sizes; full / zeros of them
    def forward(self, x):
        n = x.shape[0] * x.shape[1]
        return x.reshape(n) + torch.full([n], 2.0), torch.zeros([x.shape[0]], dtype=torch.int32)


class EmptySum(torch.nn.Module):
    def forward(self, e, x):
        return e.sum(0), x.sum(), torch.full([], 3)


def cases() -> dict:
    """{name: (model, inputs, dynamic)}, fresh tensors each call."""
    r = torch.randn
    x16 = r([2, 4], dtype=torch.float16)
    return {
        "add": (Add(), (r(2, 4), r(2, 4)), False),
        "add_dynamic": (Add(), (r(2, 4), r(2, 4)), True),
        "size_out": (SizeOut(), (r(2, 4), r(2, 4)), True),
        "weight": (Weight(), (r(2, 4), r(2, 4)), False),
        "bf16": (Bf16(), (r([2, 4], dtype=torch.bfloat16), r([2, 4], dtype=torch.bfloat16)), False),
        "size_pack": (SizePack(), (6, 3, r([3, 2]), r([2, 3]), r([36]), r([3, 3])), True),
        "writes_both": (WritesBoth(), (x16, x16), False),
        "writes_one": (WritesOne(), (r([2, 4], dtype=torch.float16), r([2, 4], dtype=torch.float16)), False),
        "fp8": (Fp8(), (r(2, 4), r(2, 4).to(torch.float8_e4m3fn)), False),
        "sizes_computed": (SizesComputed(), (r(3, 4),), True),
        "empty_sum": (EmptySum(), (r(0, 5), r(2, 3)), False),
        "uint16": (Add(), (torch.randint(0, 255, (2, 2), dtype=torch.uint16),
                           torch.randint(0, 255, (2, 2), dtype=torch.uint16)), False),
    }


def op_counts(pbtxt: str) -> dict[str, int]:
    """{operator type: count} of a dumped graph."""
    return dict(sorted(collections.Counter(re.findall(r'^\s*op: "(\w+)"', pbtxt, re.M)).items()))


def node_names(pbtxt: str, op_type: str) -> list[str]:
    """The names of a dumped graph's nodes of one type, in order."""
    return re.findall(r'^\s*name: "([^"]+)"\n\s*op: "' + op_type + '"', pbtxt, re.M)
