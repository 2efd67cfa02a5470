"""``torchair.inference.cache_compile`` / ``readable_cache``: a method's compile kept on disk
and reused by a later process without tracing the method again.

    self.cached_prompt = op_sdk.inference.cache_compile(self.prompt, config=config)

The first process traces the method once with Dynamo (``fullgraph=True``) and saves two
things to ``{cache_dir}/{Class}_{dynamic|static}_{md5}/{method}/compiled_module``: the
bytecode Dynamo made of the method (what reads the graph's inputs out of ``self`` and the
arguments, dataclasses and lists included, calls the graph and rebuilds the outputs) and
Dynamo's graph as FX code with its tensor constants; in max-autotune also the graph's
compile itself (AOTAutograd's bundled artefact of Inductor's code) with the compile's shape
guards. A later process with the same model and options loads the cache: the bytecode runs
in place of the method (Dynamo neither traces nor guards the method's Python again) and
calls the stored compile directly for the inputs its guards accept (sizes, strides, dtypes,
the graph's non-tensor arguments), with no compile at all; any other input compiles the
stored graph (op_sdk's backend on its FX code, as the first process compiled it, so that
Inductor's on-disk cache serves it). TorchAir's behaviour, kept: the cache path and its md5 over the
model and the options, a recompile discarding the cache with a warning, a broken or foreign
cache cleared and compiled again, the file owned by the user with mode 600, the same checks
of the arguments with TorchAir's words. As in TorchAir the cached path takes no guard on the
method's Python: the script that loads a cache must be the script that made it (the md5
covers the model's ``repr`` and the options, not its code).
"""

from __future__ import annotations

import datetime
import dis
import fcntl
import hashlib
import importlib
import inspect
import io
import logging
import marshal
import os
import pickle
import shutil
import sys
import types
import warnings
from contextlib import contextmanager
from typing import Any, Callable

import torch

from op_sdk.compiler.config import CompilerConfig

__all__ = ["cache_compile", "readable_cache", "cache_path"]

logger = logging.getLogger("op_sdk")

FILE = "compiled_module"
FORMAT = "op_sdk-cache-1"
_CLASS_MARK = "<op_sdk:class>"


class NotCacheable(RuntimeError):
    """What the compile made cannot be stored (the reason says what)."""


# -- the cache file ----------------------------------------------------------------------------


def _versions() -> dict:
    from op_sdk._version import __version__

    return {"format": FORMAT, "python": sys.version.split()[0], "torch": str(torch.__version__),
            "op_sdk": __version__}


def _check_owner(path: str) -> None:
    for st in (os.lstat(path), os.stat(path)):
        if st.st_uid != os.getuid():
            raise PermissionError(f"{path} must be owned by the current user")


def _check_owner_and_mode(path: str) -> None:
    _check_owner(path)
    if os.stat(path).st_mode & 0o777 != 0o600:
        raise PermissionError(f"{path}: permissions must be 600")


@contextmanager
def _locked(f, kind):
    fcntl.flock(f, kind)
    try:
        yield
    finally:
        fcntl.flock(f, fcntl.LOCK_UN)


class _PlainUnpickler(pickle.Unpickler):
    """The cache holds builtin values only (str, bytes, numbers, lists, dicts): any class in
    the stream is refused, so reading one builds no object of the file's choosing. (What it
    holds is code the loading process runs, the bytecode and the graph's code: as in
    TorchAir, a cache is read only when the user owns it and its mode is 600.)"""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"a cache file holds no classes: {module}.{name} refused")


def _write(path: str, artefact: dict) -> None:
    path = os.path.realpath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f, _locked(f, fcntl.LOCK_EX):
        pickle.dump(artefact, f, protocol=4)
        os.chmod(f.fileno(), 0o600)


