"""op_sdk's NPU side of an operator, one module per job:

* ``prototypes``: the pinned CANN aclnn API prototypes (each slice declares its own);
* ``binding``: the OpPlugin-style eager binding declared by ``define_op(aclnn=...)``
  (``AclnnBinding``): its checks against the prototype and the schema, its C++ source
  (generated), and the checks of a source edited by hand;
* ``build``: the compile flags of a binding library and its registration where the
  installed torch_npu lacks the operator;
* ``runtime``: whether torch_npu is here, and whether its registry has a schema.

The GE converters (graph mode) are op_sdk.converters; the Ascend C kernels are
kernels/ascendc/. Nothing here imports op_sdk.library: the library imports these.
"""

from op_sdk.npu.binding import AclnnBinding, BindingError

__all__ = ["AclnnBinding", "BindingError"]
