"""TorchAir's ``tools.gegraph_check``: three analysers of an NPU graph's task trace, the
Chrome-tracing JSON that Ascend's profiler writes of an ACL graph's tasks (one ``"X"`` event
per task, ``tid`` its stream ``stream<N>``, ``args`` its Task Id, Task Type, Numblocks,
Schem Mode, ...; cross-stream synchronisation as ``EVENT_RECORD_<h>`` / ``EVENT_WAIT_<h>`` and
``MEM_WRITE_VALUE_<h>`` / ``MEM_WAIT_VALUE_<h>`` task pairs).

* ``filter_operators.filter_comm_ops``: keeps the synchronisation and communication tasks;
* ``align_trace.align_trace_json``: lays each stream's tasks out end to end and stretches
  every cross-stream wait to end where its record ends, with flow arrows, for
  chrome://tracing;
* ``deadlock_check.deadlock_check``: finds pairs of communication tasks on different
  streams that can be ready at once (vector clocks over the synchronisation pairs) and
  together need more AI vector cores than the device has.

They read files and need no NPU: a trace taken on an Ascend machine is analysed here as
there. The rules they share (the virtual-stream merge, the synchronisation names, what a
communication task is, its core count) live once, in ``_trace``.
"""