def _read(path: str) -> dict:
    path = os.path.realpath(path)
    if not os.path.exists(path):
        raise ValueError(f"Cache file {path} is not exists")
    _check_owner_and_mode(path)
    with open(path, "rb") as f, _locked(f, fcntl.LOCK_SH):
        artefact = _PlainUnpickler(f).load()
    if not isinstance(artefact, dict) or not isinstance(artefact.get("meta"), dict):
        raise ValueError(f"{path} is not a cache of op_sdk's")
    want, got = _versions(), artefact["meta"].get("versions")
    if got != want:
        raise ValueError(f"Version mismatch: cache made with {got}, this process has {want}")
    return artefact


def _meta_text(meta: dict) -> str:
    return (f"ModelCacheMeta(name={meta['name']!r}, date={meta['date']!r}, "
            f"version={meta['versions']['format']!r})")


# -- the bytecode Dynamo made of the method ------------------------------------------------------


def _patch_class_consts(code: types.CodeType) -> types.CodeType:
    """Classes among the constants (marshal cannot store them) as importable names."""
    consts = []
    for c in code.co_consts:
        if isinstance(c, type):
            if _importable(c) is not c:
                raise NotCacheable(f"the bytecode holds the class {c!r}, which cannot be "
                                   f"imported by its name")
            c = f"{_CLASS_MARK}{c.__module__}|{c.__qualname__}"
        elif isinstance(c, types.CodeType):
            c = _patch_class_consts(c)
        consts.append(c)
    return code.replace(co_consts=tuple(consts))


def _unpatch_class_consts(code: types.CodeType) -> types.CodeType:
    consts = []
    for c in code.co_consts:
        if isinstance(c, str) and c.startswith(_CLASS_MARK):
            module, qualname = c[len(_CLASS_MARK):].split("|")
            c = _resolve(module, qualname)
        elif isinstance(c, types.CodeType):
            c = _unpatch_class_consts(c)
        consts.append(c)
    return code.replace(co_consts=tuple(consts))


def _resolve(module: str, qualname: str):
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def _importable(obj):
    try:
        return _resolve(obj.__module__, obj.__qualname__)
    except Exception:
        return None


def _names(code: types.CodeType):
    yield from code.co_names
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _names(c)


def _bytecode_globals(code: types.CodeType, func_globals: dict, original: types.CodeType) -> dict:
    """The globals Dynamo installed for its bytecode (besides the compiled graph), each as
    ("module", name) or ("object", module, qualname)."""
    own = set(_names(original))
    needed = {}
    for name in _names(code):
        if name in own or name.startswith("__compiled_fn") or name not in func_globals:
            continue
        value = func_globals[name]
        if isinstance(value, types.ModuleType):
            needed[name] = ("module", value.__name__)
        elif _importable(value) is value:
            needed[name] = ("object", value.__module__, value.__qualname__)
        else:
            raise NotCacheable(f"the bytecode reads the global {name} = {value!r}, which "
                               f"cannot be imported by its name")
    return needed


# -- Dynamo's graph ---------------------------------------------------------------------------


def _graph_artefact(gm: torch.fx.GraphModule, example_inputs) -> dict:
    from torch.fx.graph_module import _format_import_block
    from torch.package import sys_importer

    python = gm.graph.python_code(root_module="self")
    constants = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = gm
            for part in node.target.split("."):
                value = getattr(value, part)
            if not isinstance(value, torch.Tensor):
                raise NotCacheable(f"the graph holds {node.target} ({type(value).__name__}, "
                                   f"a higher-order operator's body): only tensors are stored")
            constants[node.target] = value.detach()
        elif node.op == "call_module":
            raise NotCacheable(f"the graph calls the module {node.target}")
    buffer = io.BytesIO()
    torch.save(constants, buffer)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    inputs = [f"{i}:{n.name}={_describe(v)}" for i, (n, v) in
              enumerate(zip(placeholders, example_inputs))]
    (returned,) = [n.args[0] for n in gm.graph.nodes if n.op == "output"]
    return {"code": _format_import_block(python.globals, sys_importer) + python.src,
            "constants": buffer.getvalue(), "inputs": inputs, "outputs": len(returned)}


def _describe(v) -> str:
    if isinstance(v, torch.Tensor):
        kind = "Parameter" if isinstance(v, torch.nn.Parameter) else "Tensor"
        return f"{kind}(shape={list(v.shape)}, dtype={v.dtype}, device={v.device})"
    return repr(v)


