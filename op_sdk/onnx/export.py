"""ONNX export of models that call op_sdk's operators: :func:`export_onnx`.

``torch.onnx.export(..., dynamo=True)`` with one translation per ``torch.ops.npu``
operator overload. A translation writes one node of the custom domain ``op_sdk.npu`` whose
type is the operator's Ascend IR name (op_sdk.converters.ir: ``RmsNorm``, ``AddRmsNorm``,
``DynamicQuant``, ``AddRmsNormDynamicQuant``, ``AddRmsNormQuant``, ``Quantize`` /
``AscendQuantV2``, ``QuantBatchMatmulV3``, ``TransposeBatchMatMul``), its inputs in the
prototype's order and its attributes under the prototype's names, and adds to the model a
model-local function (``FunctionProto``) of the same domain and name whose body is the
standard-ONNX composite of the operator's documented semantics (the operator's
``reference``). The function body depends on the call (dtypes, optional inputs,
attribute values), so each distinct call form is one function *overload* (ONNX IR 10:
``FunctionProto.overload``, ``NodeProto.overload``); the node names its overload.

A runtime without the custom domain (onnxruntime) inlines the functions and runs the
composite; an NPU toolchain maps each custom node to the fused kernel. With
``composite_only=True`` the composite is written into the graph itself and no custom node
or function remains.

``npu_dtype_cast`` / ``_npu_dtype_cast`` become a plain ONNX ``Cast`` (with NaN -> 0 before
a float -> integer cast, as the operator defines it), not a custom node.

Variants the composite does not express raise ``NotImplementedError`` naming the operator
and argument at export time. onnx / onnxscript / onnx_ir are imported inside the functions
of this module only; ``import op_sdk`` does not import them.
"""

from __future__ import annotations

from typing import Any

import torch

from op_sdk.onnx.functions import DOMAIN, DOMAIN_VERSION
from op_sdk.onnx.translation import (
    Builder, Call, UnsupportedOnnxExport, local_function, target, tracer, translations)

__all__ = ["export_onnx", "DOMAIN", "UnsupportedOnnxExport", "translation_table"]


_PENDING: dict = {}


def _emit(call: Call, composite_only: bool):
    """Write one call into the exporter's trace: the composite, or the custom node plus
    (once per overload, added after the export) its local function."""
    b = Builder(tracer().nodes)
    if composite_only:
        outs = call.composite(b, *call.inputs)
    else:
        outs = b(call.ir_type, *call.inputs, _n=call.n_out, _domain=DOMAIN,
                 _overload=call.key, **call.attrs)
        if call.n_out == 1:
            outs = (outs,)
        # the functions join the model after the exporter's passes (its version converter
        # inlines every local function it finds)
        _PENDING.setdefault((DOMAIN, call.ir_type, call.key), call)
    outs = tuple(outs)
    if call.order is not None:
        outs = tuple(outs[i] for i in call.order)
    return outs[0] if len(outs) == 1 else outs


def _translation(name: str, spec, composite_only: bool):
    def translate(*args, **kwargs):
        return _emit(spec(*args, **kwargs), composite_only)
    translate.__name__ = f"onnx_{name}"
    return translate


def translation_table(composite_only: bool = False) -> dict:
    """{torch OpOverload: translation} of every operator the export covers: each slice's
    translation module (op_sdk/onnx/<slice>.py), and for every other op_sdk operator a
    translation that raises naming it."""
    custom, plain = translations()
    table = {}
    for (name, overload), spec in custom.items():
        table[target(name, overload)] = _translation(name.split("::")[-1], spec, composite_only)
    for (name, overload), fn in plain.items():
        table[target(name, overload)] = fn
    covered = sorted(n for n, _ in (*custom, *plain))
    # every other op_sdk operator: a clear error instead of the exporter's dispatch failure
    from op_sdk.library import registered_ops

    for opdef in registered_ops():
        op = opdef.op
        if op not in table and opdef.functional is None:
            table[op] = _no_translation(f"{opdef.namespace}::{opdef.name}", covered)
    return table


def _no_translation(name: str, covered: list[str]):
    def translate(*args, **kwargs):
        raise UnsupportedOnnxExport(f"{name}: the operator has no ONNX export (covered: "
                                    f"{', '.join(covered)})")
    translate.__name__ = f"onnx_unsupported_{name.split('::')[-1]}"
    return translate


def _own_error(exc: BaseException):
    """The first UnsupportedOnnxExport / op_sdk argument error in an exception's chain."""
    from op_sdk.ops._common import OpArgumentError

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (UnsupportedOnnxExport, OpArgumentError)):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def export_onnx(model: torch.nn.Module, args: tuple, path: Any = None, *,
                composite_only: bool = False, custom_translation_table: dict | None = None,
                **kw):
    """Export ``model`` (whose forward may call ``torch.ops.npu`` operators) to ONNX.

    ``args`` / ``path`` / ``**kw`` (``kwargs``, ``dynamic_shapes``, ``input_names``,
    ``output_names``, ``opset_version``, ``optimize``, ...) go to
    ``torch.onnx.export(model, args, path, dynamo=True, ...)``. Each npu operator becomes a
    ``op_sdk.npu`` node (its Ascend IR name) with a model-local function computing it in
    standard ONNX; ``composite_only=True`` writes the standard-ONNX composite instead.
    ``custom_translation_table`` entries of the caller are added (and win). Returns the
    ``torch.onnx.ONNXProgram`` (saved to ``path`` when given).

    Raises ``NotImplementedError`` (:class:`UnsupportedOnnxExport`) naming the operator and
    argument for a call the export does not express.
    """
    opset = kw.get("opset_version")
    if opset is not None and opset < 18:
        raise ValueError(f"export_onnx: argument 'opset_version' must be >= 18 (the composites "
                         f"use ReduceMean / ReduceMax with axes as an input), got {opset}")
    table = translation_table(composite_only)
    if custom_translation_table:
        table.update(custom_translation_table)
    kw["dynamo"] = True
    _PENDING.clear()
    try:
        program = torch.onnx.export(model, args, None, custom_translation_table=table, **kw)
        if not composite_only:
            _add_functions(program.model)
    except Exception as e:  # the exporter wraps errors: surface op_sdk's own
        own = _own_error(e)
        if own is not None and own is not e:
            raise own from e
        raise
    finally:
        _PENDING.clear()
    if path is not None:
        program.save(path)
    return program


def _add_functions(model) -> None:
    """The local function of every custom node's overload, at the model's opset."""
    opset = model.opset_imports.get("", 18)
    for ident, call in _PENDING.items():
        if ident not in model.functions:
            model.functions[ident] = local_function(call, opset)
    model.opset_imports[DOMAIN] = DOMAIN_VERSION
