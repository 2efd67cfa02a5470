"""The SDK's operators: every module of this package defines its operators when imported
(``define_op``), and importing the package imports them all, in name order. A new operator
is a new module here: nothing else lists it."""

import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_module}")
