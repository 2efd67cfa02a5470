// `import op_sdk._C` loads this library. Its kernels are recorded at load time
// (OPSDK_NATIVE_OP) and registered with the dispatcher when op_sdk.library.define_op asks,
// one operator at a time (csrc/registry.h), so that a registration error becomes a
// warning in Python instead of aborting the process.
//
//   native_ops() -> list[tuple[str, str]]            (namespace, name) of each native operator
//   register_kernels(ns, name) -> list[tuple[str, str]]
//       (dispatch key, "" or the error) for each kernel of that operator
//   cpu_isa() -> dict   the instruction set the kernels run ("generic", "avx2", "avx512")
//       and whether the int8 GEMM paths exist on this CPU ("vnni", "amx")
#include <Python.h>

#include "quant_matmul_amx.h"
#include "registry.h"

namespace {

PyObject* native_ops(PyObject*, PyObject*) {
  const auto& ops = opsdk::native_ops();
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(ops.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < ops.size(); ++i)
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), Py_BuildValue("(ss)", ops[i].ns, ops[i].name));
  return list;
}

PyObject* register_kernels(PyObject*, PyObject* args) {
  const char* ns = nullptr;
  const char* name = nullptr;
  if (!PyArg_ParseTuple(args, "ss", &ns, &name)) return nullptr;
  const auto results = opsdk::register_native_op(ns, name);
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(results.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < results.size(); ++i)
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i),
                    Py_BuildValue("(ss)", results[i].first.c_str(), results[i].second.c_str()));
  return list;
}

PyObject* cpu_isa(PyObject*, PyObject*) {
  return Py_BuildValue("{s:s,s:O,s:O,s:s}", "isa", opk::isa_name(), "vnni",
                       opk::has_avx512_vnni() ? Py_True : Py_False, "amx",
                       opk::amx_available() ? Py_True : Py_False, "arch",
                       OPK_X86 ? "x86_64" : "portable");
}

PyMethodDef methods[] = {
    {"native_ops", native_ops, METH_NOARGS, "(namespace, name) of each native operator"},
    {"register_kernels", register_kernels, METH_VARARGS,
     "register one operator's CPU and Autograd{CPU,CUDA} kernels; (key, error or '') each"},
    {"cpu_isa", cpu_isa, METH_NOARGS, "the instruction set the kernels use on this CPU"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT,
      "_C",
      "op_sdk native CPU kernels (registered with the PyTorch dispatcher on request)",
      -1,
      methods,
  };
  return PyModule_Create(&module_def);
}
}