def _compiled_graph(graph: dict, backend, dynamic: bool) -> Callable:
    """The stored graph as a callable of its inputs. Compiled by ``backend`` on its first
    call through torch.compile of its code (a flat graph of torch calls, whose inputs Dynamo
    names by position, so that the process that saves the cache and the one that loads it
    compile the same graph; Inductor's on-disk cache, filled by the first, serves the
    others). When that compile's result can be serialised (max-autotune: AOTAutograd's
    bundled artefact of Inductor's code), the saving process stores it with the compile's
    shape guards, and a loading process calls it directly, without compiling, for every
    input the guards accept (other inputs take the compile)."""
    bundled = _Bundled(graph["compiled"]) if "fixed" in graph.get("compiled", {}) else None
    compiled = None

    def capture(gm, example_inputs):
        if not backend.config.executes_with_inductor:  # the graph runs as captured
            return backend(gm, example_inputs)
        with torch._functorch.config.patch(bundled_autograd_cache=True):
            fn = backend(gm, example_inputs)
        if "static_inputs" in graph and "compiled" not in graph and "not_bundled" not in graph:
            try:  # the saving process: keep the compile itself
                graph["compiled"] = _bundle(gm, example_inputs, fn, graph["outputs"])
            except NotCacheable as e:
                graph["not_bundled"] = str(e)
        return fn

    def run(*args):  # a plain function: Dynamo unwraps a torch.compile'd one it is handed
        nonlocal compiled
        static = graph.get("static_inputs")
        if static is None:  # the saving process: the inputs the method's trace marked static
            graph["static_inputs"] = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
                                      and getattr(a, "_dynamo_static_input_type", None)]
        else:  # a loading process: the same inputs marked, so the two compiles agree
            if bundled is not None:
                out = bundled(args)
                if out is not None:
                    return out
            for i in static:
                if not getattr(args[i], "_dynamo_static_input_type", None):
                    torch._dynamo.mark_static_address(args[i], guard=False)
        if compiled is None:
            compiled = torch.compile(_load_graph(graph), backend=capture, fullgraph=True,
                                     dynamic=dynamic)
        out = compiled(*args)
        stored = graph.get("compiled")
        if stored is not None and "fixed" not in stored:  # the saving process, first call
            try:
                stored["fixed"] = _fixed_arguments(args, stored["refs"])
            except NotCacheable as e:
                del graph["compiled"]
                graph["not_bundled"] = str(e)
        return out

    return run


def _bundle(gm: torch.fx.GraphModule, example_inputs, fn, outputs: int) -> dict:
    """What a loading process needs to call ``fn`` (the compile of the stored graph) with no
    compile: its serialised artefact, where each of its inputs comes from among the stored
    graph's (Dynamo may add sizes as inputs), its inputs' dtypes / devices / ranks and the
    compile's shape guards (sizes, strides, the relations the kernels assume)."""
    from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable
    from torch._dynamo.source import GetItemSource, LocalSource, TensorProperty, TensorPropertySource

    if not hasattr(fn, "serialize"):
        raise NotCacheable("the backend's compile cannot be serialised (reduce-overhead runs "
                           "the graph as captured; frozen parameters and stream partitions "
                           "are compiled again)")
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    (returned,) = [n.args[0] for n in gm.graph.nodes if n.op == "output"]
    if len(returned) != outputs or any(getattr(o, "op", "") != "call_function" for o in returned):
        raise NotCacheable("the compiled graph's outputs are not the stored graph's")
    refs = []
    for node in placeholders:
        source = getattr(node.meta.get("grapharg"), "source", None)
        prop = None
        if isinstance(source, TensorPropertySource) and source.prop in (TensorProperty.SIZE,
                                                                         TensorProperty.STRIDE):
            prop, dim, source = source.prop.name.lower(), source.idx, source.base
        if not (isinstance(source, GetItemSource) and isinstance(source.base, LocalSource)
                and source.base.local_name == "args" and isinstance(source.index, int)):
            raise NotCacheable(f"the compiled graph's input {node.name} comes from {source}")
        refs.append([source.index] if prop is None else [source.index, prop, dim])
    fake_mode = torch._guards.detect_fake_mode(example_inputs)
    guards = fake_mode.shape_env.produce_guards_expression(list(example_inputs),
                                                           ignore_static=False)
    meta = [[str(x.dtype), str(x.device), x.dim()] if isinstance(x, torch.Tensor) else None
            for x in example_inputs]
    artefact = BundledAOTAutogradSerializableCallable.serialize_compile_artifacts(
        BundledAOTAutogradSerializableCallable(fn))
    return {"artefact": artefact, "refs": refs, "guards": guards or "True", "meta": meta}


