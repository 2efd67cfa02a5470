"""Every module of this package is one slice's onnx, imported by name: a new slice is a new
module, nothing lists it."""

from op_sdk import import_slices

import_slices(__name__)
