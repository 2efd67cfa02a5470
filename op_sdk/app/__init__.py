"""The ``op-sdk`` command and what it runs: the embedded model (models), ``demo``, ``report``
(with its HTML / Markdown page), ``bench`` and the kernel benchmark, on one timing toolkit
(timing) and one machine description (machine). Nothing here is imported by ``import
op_sdk``; the library (ops, library, patterns, compiler) never imports this package."""
