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

__all__ = [n for n in dir(_ringfeed) if not n.startswith("_")]
