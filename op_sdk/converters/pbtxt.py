"""GE IR protobuf text: a :class:`~op_sdk.converters.graph.GeGraph` written as a
``ge.proto.ModelDef`` message in protobuf's text format, field names and enum names as in
CANN's ``ge_ir.proto`` (what ``google.protobuf.text_format.Parse(text, ModelDef())`` reads;
op_sdk's ``debug.graph_dump.type = "pbtxt"`` dumps); and ``graphdef``, the graph as
TorchAir writes its ``.pbtxt`` files (TensorFlow's GraphDef text holding each attribute's
and descriptor's GE text as a string; ``dynamo_export``'s ``dynamo.pbtxt``)."""

from __future__ import annotations

import struct

__all__ = ["model", "graphdef", "quote"]

_PACK = {"DT_INT64": "q", "DT_INT32": "i", "DT_FLOAT": "f", "DT_INT8": "b", "DT_UINT8": "B",
         "DT_BOOL": "?", "DT_DOUBLE": "d"}
# a string list is written without its val_type, as TorchAir writes it (its generated IR
# wrappers and ge.attr.ListStr leave it VT_LIST_NONE)
_LIST_VAL_TYPE = {"ListString": ("s", None), "ListInt": ("i", "VT_LIST_INT"),
                  "ListFloat": ("f", "VT_LIST_FLOAT"), "ListBool": ("b", "VT_LIST_BOOL"),
                  "ListDataType": ("dt", "VT_LIST_DATA_TYPE")}


def quote(data: str | bytes) -> str:
    """A protobuf text-format string literal (C escapes; non-ASCII bytes as octal)."""
    raw = data.encode() if isinstance(data, str) else data
    out = []
    for b in raw:
        c = chr(b)
        if c in "\"'\\":
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif 32 <= b < 127:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _float(v: float) -> str:
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


class _Writer:
    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0

    def field(self, name: str, value: str) -> None:
        self.lines.append("  " * self.depth + f"{name}: {value}")

    def open(self, name: str) -> None:
        self.lines.append("  " * self.depth + f"{name} {{")
        self.depth += 1

    def close(self) -> None:
        self.depth -= 1
        self.lines.append("  " * self.depth + "}")


def _desc(w: _Writer, field: str, d) -> None:
    w.open(field)
    _desc_fields(w, d)
    w.close()


def _desc_fields(w: _Writer, d, proto_defaults: bool = True) -> None:
    """A TensorDescriptor's fields; ``proto_defaults=False`` leaves out the fields at their
    proto3 default (DT_UNDEFINED, an empty layout), as ``str(message)`` does."""
    if d.name:
        w.field("name", quote(d.name))
    if proto_defaults or d.dtype != "DT_UNDEFINED":
        w.field("dtype", d.dtype)
    if d.shape is not None:
        w.open("shape")
        for dim in d.shape:
            w.field("dim", str(int(dim)))
        w.close()
    if proto_defaults or d.layout:
        w.field("layout", quote(d.layout))
    for key, (typ, value) in sorted(d.attrs.items()):
        _attr(w, key, typ, value)


def _attr(w: _Writer, key: str, typ: str, value) -> None:
    w.open("attr")
    w.field("key", quote(key))
    w.open("value")
    _value_fields(w, key, typ, value)
    w.close()
    w.close()


