#!/usr/bin/env python3
"""Write python/sparsepush/_core.pyi, the type stubs of the extension sparsepush._core, from the
built extension: the module writes every signature by hand as the first line of its docstring
(python/module.cpp disables pybind11's), e.g. "round(t, schedule, compressor, endpoint, eta=1.0)"
or "debiased(out) -> out"; each becomes a stub `def`. Parameters are untyped; the return type is
the "-> X" where X names a type (a class of the module, a builtin, numpy.ndarray, "list of X",
"(a, b)"), else Any. A function or method whose docstring has no signature line takes
(*args, **kwargs) and is named on stderr. Classes get their methods and properties, exceptions
their bases, the module its constants (by type: has_mpi differs between builds, the stubs do not).

    /usr/bin/python3 python/stubgen.py build/python            # rewrite python/sparsepush/_core.pyi
    /usr/bin/python3 python/stubgen.py build/python -o x.pyi --check python/sparsepush/_core.pyi

The first argument is the directory holding the built package (<build>/python). --check: write the
stubs to -o, then fail with the difference when the committed ones are not the same (ctest
python_stubs_current); it is skipped (exit 77) for a module built without MPI or the reference
backend, whose stand-ins have other signatures."""
import argparse
import ast
import difflib
import inspect
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMMITTED = os.path.join(HERE, "sparsepush", "_core.pyi")
SKIP = 77  # ctest SKIP_RETURN_CODE

HEADER = """\
# sparsepush._core: the type stubs of the extension (python/module.cpp). Written by
# python/stubgen.py from the built module; do not edit (ctest python_stubs_current checks them).
"""

# Attributes the exception translator (python/bind_exceptions.cpp) sets on an instance.
EXCEPTION_ATTRIBUTES = {"NonFiniteError": {"index": "int"}, "DecodeError": {"offset": "int"}}

# Special methods the module binds without a signature line.
DUNDERS = {
    "__repr__": "def __repr__(self) -> str: ...",
    "__str__": "def __str__(self) -> str: ...",
    "__len__": "def __len__(self) -> int: ...",
    "__copy__": "def __copy__(self) -> {cls}: ...",
    "__deepcopy__": "def __deepcopy__(self, memo: Any) -> {cls}: ...",
    "__getitem__": "def __getitem__(self, key: Any) -> Any: ...",
    "__eq__": "def __eq__(self, other: object) -> bool: ...",
    "__getstate__": "def __getstate__(self) -> Any: ...",
    "__setstate__": "def __setstate__(self, state: Any) -> None: ...",
}
SKIPPED_MEMBERS = {"__module__", "__doc__", "__dict__", "__weakref__"}
BUILTIN_TYPES = {"int", "float", "str", "bytes", "bool", "dict", "list", "tuple", "set", "object", "None"}


