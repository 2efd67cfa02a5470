"""``torchair.tools`` as op_sdk has it: the ``gegraph_check`` analysers of an NPU graph's task
trace (docs/torchair.md, "tools.gegraph_check")."""
