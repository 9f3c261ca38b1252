# SPDX-License-Identifier: MIT
"""Stream training datasets from disk into GPU memory with bounded memory.

Loader(paths, batch_size, ...) iterates over batches: dicts of arrays that
speak DLPack (torch.from_dlpack, numpy.from_dlpack, cupy.from_dlpack), or
torch tensors with tensors="torch".  open() and pack() read and write
datasets for small jobs.  The `ringfeed` command comes with the package.
"""

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
        self.path = path
        self.weight = float(weight)
        self.name = name

    def __repr__(self):
        return f"Source({self.path!r}, weight={self.weight!r}, name={self.name!r})"


__all__ = [n for n in dir(_ringfeed) if not n.startswith("_")] + ["Source"]
