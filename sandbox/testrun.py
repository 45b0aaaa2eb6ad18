"""The test process (T): runs one whole test the way pytest would, calling the candidate by proxy.

T holds no candidate code. Candidate names are bound to proxies that send ``[name, args,
kwargs]`` to its paired candidate process (C) and decode the plain answers. Judging follows
what a human reviewer means, not what a test can be tricked into:

- the candidate's *load* is part of every test: C's first frame is read before the test runs,
  and a candidate that did not load fails the test even if it never calls it (pytest fails a
  whole file whose import fails);
- a candidate call that crashes, raises something that is not an ``Exception`` (``SystemExit``,
  ``KeyboardInterrupt``, ...) or a control-flow/resource exception (``StopIteration``,
  ``MemoryError``), or returns data that cannot be judged, *poisons* the test: a
  ``["poison", status, message]`` frame goes to the worker at once and the test fails
  whatever it catches afterwards (``try: f(x) except Exception: pass`` does not save it);
- ordinary exceptions are rebuilt as the same class: builtin ones as themselves, the
  candidate's own exception classes as same-named stand-ins with the same builtin ancestry
  (``class BadInput(ValueError)`` is caught by ``except ValueError`` and ``except BadInput``);
- mutable arguments the candidate changed in place are written back into the test's objects;
- what runs is what pytest collects: module-level code, ``test*`` functions, methods of
  ``Test*`` classes and ``unittest.TestCase`` subclasses, with ``@pytest.mark.parametrize``
  and module-level fixtures; a test that cannot run (async, yield-based, an unknown fixture,
  a ``Test*`` class with ``__init__``, nothing to run at all, ``pytest.skip``) is reported
  ``["invalid", reason]``, never passed.

The final frame is ``["done", token]``, ``["fail", message, "failed"|"error"]`` or
``["invalid", reason]``. Stdlib-only: the jail worker runs it from source.
"""

from __future__ import annotations

import builtins
import sys

try:  # on the host; in the jail these modules are prepended as source
    from sandbox.plain import ITER_END_HOOK, NotPlain, decode, encode
    from sandbox.wire import Closed, Reader, write_frame
except ImportError:  # pragma: no cover - only inside the jail
    pass

# C's reply kinds that poison a test (see the module docstring), by status.
_CO_GENERATOR, _CO_COROUTINE, _CO_ASYNC_GENERATOR = 0x20, 0x80, 0x200
_ONLY_AST = 0x400  # ast.PyCF_ONLY_AST, without importing ast in every test process
_MAX_CASES = 1000
_DEFINITIONS = {"Import", "ImportFrom", "FunctionDef", "AsyncFunctionDef", "ClassDef", "Pass"}


class CandidateFailed(BaseException):
    """Raised into a test whose candidate call failed for good (not an ``Exception``, so the
    test's own ``except Exception`` does not turn the failure into a pass)."""


class CandidateError(Exception):
    """The candidate raised an exception with no builtin ancestry we can rebuild."""


class NotRunnable(Exception):
    """The test cannot be run as pytest would run it."""


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    except BaseException:  # a hostile __str__
        return "exception (unprintable)"


def sync(old, new) -> None:
    """Write ``new`` (fresh plain data) into ``old`` in place, keeping the identity of nested
    containers where the shapes still match (as if the candidate had mutated them here)."""
    if type(old) is list and type(new) is list:
        if len(old) == len(new):
            for i, (o, n) in enumerate(zip(old, new, strict=True)):
                if type(o) in (list, dict, set) and type(o) is type(n):
                    sync(o, n)
                else:
                    old[i] = n
        else:
            old[:] = new
    elif type(old) is dict and type(new) is dict:
        for key in [k for k in old if k not in new]:
            del old[key]
        for key, value in new.items():
            if type(old.get(key)) in (list, dict, set) and type(old[key]) is type(value):
                sync(old[key], value)
            else:
                old[key] = value
    elif type(old) is set and type(new) is set:
        old.clear()
        old.update(new)