def _fixed_arguments(args, refs) -> list:
    """The stored graph's non-tensor arguments that its compile did not take as inputs (Dynamo
    specialised them, or related them to a size): the stored compile serves only these
    values. Also refuses inputs that share memory (the compile assumed none do)."""
    whole = {ref[0] for ref in refs if len(ref) == 1}
    fixed = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) or i in whole:
            continue
        if type(a) not in (int, float, bool, type(None)):
            raise NotCacheable(f"argument {i} of the graph is a {type(a).__name__}")
        fixed.append([i, a])
    if _aliased(args):
        raise NotCacheable("the graph's tensor inputs share memory")
    return fixed


def _aliased(args) -> bool:
    seen = set()
    for a in args:
        if isinstance(a, torch.Tensor) and a.numel():
            ptr = a.untyped_storage().data_ptr()
            if ptr in seen:
                return True
            seen.add(ptr)
    return False


class _Bundled:
    """The stored compile, called directly (deserialised on the first call) for the inputs
    its guards accept; ``None`` for the others."""

    def __init__(self, stored: dict):
        from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

        self.stored = stored
        self.fn = None
        self.guards = compile(stored["guards"], "<op_sdk cached guards>", "eval")
        self.interp = SYMPY_INTERP

    def inputs(self, args) -> list | None:
        for i, value in self.stored["fixed"]:
            if type(args[i]) is not type(value) or args[i] != value:
                return None
        if _aliased(args):
            return None
        out = []
        for ref, meta in zip(self.stored["refs"], self.stored["meta"]):
            value = args[ref[0]]
            if len(ref) == 3:
                value = value.size(ref[2]) if ref[1] == "size" else value.stride(ref[2])
            if meta is not None and (not isinstance(value, torch.Tensor)
                                     or [str(value.dtype), str(value.device), value.dim()] != meta):
                return None
            out.append(value)
        names = {f"t{i}": v for i, v in enumerate(out)}
        return out if eval(self.guards, self.interp, {"L": names}) else None  # noqa: S307

    def __call__(self, args):
        inputs = self.inputs(args)
        if inputs is None:
            return None
        if self.fn is None:
            from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable

            self.fn = BundledAOTAutogradSerializableCallable.deserialize_compile_artifacts(
                self.stored["artefact"])
        return self.fn(*inputs)


def _load_graph(graph: dict) -> Callable:
    namespace: dict = {}
    exec(compile(graph["code"], "<op_sdk cached graph>", "exec"), namespace)  # noqa: S102
    holder = torch.nn.Module()
    constants = torch.load(io.BytesIO(graph["constants"]), weights_only=True)
    for target, value in constants.items():
        owner = holder
        *path, leaf = target.split(".")
        for part in path:
            if not hasattr(owner, part):
                owner.add_module(part, torch.nn.Module())
            owner = getattr(owner, part)
        owner.register_buffer(leaf, value)
    return types.MethodType(namespace["forward"], holder)


# -- the cache path ------------------------------------------------------------------------------


def _options_text(config: CompilerConfig, sep: str = ",") -> str:
    return sep.join(f"{path}={value}" for path, value in config.fingerprint())


