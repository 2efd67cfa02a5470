"""A few ATen operators, so that a dumped graph reads as Ascend IR around the fused
operators: elementwise arithmetic, matmuls, reshapes / transposes and casts. Any other
ATen operator is written as a placeholder node in a dump (see op_sdk.converters.UNCONVERTED)
and raises in a strict conversion."""

import operator

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters._util import ge_type
from op_sdk.converters.graph import ConversionError, Tensor

aten = torch.ops.aten


def _promote(x, code: int | None):
    """TorchAir's ``dtype_promote`` for one operand: a tensor of another (or an unknown)
    dtype is cast to the ge.DataType ``code``, a number is a Const of it. With no ``code``
    (no output spec) a tensor is left as it is and a number is a float32 / int64 Const."""
    if isinstance(x, Tensor):
        return x if code is None or x.dtype == code else ge.Cast(x, dst_type=code)
    if not isinstance(x, (int, float, bool)):
        raise ConversionError(f"GE conversion: operand {x!r} is neither a tensor nor a number")
    if code is None:
        return ge.Const(x, dtype=torch.int64 if isinstance(x, int) else torch.float32)
    return ge.Const(x, dtype=ir.torch_dtype(code))


def _out_code(meta) -> int | None:
    return getattr(meta, "dtype", None)  # meta_outputs: a TensorSpec (ge::DataType code)


def _binary(ir_type: str):
    def convert(self, other, *, alpha=1, meta_outputs=None):
        code = _out_code(meta_outputs)
        if alpha != 1:
            other = ge.Mul(_promote(other, code), _promote(alpha, code))
        return getattr(ge, ir_type)(_promote(self, code), _promote(other, code))
    return convert


for _op, _ir in ((aten.add.Tensor, "Add"), (aten.sub.Tensor, "Sub")):
    register_fx_node_ge_converter(_op)(_binary(_ir))


@register_fx_node_ge_converter(aten.mul.Tensor)
def convert_mul(self, other, meta_outputs=None):
    """As TorchAir: a float16 / bfloat16 tensor times a number is Muls; the product is cast
    to the result's dtype."""
    code = _out_code(meta_outputs)
    if isinstance(self, Tensor) and isinstance(other, (int, float)) and not isinstance(
            other, bool) and self.dtype in (ir.GE_DTYPE["DT_FLOAT16"], ir.GE_DTYPE["DT_BF16"]):
        out = ge.Muls(self, value=float(other))
    else:
        out = ge.Mul(_promote(self, code), _promote(other, code))
    return _promote(out, code)


@register_fx_node_ge_converter(aten.div.Tensor)
def convert_div(self, other, meta_outputs=None):
    code = _out_code(meta_outputs)
    return ge.Div(_promote(self, code), _promote(other, code))


# arithmetic on symbolic sizes (Python's operators in the FX graph), as TorchAir: numbers
# are folded, a size tensor is computed in int64
for _fn, _ir in ((operator.add, "Add"), (operator.sub, "Sub"), (operator.mul, "Mul")):
    register_fx_node_ge_converter(_fn)(
        (lambda fn, ir_type: lambda self, other, meta_outputs=None:
         fn(self, other) if not isinstance(self, Tensor) and not isinstance(other, Tensor)
         else getattr(ge, ir_type)(_promote(self, _out_code(meta_outputs)),
                                   _promote(other, _out_code(meta_outputs))))(_fn, _ir))


def sizes(size) -> Tensor:
    """A list of sizes (ints, and tensors for symbolic ones) as one int64 tensor: a Const,
    or a Pack of scalars where a size is symbolic (TorchAir's form; an unresolved symbolic
    size is -1)."""
    if isinstance(size, Tensor):
        return size
    if any(isinstance(d, Tensor) for d in size):
        return ge.Pack([_promote(d, ir.GE_DTYPE["DT_INT64"]) for d in size], N=len(size), axis=0)
    return ge.Const([d if isinstance(d, int) else -1 for d in size], dtype=torch.int64)


@register_fx_node_ge_converter(aten.sym_size.int)
def convert_sym_size(self, dim, meta_outputs=None):
    meta = getattr(meta_outputs, "meta", None)
    if isinstance(meta, int) or (isinstance(meta, torch.SymInt) and meta.node.is_constant()):
        return int(meta)
    return ge.Gather(ge.Shape(self, dtype=ir.GE_DTYPE["DT_INT64"]), ge.Const(dim, dtype=torch.int64))


def _fill(size, value, code: int | None):
    return ge.Fill(sizes(size), _promote(value, code if code is not None
                                         else ir.GE_DTYPE["DT_FLOAT"]))


@register_fx_node_ge_converter(aten.full.default)
def convert_full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None,
                 meta_outputs=None):
    code = ge_type(dtype) if dtype is not None else _out_code(meta_outputs)
    if not isinstance(size, Tensor) and len(size) == 0:
        return _promote(fill_value, code)
    return _fill(size, fill_value, code)


for _op, _v in ((aten.ones.default, 1), (aten.zeros.default, 0)):
    register_fx_node_ge_converter(_op)(
        (lambda v: lambda size, *, dtype=None, layout=None, device=None, pin_memory=None,
         meta_outputs=None: _fill(size, v, ge_type(dtype) if dtype is not None
                                  else ir.GE_DTYPE["DT_FLOAT"]))(_v))


@register_fx_node_ge_converter(aten.sum.dim_IntList)
def convert_sum(self, dim=None, keepdim=False, *, dtype=None, meta_outputs=None):
    """ReduceSum over ``dim`` (all dims when None or empty) of the input cast to the result's
    dtype (as TorchAir's converter writes it: a Cast even where the dtypes agree); a sum over
    an empty tensor is zeros of the result's shape."""
    code = _out_code(meta_outputs)
    if 0 in self.symsize:
        out = getattr(meta_outputs, "meta", None)
        return _fill(list(out.shape) if isinstance(out, torch.Tensor) else [], 0, code)
    if not dim:
        dim = list(range(self.rank))
    x = self if code is None else ge.Cast(self, dst_type=code)
    return ge.ReduceSum(x, ge.Const(list(dim), dtype=torch.int64), keep_dims=bool(keepdim))


@register_fx_node_ge_converter(aten.sum.default)
def convert_sum_all(self, *, dtype=None, meta_outputs=None):
    return convert_sum(self, None, False, dtype=dtype, meta_outputs=meta_outputs)


@register_fx_node_ge_converter(aten.stack.default)
def convert_stack(tensors, dim=0, meta_outputs=None):
    return ge.Pack(list(tensors), N=len(tensors), axis=dim)


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
    return ge.Reshape(self, sizes(shape))


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