def exception_classes(meta: dict) -> dict[str, type]:
    """Stand-ins for the candidate's exception classes: same name, same builtin ancestry.
    ``meta`` maps a class name to the names of its ancestors (candidate or builtin), nearest
    first, as C reported them."""
    made: dict[str, type] = {}

    def make(name: str, seen: tuple) -> type:
        if name in made:
            return made[name]
        parent: type = Exception
        for base in meta.get(name, ()):
            if base in meta and base not in seen:
                parent = make(base, seen + (base,))
                break
            cls = getattr(builtins, str(base), None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                parent = cls
                break
        try:
            made[name] = type(name, (parent,), {"__module__": "__candidate__"})
        except TypeError:  # a builtin that cannot be subclassed
            made[name] = type(name, (Exception,), {"__module__": "__candidate__"})
        return made[name]

    for name in list(meta)[:200]:
        if isinstance(name, str) and name.isidentifier():
            make(name, (name,))
    return made


class Proxies:
    """The test's view of the candidate: one proxy function per candidate name."""

    def __init__(self, peer: tuple[int, int], out_fd: int):
        self.to_cand, self.from_cand, self.out_fd = peer[0], Reader(peer[1]), out_fd
        self.classes: dict[str, type] = {}
        ITER_END_HOOK[0] = self.iterator_end

    def iterator_end(self, end) -> BaseException:
        """How a returned iterator ended abnormally, raised where the test draws past its
        last item: the candidate's exception (rebuilt, or poisoning if fatal)."""
        if isinstance(end, list) and len(end) == 5 and end[0] == "raise":
            _, type_name, args_, ancestry, fatal = end
            if fatal is not False:
                return self.poison("error", f"candidate iterator raised {type_name}: "
                                            f"{args_!s:.200}")
            return self._rebuild(str(type_name), args_, ancestry)
        return self.poison("failed", "candidate returned an iterator longer than the sandbox "
                                     "draws (100000 items)")

    def poison(self, status: str, message: str) -> CandidateFailed:
        write_frame(self.out_fd, ["poison", status, message[:300]])
        return CandidateFailed(message)

    def load(self) -> None:
        """Wait for C's first frame: the candidate loaded (and its exception classes), or
        the test fails as a whole."""
        try:
            first = self.from_cand.read()
        except (Closed, OSError):
            raise self.poison("crashed", "candidate process died while loading") from None
        if not (isinstance(first, list) and first and first[0] == "ready"):
            why = first[1] if isinstance(first, list) and len(first) > 1 else first
            raise self.poison("error", f"candidate code did not load: {str(why)[:250]}")
        meta = first[1] if len(first) > 1 and isinstance(first[1], dict) else {}
        exc = meta.get("exc")
        self.classes = exception_classes(exc) if isinstance(exc, dict) else {}

    def call(self, name: str, args: tuple, kwargs: dict):
        try:
            payload = [name, encode(list(args)), encode(dict(kwargs))]
        except NotPlain as exc:
            raise TypeError(f"argument to {name} is not plain data ({exc})") from None
        try:
            write_frame(self.to_cand, payload)
            reply = self.from_cand.read()
        except (Closed, OSError):
            raise self.poison("crashed", f"candidate process died in {name}") from None
        kind = reply[0] if isinstance(reply, list) and reply else None
        if kind == "ok" and len(reply) in (2, 3):
            try:
                value = decode(reply[1])
                changed = decode(reply[2]) if len(reply) == 3 else {}
            except ValueError as exc:
                raise self.poison("failed", f"{name} returned undecodable data: {exc}") from None
            self._write_back(args, kwargs, changed)
            return value
        if kind == "raise" and len(reply) == 5:
            _, type_name, args_, ancestry, fatal = reply
            if fatal is not False:
                raise self.poison("error", f"{name} raised {type_name}: {args_!s:.200}")
            raise self._rebuild(str(type_name), args_, ancestry)
        raise self.poison("failed", f"{name}: {reply[1] if kind == 'bad' else reply!s:.250}")

    def _write_back(self, args: tuple, kwargs: dict, changed) -> None:
        if not isinstance(changed, dict):
            return
        for key, new in changed.items():
            if isinstance(key, int) and 0 <= key < len(args):
                sync(args[key], new)
            elif isinstance(key, str) and key in kwargs:
                sync(kwargs[key], new)

    def _rebuild(self, type_name: str, args, ancestry) -> Exception:
        args = tuple(args) if isinstance(args, list | tuple) else (str(args),)
        for name in [type_name, *(ancestry if isinstance(ancestry, list) else [])]:
            cls = self.classes.get(name) or getattr(builtins, str(name), None)
            if isinstance(cls, type) and issubclass(cls, Exception):
                try:
                    return cls(*args)
                except Exception:  # a builtin whose constructor wants other arguments
                    return cls(*[str(a) for a in args][:1])
        return CandidateError(f"{type_name}: {args!s:.250}")

    def proxy(self, name: str):
        def f(*args, **kwargs):
            return self.call(name, args, kwargs)
        f.__name__ = f.__qualname__ = name
        return f


def _has_body(src: str) -> bool:
    """Module-level code that runs something (not only imports and definitions)."""
    tree = compile(src, "<test>", "exec", _ONLY_AST)
    for node in tree.body:
        kind = type(node).__name__
        if kind in _DEFINITIONS:
            continue
        if kind == "Expr" and type(node.value).__name__ == "Constant":  # a docstring
            continue
        return True
    return False


def _param_names(func, skip_self: bool) -> list[str]:
    """Parameters a test function needs filled (those without defaults)."""
    code = func.__code__
    names = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    positional = names[: code.co_argcount]
    defaults = len(func.__defaults__ or ())
    needed = positional[: len(positional) - defaults] if defaults else positional
    kwonly = names[code.co_argcount:]
    needed += [n for n in kwonly if n not in (func.__kwdefaults__ or {})]
    return needed[1:] if skip_self else needed


class Runner:
    """Collects and runs what pytest would run in one test module's namespace."""

    def __init__(self, ns: dict, shim):
        self.ns, self.shim, self.ran = ns, shim, 0
        self.fixtures = {getattr(f, "__pytest_fixture_name__", n): f for n, f in ns.items()
                         if callable(f) and getattr(f, "__pytest_fixture__", False)}

    def _call(self, label: str, func, skip_self: bool = False, target=None) -> None:
        """Run ``target`` (default ``func``) once per parametrized case, with fixtures; the
        signature is read from ``func`` (the plain function behind a bound method)."""
        target = func if target is None else target
        code = getattr(func, "__code__", None)
        if code is None:
            raise NotRunnable(f"{label} is not a function")
        if code.co_flags & (_CO_COROUTINE | _CO_ASYNC_GENERATOR):
            raise NotRunnable(f"{label} is async (pytest needs a plugin to run it)")
        if code.co_flags & _CO_GENERATOR:
            raise NotRunnable(f"{label} uses yield (pytest no longer runs yield tests)")
        not_run = getattr(self.shim, "_not_run", None)
        if not_run and any(not_run(m) for m in getattr(func, "__pytest_marks__", ())):
            return  # marked skip/skipif/xfail: not run, so it proves nothing
        expand = getattr(self.shim, "expand_params", None)
        try:
            cases = expand(func) if expand else [{}]
        except ValueError as exc:  # too many cases, wrong arity, a name parametrized twice
            raise NotRunnable(f"{label}: {exc}") from None
        if len(cases) > _MAX_CASES:
            raise NotRunnable(f"{label} has over {_MAX_CASES} parametrized cases")
        for case in cases:
            finalizers, kwargs = [], dict(case)
            for name in _param_names(func, skip_self):
                if name in kwargs:
                    continue
                if name not in self.fixtures:
                    raise NotRunnable(f"{label} needs fixture {name!r}, which the test does "
                                      "not define")
                kwargs[name] = self._fixture(name, finalizers)
            try:
                target(**kwargs)
                self.ran += 1
            finally:
                for gen in reversed(finalizers):
                    for _ in gen:  # run a yield fixture's teardown
                        break

    def _fixture(self, name: str, finalizers: list):
        fixture = self.fixtures[name]
        fixture = getattr(fixture, "__wrapped__", fixture)
        if getattr(getattr(fixture, "__code__", None), "co_argcount", 0):
            raise NotRunnable(f"fixture {name!r} takes arguments (not supported)")
        value = fixture()
        if getattr(getattr(value, "gi_code", None), "co_flags", 0) & _CO_GENERATOR:
            finalizers.append(value)
            value = next(value)
        return value

    def _run_class(self, name: str, cls: type) -> None:
        unittest = sys.modules.get("unittest")
        if unittest is not None and issubclass(cls, unittest.TestCase):
            suite = unittest.defaultTestLoader.loadTestsFromTestCase(cls)
            result = unittest.TestResult()
            suite.run(result)
            self.ran += result.testsRun - len(result.skipped)
            for failures, kind in ((result.failures, AssertionError), (result.errors, None)):
                if failures:
                    last = failures[0][1].strip().splitlines()[-1:] or ["failed"]
                    if kind is AssertionError:
                        raise AssertionError(f"{failures[0][0]}: {last[0]}")
                    raise RuntimeError(f"{failures[0][0]}: {last[0]}")
            return
        if not name.startswith("Test"):
            return
        if "__init__" in vars(cls):
            raise NotRunnable(f"class {name} has an __init__, so pytest does not collect it")
        seen: list[str] = []
        for klass in reversed(cls.__mro__):
            seen += [n for n in vars(klass) if n.startswith("test") and n not in seen]
        for method in seen:
            attr = getattr(cls, method, None)
            if not callable(attr):
                continue
            instance = cls()
            static = isinstance(vars(cls).get(method), staticmethod)
            bound = getattr(instance, method)
            if hasattr(instance, "setup_method"):
                instance.setup_method(bound)
            try:
                self._call(f"{name}.{method}", getattr(bound, "__func__", bound),
                           skip_self=not static, target=bound)
            finally:
                if hasattr(instance, "teardown_method"):
                    instance.teardown_method(bound)

    def run(self) -> None:
        items = list(self.ns.items())
        if callable(self.ns.get("setup_module")):
            self.ns["setup_module"]()
        for name, obj in items:
            if isinstance(obj, type) and obj.__module__ == "__test__":
                self._run_class(name, obj)
            elif (name.startswith("test") and getattr(obj, "__code__", None) is not None
                  and obj.__code__.co_filename == "<test>"
                  and not getattr(obj, "__pytest_fixture__", False)):
                self._call(name, obj, skip_self=False)
        if callable(self.ns.get("teardown_module")):
            self.ns["teardown_module"]()


def test_main(msg: dict, out_fd: int, peer: tuple[int, int]) -> None:
    """Body of T: one whole test with candidate names bound to proxies. ``peer`` is (write
    end to its C, read end from its C): calls go straight to C, never through code that C
    could influence; only T's frames go to the worker, on ``out_fd``."""
    proxies = Proxies(peer, out_fd)
    shim = sys.modules.get("pytest")
    ns = {"__name__": "__test__", "__builtins__": builtins}
    try:
        proxies.load()
        exec(msg["prelude"], ns)
        ns.update({n: proxies.classes.get(n) or proxies.proxy(n) for n in msg["names"]})
        src = msg["src"]
        has_body = _has_body(src)
        exec(compile(src, "<test>", "exec"), ns)
        runner = Runner(ns, shim)
        runner.run()
        if not runner.ran and not has_body:
            raise NotRunnable("the test defines no module-level code, test* function or "
                              "Test* class that pytest would run")
    except NotRunnable as exc:
        write_frame(out_fd, ["invalid", str(exc)[:300]])
    except BaseException as exc:
        skipped = getattr(shim, "Skipped", None)
        if skipped is not None and isinstance(exc, skipped):
            write_frame(out_fd, ["invalid", f"skipped: {str(exc)[:280]}"])
        else:
            kind = "failed" if isinstance(exc, AssertionError) else "error"
            write_frame(out_fd, ["fail", _describe(exc), kind])
    else:
        write_frame(out_fd, ["done", msg["token"]])
