# SPDX-License-Identifier: MIT
"""Stream training datasets from disk into GPU memory with bounded memory.

Loader(paths, batch_size, ...) iterates over batches: dicts of arrays that
speak DLPack (torch.from_dlpack, numpy.from_dlpack, cupy.from_dlpack), or
torch tensors with tensors="torch".  open() and pack() read and write
datasets for small jobs.  The `ringfeed` command comes with the package.
"""

import sys as _sys

from . import _ringfeed
from ._ringfeed import *  # noqa: F401,F403  (the extension's public names)
from ._ringfeed import __version__  # noqa: F401


class Source:
    """One dataset of a mixture: Loader([Source(path, weight=0.7, name="web"), ...]).

    weight: finite and >= 0, relative to the others' (0 leaves the source
    out); name: for messages and stats()["sources"] (default: the path).
    """

    __slots__ = ("path", "weight", "name")

    def __init__(self, path, weight=1.0, name=None):
        import numbers
        # A number, as rf_source.weight is: a string ('0.1') is refused,
        # not parsed.
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
            raise TypeError(f"Source {path!r}: weight must be a real number (int or float), "
                            f"not {type(weight).__name__} {weight!r}")
        self.path = path
        self.weight = float(weight)
        self.name = name

    def __repr__(self):
        return f"Source({self.path!r}, weight={self.weight!r}, name={self.name!r})"


__all__ = [n for n in dir(_ringfeed) if not n.startswith("_")] + ["Source"]


def _signatures_for_39():
    # CPython 3.9 drops the signature line of an extension type's docstring
    # (3.10 keeps it as __text_signature__); the module keeps it as
    # _text_signature, made here into the __signature__ that
    # inspect.signature and help() read.
    import inspect
    for name in __all__:
        t = getattr(_ringfeed, name, None)
        text = getattr(t, "_text_signature", None) if isinstance(t, type) else None
        if text:
            ns = {}
            exec("def f%s: pass" % text, ns)
            t.__signature__ = inspect.signature(ns["f"])


if _sys.version_info < (3, 10):
    _signatures_for_39()