class Writer:
    def __init__(self, module):
        self.module = module
        self.classes = {v: k for k, v in vars(module).items() if isinstance(v, type) and k == v.__name__}
        self.uses_numpy = False
        self.unsigned = []  # names of functions without a signature line
        self.current_class = ""  # the class whose members are being written

    # --- return types --------------------------------------------------------------------------
    def type_of(self, text):
        """The annotation "-> text" names, or None."""
        text = text.strip().rstrip(".")
        if text in BUILTIN_TYPES:
            return text
        if text in self.classes.values():
            return text
        if text == "numpy.ndarray" or re.fullmatch(r"numpy( \w+)? arrays?", text):
            self.uses_numpy = True
            return "numpy.ndarray"
        m = re.fullmatch(r"list of (.+?)s?", text)
        if m:
            inner = self.type_of(m.group(1)) or self.type_of(m.group(1) + "s")
            return f"list[{inner}]" if inner else "list[Any]"
        m = re.fullmatch(r"\((.*)\)", text)
        if m:
            parts = [p for p in m.group(1).split(",") if p.strip()]
            return "tuple[" + ", ".join("Any" for _ in parts) + "]" if parts else "tuple[()]"
        return None

    # --- signatures ----------------------------------------------------------------------------
    def signature(self, doc, name):
        """(parameters, return annotation) of the signature line that starts doc, if it names name."""
        doc = (doc or "").lstrip()
        if not doc.startswith(name + "("):
            return None
        depth = 0
        for end, ch in enumerate(doc):  # the parameters may run over more than one line
            depth += (ch == "(") - (ch == ")")
            if depth == 0 and ch == ")":
                break
        else:
            return None
        params = " ".join(doc[len(name) + 1:end].split())
        rest = doc[end + 1:].split("\n", 1)[0].strip()
        try:
            args = ast.parse(f"def f({params}): pass").body[0].args
        except SyntaxError:
            return None
        args.defaults = [self.default(d) for d in args.defaults]
        args.kw_defaults = [None if d is None else self.default(d) for d in args.kw_defaults]
        if not rest.startswith("->"):
            return args, "None"
        return args, self.type_of(rest[2:]) or "Any"

    @staticmethod
    def default(node):
        """A simple literal default as written, anything else as ..."""
        try:
            ast.literal_eval(node)
            return node
        except ValueError:
            return ast.Constant(value=Ellipsis)

    def function(self, name, obj, indent="", method=False, init_of=None):
        """The stub of a function or method (of the class init_of, for its __init__)."""
        sig = self.signature(obj.__doc__, init_of or name)
        if sig is None and method and name in DUNDERS:
            return [indent + DUNDERS[name].format(cls=self.current_class)]
        if sig is None:
            self.unsigned.append(f"{self.current_class}.{name}" if method else name)
            args, ret = ast.parse("def f(*args: Any, **kwargs: Any): pass").body[0].args, "Any"
        else:
            args, ret = sig
        if init_of:
            ret = "None"
        if method:
            args.posonlyargs.insert(0, ast.arg(arg="self")) if args.posonlyargs else args.args.insert(0, ast.arg(arg="self"))
        return [f"{indent}def {name}({ast.unparse(args)}) -> {ret}: ..."]

    # --- module members ------------------------------------------------------------------------
    def exception(self, name, cls):
        bases = ", ".join(self.classes.get(b) or b.__name__ for b in cls.__bases__)
        attrs = EXCEPTION_ATTRIBUTES.get(name, {})
        if not attrs:
            return [f"class {name}({bases}): ..."]
        return [f"class {name}({bases}):"] + [f"    {a}: {t}" for a, t in sorted(attrs.items())]

    def klass(self, name, cls):
        self.current_class = name
        bases = [self.classes.get(b) for b in cls.__bases__ if self.classes.get(b)]
        lines = [f"class {name}({', '.join(bases)}):" if bases else f"class {name}:"]
        body = []
        for member, value in vars(cls).items():
            if member in SKIPPED_MEMBERS:
                continue
            if member == "__init__":
                if not inspect.isroutine(value) or type(value).__name__ == "wrapper_descriptor":
                    continue  # no constructor bound (instances come from the module's functions)
                body += self.function("__init__", value, "    ", method=True, init_of=name)
            elif isinstance(value, property):
                body += ["    @property", f"    def {member}(self) -> Any: ..."]
                if value.fset is not None:
                    body += [f"    @{member}.setter", f"    def {member}(self, value: Any) -> None: ..."]
            elif isinstance(value, staticmethod):
                body += ["    @staticmethod"] + self.function(member, value.__func__, "    ")
            elif inspect.isroutine(value):
                body += self.function(member, value, "    ", method=True)
            elif not member.startswith("_"):
                body.append(f"    {member}: {type(value).__name__}")
        return lines + (body or ["    ..."])

    def stubs(self):
        consts, exceptions, classes, functions, aliases = [], [], [], [], []
        self.current_class = ""
        members = vars(self.module)
        for name in sorted(members):
            value = members[name]
            if name.startswith("__") and name != "__version__":
                continue
            canonical = getattr(value, "__name__", name)
            if (isinstance(value, type) or inspect.isroutine(value)) and canonical != name and canonical in members:
                aliases.append(f"{name} = {canonical}")  # the C++ spellings of the exceptions
            elif isinstance(value, type) and issubclass(value, BaseException):
                exceptions.append((len(value.__mro__), name, value))  # bases first
            elif isinstance(value, type):
                classes.append((name, value))
            elif inspect.isroutine(value):
                functions.append((name, value))
            else:
                consts.append(f"{name}: {type(value).__name__}")
        sections = [consts, [ln for _, n, c in sorted(exceptions) for ln in self.exception(n, c)]]
        sections.append([ln for n, c in classes for ln in [""] + self.klass(n, c)][1:])
        self.current_class = ""
        sections += [[ln for n, f in functions for ln in self.function(n, f)], aliases]
        imports = ["from typing import Any"] + (["", "import numpy"] if self.uses_numpy else [])
        lines = [HEADER.rstrip("\n"), ""] + imports
        for section in sections:
            if section:
                lines += [""] + section
        return "\n".join(lines) + "\n"


def load(pythonpath):
    """The built extension, from pythonpath only (never the sources beside this script)."""
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
    sys.path.insert(0, os.path.abspath(pythonpath))
    try:
        import sparsepush._core as core
    except ImportError as e:
        sys.exit(f"stubgen: no built package sparsepush in {pythonpath} ({e}): build the target sparsepush_python")
    if not os.path.abspath(core.__file__).startswith(os.path.abspath(pythonpath) + os.sep):
        sys.exit(f"stubgen: imported {core.__file__}, not the extension under {pythonpath}")
    return core


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pythonpath", nargs="?", default=os.path.join(os.path.dirname(HERE), "build", "python"),
                    help="the directory holding the built package sparsepush/ (default: build/python)")
    ap.add_argument("-o", "--output", default=COMMITTED, help="the stubs to write (default: python/sparsepush/_core.pyi)")
    ap.add_argument("--check", metavar="COMMITTED", help="fail when these stubs differ from the ones written")
    args = ap.parse_args()
    args.pythonpath = os.path.abspath(args.pythonpath)
    core = load(args.pythonpath)
    if args.check and not (core.has_mpi and core.has_train):
        print("stubgen: this extension was built without MPI or the reference backend, whose stand-ins have "
              "other signatures: the stubs describe the full module (skipped)")
        return SKIP
    writer = Writer(core)
    text = writer.stubs()
    ast.parse(text, args.output)
    with open(args.output, "w") as f:
        f.write(text)
    for name in writer.unsigned:
        print(f"stubgen: {name}: no signature line in its docstring, stubbed as (*args, **kwargs) -> Any",
              file=sys.stderr)
    if args.check:
        with open(args.check) as f:
            committed = f.read()
        if committed != text:
            sys.stdout.writelines(difflib.unified_diff(committed.splitlines(True), text.splitlines(True),
                                                       args.check, args.output))
            print(f"stubgen: {args.check} is not what the built extension gives: run python/stubgen.py "
                  f"{args.pythonpath}")
            return 1
        print(f"stubgen: {args.check} is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