def _value_fields(w: _Writer, key: str, typ: str, value) -> None:
    """An AttrDef's fields."""
    if typ == "Int":
        w.field("i", str(int(value)))
    elif typ == "Float":
        w.field("f", _float(value))
    elif typ == "Bool":
        w.field("b", "true" if value else "false")
    elif typ in ("DataType", "Type"):  # an IR attribute of type Type: a ge::DataType
        w.field("dt", str(int(value)))
    elif typ == "String":
        w.field("s", quote(value))
    elif typ in ("ListListInt", "ListListFloat"):
        kind = "i" if typ == "ListListInt" else "f"
        w.open(f"list_list_{'int' if kind == 'i' else 'float'}")
        for row in value:
            w.open(f"list_list_{kind}")
            for v in row:
                w.field(f"list_{kind}", str(int(v)) if kind == "i" else _float(v))
            w.close()
        w.close()
    elif typ in _LIST_VAL_TYPE:
        short, val_type = _LIST_VAL_TYPE[typ]
        w.open("list")
        for v in value:
            if typ == "ListString":
                w.field(short, quote(v))
            elif typ == "ListFloat":
                w.field(short, _float(v))
            elif typ == "ListBool":
                w.field(short, "true" if v else "false")
            else:
                w.field(short, str(int(v)))
        if val_type is not None:
            w.field("val_type", val_type)
        w.close()
    elif typ == "Tensor":
        desc, data = value
        w.open("t")
        _desc(w, "desc", desc)
        if isinstance(data, bytes):  # a tensor's bytes, any dtype
            w.field("data", quote(data))
        elif data is not None:
            fmt = _PACK.get(desc.dtype)
            if fmt is None and len(data) > 0:
                raise ValueError(f"GE IR text: cannot write a {desc.dtype} constant")
            # an empty constant (an output switched off) has no bytes, whatever its dtype
            w.field("data", quote(struct.pack("<" + (fmt or "") * len(data), *data)))
        w.close()
    else:
        raise ValueError(f"GE IR text: attribute {key!r} has unknown type {typ!r}")


def _op(w: _Writer, op) -> None:
    w.open("op")
    w.field("name", quote(op.name))
    w.field("type", quote(op.type))
    for i in op.inputs:
        w.field("input", quote(i))
    for key, (typ, value) in op.attrs.items():
        _attr(w, key, typ, value)
    for d in op.input_desc:
        _desc(w, "input_desc", d)
    for d in op.output_desc:
        _desc(w, "output_desc", d)
    w.close()


def _note_lines(graph) -> list[str]:
    """The graph's notes (its unconverted nodes) as ``#`` comment lines."""
    return [f"# {line}" for note in graph.notes for line in str(note).splitlines()]


def model(graph, name: str) -> str:
    w = _Writer()
    w.lines.extend(_note_lines(graph))
    w.field("name", quote(name))
    w.open("graph")
    w.field("name", quote(graph.name))
    for op in graph.ops:
        _op(w, op)
    w.close()
    return "\n".join(w.lines) + "\n"


def _message_text(write, *args) -> bytes:
    """A message's protobuf text, as ``str(message)`` gives it."""
    w = _Writer()
    write(w, *args)
    return ("\n".join(w.lines) + "\n").encode() if w.lines else b""


def graphdef(graph) -> str:
    """The graph as TorchAir writes its ``.pbtxt`` files (``dynamo_export``'s
    ``dynamo.pbtxt``; TorchAir's ``convert_to_pbtxt``): TensorFlow's GraphDef text, for graph
    viewers. Each operator a ``node`` with its name, its type as ``op``, its inputs (a
    control edge ``"x:-1"`` as ``"^x"``), each GE attribute as a string attribute holding
    the AttrDef's protobuf text, and each input / output descriptor as the string attribute
    ``[i]<name>`` / ``[o]<name>`` holding the TensorDescriptor's text (the strings as Python
    writes bytes), indented by four spaces as TorchAir's writer indents. The graph's notes
    (its unconverted nodes) come first, as ``#`` comment lines."""
    lines: list[str] = _note_lines(graph)

    def put(depth: int, text: str) -> None:
        lines.append("    " * depth + text)

    def string_attr(key: str, data: bytes) -> None:
        put(1, "attr {")
        put(2, f'key: "{key}"')
        put(2, "value {")
        put(3, f"s: {repr(data)[1:]}")
        put(2, "}")
        put(1, "}")

    for op in graph.ops:
        put(0, "node {")
        put(1, f'name: "{op.name}"')
        put(1, f'op: "{op.type}"')
        for i in op.inputs:
            parts = i.split(":")
            put(1, f'input: "^{parts[0]}"' if len(parts) > 1 and parts[1] == "-1"
                else f'input: "{i}"')
        for key, (typ, value) in op.attrs.items():
            string_attr(key, _message_text(_value_fields, key, typ, value))
        for d in op.input_desc:
            string_attr(f"[i]{d.name}", _message_text(_desc_fields, d, False))
        for d in op.output_desc:
            string_attr(f"[o]{d.name}", _message_text(_desc_fields, d, False))
        put(0, "}")
    return "\n".join(lines) + ("\n" if lines else "")
