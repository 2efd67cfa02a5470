// `import op_sdk._C` loads this library. Its kernels are recorded at load time
// (OPSDK_NATIVE_OP) and registered with the dispatcher when op_sdk.library.define_op asks,
// one operator at a time (csrc/registry.h), so that a registration error becomes a
// warning in Python instead of aborting the process.
//
//   native_ops() -> list[tuple[str, str]]            (namespace, name) of each native operator
//   register_kernels(ns, name) -> list[tuple[str, str]]
//       (dispatch key, "" or the error) for each kernel of that operator
//   cpu_isa() -> dict   the instruction set the kernels run ("generic", "avx2", "avx2_vnni",
//       "avx512") and whether the int8 GEMM paths exist on this CPU ("vnni": AVX-512 VNNI,
//       "amx", "avx_vnni")
//   int8_gemm(m, packed) -> str   the int8 GEMM npu_quant_matmul runs for m rows of x1 and
//       an (n, k) row-major weight passed as w.t() (packed: quant_matmul_packed's copy):
//       "avx512_vnni", "amx", "avx_vnni", "avx2" or "aten"
//   output_pool(release) -> dict   the pool of large outputs (csrc/output_pool.cpp): its
//       budget, free and in-use bytes, hits and misses; release: free its free blocks first
#include <Python.h>

#include "launch.h"
#include "quant_matmul_amx.h"
#include "quant_matmul_launch.h"
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
  return Py_BuildValue("{s:s,s:O,s:O,s:O,s:s}", "isa", opk::isa_name(), "vnni",
                       opk::has_avx512_vnni() ? Py_True : Py_False, "amx",
                       opk::amx_available() ? Py_True : Py_False, "avx_vnni",
                       opk::use_avx_vnni() ? Py_True : Py_False, "arch",
                       OPK_X86 ? "x86_64" : "portable");
}

PyObject* int8_gemm(PyObject*, PyObject* args) {
  long long m = 0;
  int packed = 0;
  if (!PyArg_ParseTuple(args, "Lp", &m, &packed)) return nullptr;
  return Py_BuildValue("s", opsdk::int8_gemm_name(opsdk::int8_gemm_choice(m, packed != 0, true)));
}

PyObject* output_pool(PyObject*, PyObject* args) {
  int release = 0;
  if (!PyArg_ParseTuple(args, "p", &release)) return nullptr;
  const unsigned long long released = release ? opsdk::output_pool_release() : 0;
  const opsdk::PoolStats s = opsdk::output_pool_stats();
  return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K}", "budget_bytes",
                       (unsigned long long)s.budget_bytes, "free_bytes",
                       (unsigned long long)s.free_bytes, "in_use_bytes",
                       (unsigned long long)s.in_use_bytes, "hits", (unsigned long long)s.hits,
                       "misses", (unsigned long long)s.misses, "released_bytes", released);
}

PyMethodDef methods[] = {
    {"native_ops", native_ops, METH_NOARGS, "(namespace, name) of each native operator"},
    {"register_kernels", register_kernels, METH_VARARGS,
     "register one operator's CPU and Autograd{CPU,CUDA} kernels; (key, error or '') each"},
    {"cpu_isa", cpu_isa, METH_NOARGS, "the instruction set the kernels use on this CPU"},
    {"int8_gemm", int8_gemm, METH_VARARGS,
     "the int8 GEMM npu_quant_matmul runs for m rows (packed: on a prepacked weight)"},
    {"output_pool", output_pool, METH_VARARGS,
     "the pool of large CPU outputs: budget / free / in-use bytes, hits, misses"},
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
