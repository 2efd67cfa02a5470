"""A few ATen operators, so that a dumped graph reads as Ascend IR around the fused
operators: elementwise arithmetic, matmuls, reshapes / transposes and casts. Any other
ATen operator is written as a placeholder node in a dump (see op_sdk.converters.UNCONVERTED)
and raises in a strict conversion."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters._util import ge_type
from op_sdk.converters.graph import ConversionError, Tensor

aten = torch.ops.aten


def _operand(x, like: Tensor, meta) -> Tensor:
    """A Python scalar operand as a constant of the result's dtype."""
    if isinstance(x, Tensor):
        return x
    if not isinstance(x, (int, float, bool)):
        raise ConversionError(f"GE conversion: operand {x!r} is neither a tensor nor a number")
    code = getattr(meta, "dtype", None)  # meta_outputs: a TensorSpec (ge::DataType code)
    dtype = torch.float32 if code is None else ir.torch_dtype(code)
    if dtype in (torch.float32, torch.int32, torch.int64, torch.float64):
        return ge.Const(x, dtype=dtype)
    return ge.Cast(ge.Const(float(x), dtype=torch.float32), dst_type=ge_type(dtype))


def _binary(ir_type: str):
    def convert(self, other, *, alpha=1, meta_outputs=None):
        if alpha != 1:
            other = ge.Mul(_operand(other, self, meta_outputs),
                           _operand(alpha, self, meta_outputs))
        return getattr(ge, ir_type)(_operand(self, other, meta_outputs),
                                    _operand(other, self, meta_outputs))
    return convert


for _op, _ir in ((aten.add.Tensor, "Add"), (aten.sub.Tensor, "Sub")):
    register_fx_node_ge_converter(_op)(_binary(_ir))
for _op, _ir in ((aten.mul.Tensor, "Mul"), (aten.div.Tensor, "Div")):
    register_fx_node_ge_converter(_op)(
        (lambda ir_type: lambda self, other, meta_outputs=None: getattr(ge, ir_type)(
            _operand(self, other, meta_outputs), _operand(other, self, meta_outputs)))(_ir))
for _op, _ir in ((aten.neg.default, "Neg"), (aten.rsqrt.default, "Rsqrt"),
                 (aten.sigmoid.default, "Sigmoid"), (aten.clone.default, "Identity")):
    register_fx_node_ge_converter(_op)(
        (lambda ir_type: lambda self, *, memory_format=None, meta_outputs=None:
         getattr(ge, ir_type)(self))(_ir))


@register_fx_node_ge_converter(aten.silu.default)
def convert_silu(self, meta_outputs=None):
    return ge.Swish(self, scale=1.0)


@register_fx_node_ge_converter(aten.mm.default)
def convert_mm(self, mat2, meta_outputs=None):
    return ge.MatMulV2(self, mat2)


@register_fx_node_ge_converter(aten.bmm.default)
def convert_bmm(self, mat2, meta_outputs=None):
    return ge.BatchMatMulV2(self, mat2)


def _reshape(self, shape, meta_outputs=None):
    dims = [d if isinstance(d, int) else -1 for d in shape]
    return ge.Reshape(self, ge.Const(dims, dtype=torch.int64))


for _op in (aten.view.default, aten._unsafe_view.default, aten.reshape.default):
    register_fx_node_ge_converter(_op)(_reshape)


@register_fx_node_ge_converter(aten.permute.default)
def convert_permute(self, dims, meta_outputs=None):
    return ge.Transpose(self, ge.Const(list(dims), dtype=torch.int64))


@register_fx_node_ge_converter(aten.t.default)
def convert_t(self, meta_outputs=None):
    return ge.Transpose(self, ge.Const([1, 0], dtype=torch.int64))


@register_fx_node_ge_converter(torch.ops.prims.convert_element_type.default)
def convert_element_type(self, dtype, meta_outputs=None):
    return ge.Cast(self, dst_type=ge_type(dtype))


@register_fx_node_ge_converter(aten._to_copy.default)
def convert_to_copy(self, *, dtype=None, layout=None, device=None, pin_memory=None,
                    non_blocking=False, memory_format=None, meta_outputs=None):
    if dtype is None:
        return ge.Identity(self)
    return ge.Cast(self, dst_type=ge_type(dtype))