def cache_path(func, *, config: CompilerConfig | None = None, dynamic: bool = True,
               cache_dir: str | None = None, global_rank: int | None = None,
               tp_rank: int | None = None, pp_rank: int | None = None) -> str:
    """Where ``cache_compile`` keeps the cache of ``func`` (TorchAir's layout):
    ``{cache_dir}/{Class}_{dynamic|static}[_aclgraphcache]_{md5}[/{ranks}]/{method}/compiled_module``,
    the md5 over the model's repr and the options; cache_dir defaults to
    ``$TORCHAIR_CACHE_HOME`` or ``./.torchair_cache``."""
    import torch.distributed as dist

    config = config if config is not None else CompilerConfig()
    cache_dir = cache_dir or os.getenv("TORCHAIR_CACHE_HOME",
                                       os.path.join(os.getcwd(), ".torchair_cache"))
    ranks = []
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        global_rank = dist.get_rank() if global_rank is None else global_rank
        ranks.append(f"world{dist.get_world_size()}global_rank{global_rank}")
    if tp_rank is not None:
        ranks.append(f"tp_rank{tp_rank}")
    if pp_rank is not None:
        ranks.append(f"pp_rank{pp_rank}")
    md5 = hashlib.md5((str(func.__self__) + _options_text(config)).encode()).hexdigest()
    parts = [type(func.__self__).__name__, "dynamic" if dynamic else "static"]
    if config.mode.value in ("reduce-overhead", "npugraph_ex"):
        parts.append("aclgraphcache")
    parts.append(md5)
    return os.path.realpath(os.path.join(cache_dir, "_".join(parts), "_".join(ranks),
                                         func.__name__, FILE))


# -- compile and save / load -----------------------------------------------------------------------


def _entries(code: types.CodeType) -> list[types.CodeType]:
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    return [e.code for e in _debug_get_cache_entry_list(code)]


def _remove(cache_bin: str) -> None:
    folder = os.path.dirname(cache_bin)
    if os.path.isdir(folder):
        shutil.rmtree(folder)


class _Saver:
    """The first process: compiles the method with Dynamo and op_sdk's backend, then saves
    Dynamo's bytecode, its graph and the graph's compile once the first call has made them
    (a cache that cannot be written is skipped with a warning; the call's result stands)."""

    def __init__(self, func, cache_bin: str, backend, dynamic: bool):
        self.func = func
        self.cache_bin = cache_bin
        self.backend = backend
        self.name = f"{func.__qualname__}{inspect.signature(func)}"
        self.graphs: list[dict] = []
        self.errors: list[str] = []
        self.code = func.__func__.__code__
        self.before = {id(c) for c in _entries(self.code)}
        self.saved: int | None = None  # id of the bytecode saved
        self.dropped = False
        self.dynamic = dynamic
        self.compiled = torch.compile(func, backend=self._compile, fullgraph=True,
                                      dynamic=dynamic)

    def _compile(self, gm, example_inputs):
        try:
            graph = _graph_artefact(gm, example_inputs)
        except NotCacheable as e:
            self.errors.append(str(e))
            return self.backend(gm, example_inputs)
        self.graphs.append(graph)
        # the graph is compiled as a later process compiles it, from its stored code: the
        # two compiles see the same graph, so Inductor's on-disk cache, filled here, serves
        # the later process
        return _compiled_graph(graph, self.backend, self.dynamic)

    def __call__(self, *args, **kwargs):
        with torch.no_grad():
            out = self.compiled(*args, **kwargs)
        if not self.dropped:
            self._after_call()
        return out

    def _after_call(self) -> None:
        new = [c for c in _entries(self.code) if id(c) not in self.before]
        if self.saved is not None:
            if [id(c) for c in new] != [self.saved]:
                self._drop(f"Skip cache as {self.name} recompiled, set "
                           f"torch._logging.set_logs(recompiles=True) for details")
            return
        if self.errors:
            self._drop(f"Skip cache {self.name} as following errors: {self.errors}")
            return
        if len(new) != 1 or len(self.graphs) != 1:
            self._drop(f"Skip cache as {self.name} compiled {len(self.graphs)} graphs")
            return
        try:
            code = new[0]
            meta = {"name": self.name, "date": str(datetime.datetime.now(datetime.timezone.utc)),
                    "versions": _versions()}
            artefact = {
                "meta": meta,
                "bytecode": marshal.dumps(_patch_class_consts(code)),
                "globals": _bytecode_globals(code, self.func.__globals__, self.code),
                "compiled_fn": next(n for n in _names(code) if n.startswith("__compiled_fn")),
                "graph": self.graphs[0],
                "options": _options_text(self.backend.config, sep="\n"),
            }
        except (NotCacheable, ValueError, StopIteration) as e:
            self._drop(f"Skip cache {self.name} as {e}")
            return
        try:
            _write(self.cache_bin, artefact)
        except OSError as e:
            self._drop(f"Skip cache {self.name} as it cannot be written: {e}")
            return
        self.saved = id(code)
        logger.info("Cache %s saved to %s", _meta_text(meta), self.cache_bin)

    def _drop(self, message: str) -> None:
        self.dropped = True
        warnings.warn(message, UserWarning, stacklevel=5)  # the caller of the cached method
        _remove(self.cache_bin)


