// `import op_sdk._C` loads this library; its TORCH_LIBRARY_IMPL blocks register the CPU
// kernels with the dispatcher as static initialisers. No Python bindings are needed.
#include <Python.h>

extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT,
      "_C",  // name
      "op_sdk native CPU kernels (registered with the PyTorch dispatcher on import)",
      -1,       // size of per-interpreter state
      nullptr,  // methods
  };
  return PyModule_Create(&module_def);
}
}
