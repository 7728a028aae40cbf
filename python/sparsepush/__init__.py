# The package sparsepush: every public name of its extension sparsepush._core (the C++ library,
# bound with pybind11: python/module.cpp), re-exported here with this package as its home, so that
# reprs, tracebacks and help() say sparsepush.X. `import sparsepush.torch` adds the PyTorch helpers;
# `import sparsepush` never imports torch. The stubs of the extension are _core.pyi
# (python/stubgen.py writes them).
from . import _core
from ._core import *  # noqa: F401,F403 - the public API is the extension's
from ._core import __version__  # noqa: F401

__doc__ = _core.__doc__
__all__ = sorted(name for name in dir(_core) if not name.startswith("_"))


def _adopt(names):
    """Name this package, not its extension, as the home of the extension's classes, exception types
    and functions, so that reprs, tracebacks and help() say sparsepush.X (every X is importable
    from here, so pickle finds it by that name)."""
    for name in names:
        obj = getattr(_core, name)
        if getattr(obj, "__module__", None) == _core.__name__:
            try:
                obj.__module__ = __name__
            except (AttributeError, TypeError):  # not writable (none of the module's today)
                pass


_adopt(__all__)
del _adopt