def _rebase(artefact: dict, func, backend, dynamic: bool) -> Callable:
    """The loaded cache as a callable of the method's arguments: Dynamo's bytecode run as
    the method, its graph call served by the stored compile or, for inputs its guards
    refuse, by op_sdk's backend (``_compiled_graph``)."""
    g = dict(func.__globals__)
    for name, ref in artefact["globals"].items():
        g[name] = (importlib.import_module(ref[1]) if ref[0] == "module"
                   else _resolve(ref[1], ref[2]))
    g[artefact["compiled_fn"]] = _compiled_graph(artefact["graph"], backend, dynamic)
    code = _unpatch_class_consts(marshal.loads(artefact["bytecode"]))
    inner = func.__func__
    fn = types.FunctionType(code, g, inner.__name__, inner.__defaults__, inner.__closure__)
    fn.__kwdefaults__ = inner.__kwdefaults__
    model = func.__self__

    def cached(*args, **kwargs):
        with torch.no_grad():
            return fn(model, *args, **kwargs)

    return cached


class CachedMethod:
    """What ``cache_compile`` returns: the method, compiled (or loaded) on its first call.
    ``.cache_bin`` is the cache file; ``.loaded`` says whether the cache served it;
    ``.backend`` is the op_sdk backend (its ``reports``)."""

    def __init__(self, func, backend, dynamic: bool, cache_bin: str):
        self.func = func
        self.backend = backend
        self.dynamic = dynamic
        self.cache_bin = cache_bin
        self.loaded: bool | None = None
        self._run: Callable | None = None

    def __repr__(self) -> str:
        state = {None: "not called yet", True: "loaded", False: "compiled"}[self.loaded]
        return f"CachedMethod({self.func.__qualname__}, {state}, {self.cache_bin})"

    def _start(self) -> Callable:
        if os.path.exists(self.cache_bin):
            try:
                logger.info("Loading cache from %s", self.cache_bin)
                artefact = _read(self.cache_bin)
                run = _rebase(artefact, self.func, self.backend, self.dynamic)
                logger.info("Cache %s loaded from %s", _meta_text(artefact["meta"]), self.cache_bin)
                self.loaded = True
                return run
            except Exception as e:  # noqa: BLE001  (any broken cache is compiled again)
                logger.warning("Clear broken cache %s as %s", self.cache_bin, e)
                _remove(self.cache_bin)
        logger.info("Compiling cache for %s to %s", self.func.__qualname__, self.cache_bin)
        self.loaded = False
        return _Saver(self.func, self.cache_bin, self.backend, self.dynamic)

    def __call__(self, *args, **kwargs):
        if self._run is None:
            self._run = self._start()
        with torch.profiler.record_function("cache_compiler inference"):
            return self._run(*args, **kwargs)


def cache_compile(func, *, config: CompilerConfig | None = None, backend=None,
                  dynamic: bool = True, cache_dir: str | None = None,
                  global_rank: int | None = None, tp_rank: int | None = None,
                  pp_rank: int | None = None, custom_decompositions: dict | None = None,
                  ge_cache: bool = False, **kwargs) -> CachedMethod:
    """TorchAir's ``cache_compile``: ``func`` (a method of an ``nn.Module``) compiled by
    op_sdk's backend with ``config`` (or ``backend``'s), its compile saved on the first call
    and loaded by later processes (module docstring)."""
    from op_sdk.compiler.backend import NpuBackend

    if kwargs:
        raise TypeError(f"op_sdk.inference.cache_compile: unknown argument(s) "
                        f"{', '.join(sorted(kwargs))} (TorchAir reserves **kwargs; op_sdk "
                        f"takes only the named ones)")
    if backend is not None:
        if not isinstance(backend, NpuBackend):
            raise TypeError(f"op_sdk.inference.cache_compile: backend must be "
                            f"op_sdk.get_npu_backend(...), got {type(backend).__name__}")
        if config is not None and backend.config != config:
            raise ValueError("config in current backend is different from the config during "
                             "cache generation.")
        config = backend.config
        custom_decompositions = custom_decompositions or backend.custom_decompositions
    if not isinstance(func, types.MethodType):
        raise ValueError(f"Only method can be cached now, got {func}")
    if not isinstance(func.__self__, torch.nn.Module):
        raise ValueError(f"Only torch.nn.Module method can be cached now, got {func}")
    if cache_dir is not None and os.path.exists(cache_dir):
        try:
            _check_owner(cache_dir)
        except PermissionError as e:
            raise ValueError(f"Cache dir {cache_dir} must be owned by the current user ") from e
    config = config if config is not None else CompilerConfig()
    if ge_cache:
        warnings.warn("op_sdk.inference.cache_compile: ge_cache caches Ascend IR's compiled "
                      "graph (GE); there is no GE here, so it has no effect (the compile "
                      "cache itself is on)", UserWarning, stacklevel=2)
    cache_bin = cache_path(func, config=config, dynamic=dynamic, cache_dir=cache_dir,
                           global_rank=global_rank, tp_rank=tp_rank, pp_rank=pp_rank)
    return CachedMethod(func, NpuBackend(config, custom_decompositions), dynamic, cache_bin)


def readable_cache(cache_bin: str, print_output: bool = True, file: str | None = None) -> str:
    """TorchAir's ``readable_cache``: the cache's meta, Dynamo's graph with its inputs and the
    options, and the bytecode disassembled; printed, and with ``file`` written there as
    comments followed by the graph's code. Returns the text."""
    if not os.path.exists(cache_bin):
        raise ValueError(f"Cache file {cache_bin} is not exists")
    if os.path.islink(cache_bin):
        raise ValueError(f"Cache file {cache_bin} can not be a symlink")
    artefact = _read(cache_bin)
    graph = artefact["graph"]
    out = io.StringIO()
    dis.dis(_unpatch_class_consts(marshal.loads(artefact["bytecode"])), file=out)
    stored = graph.get("compiled")
    if stored is None:
        compile_line = f"stored compile: no ({graph.get('not_bundled', 'compiled on load')})"
    else:
        compile_line = f"stored compile: yes, called for the inputs where {stored['guards']}"
        if stored["fixed"]:
            compile_line += f" and arguments {stored['fixed']} (index, value)"
    lines = ["=" * 100, _meta_text(artefact["meta"]), _title("graph module"), graph["code"],
             _title("inputs"), *graph["inputs"], compile_line, _title("compile options"),
             artefact["options"], _title("caller frame"), out.getvalue()]
    text = "\n".join(lines)
    if print_output:
        print(text)
    if file is not None:
        if os.path.islink(file):
            raise ValueError(f"Output file {file} can not be a symlink")
        if os.path.exists(file):
            _check_owner_and_mode(file)
        path = os.path.realpath(file)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(f"# {line}" for line in text.split("\n")) + "\n")
            f.write(graph["code"])
            os.chmod(f.fileno(), 0o600)
    return text


def _title(title: str, width: int = 100) -> str:
    pad = max(0, width - len(title))
    return "-" * (pad // 2) + title + "-" * (pad - pad // 2)
