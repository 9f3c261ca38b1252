# SPDX-License-Identifier: MIT
# Type stubs of the ringfeed package (the extension ringfeed._ringfeed).
# Every public name of the package is here; tests/python/test_stubs.py
# checks that the two agree.
import os
from types import TracebackType
from typing import Any, Dict, Iterable, Iterator, List, Literal, Mapping, NoReturn, Optional, Sequence, Tuple, Union, overload

_Path = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
_Paths = Union[_Path, Sequence[_Path]]
# numpy.ndarray when NumPy is installed; Any keeps NumPy optional.
_NDArray = Any

__version__: str

EFORMAT: int
ECORRUPT: int
ECHECKSUM: int
ESCHEMA: int
ETRUNCATED: int
ECODEC: int
ENODEVICE: int
ECUDA: int
EMEMPLAN: int
EHELD: int
ESTATE: int
ENPY: int
EUSAGE: int
EFORK: int

class Error(RuntimeError):
    """A failure reported by the library: .code (negative), .name ("EHELD")."""

    code: int
    name: str
    description: str

class RingfeedWarning(RuntimeWarning):
    """A setting the Loader took from the environment or changed by itself."""

class Array:
    """A field of a batch in the loader's buffer (DLPack; on the host NumPy's
    array interface, and the buffer protocol on CPython 3.11 and later)."""

    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def ndim(self) -> int: ...
    @property
    def data_ptr(self) -> int: ...
    # True for a batch handed out in place, in a read-only map of the file.
    @property
    def readonly(self) -> bool: ...
    # The first dimension: the batch's samples (a variable field's data: its rows).
    def __len__(self) -> int: ...
    def __dlpack__(self, *, stream: Optional[int] = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> _NDArray: ...
    @property
    def __array_interface__(self) -> Dict[str, Any]: ...

class Source:
    """One dataset of a mixture: Loader([Source(path, weight=0.7), ...])."""

    path: _Path
    weight: float
    name: Optional[str]
    def __init__(
        self,
        path: _Path,
        weight: float = 1.0,
        name: Optional[str] = None,
    ) -> None: ...

class Loader:
    """Stream a dataset in batches: for batch in loader: {field: Array}."""

    def __init__(
        self,
        paths: Union[_Paths, Sequence[Source]],
        batch_size: int,
        *,
        fields: Optional[Sequence[str]] = None,
        shuffle: Union[Literal["none", "chunks", "window", "full"], bool] = "none",
        seed: int = 0,
        epoch: int = 0,
        rank: Optional[int] = None,
        world: Optional[int] = None,
        device: Any = "auto",
        depth: int = 2,
        pinned_bytes: int = 0,
        drop_last: bool = True,
        window: int = 0,
        pinning: Literal["ring", "transient"] = "ring",
        io_depth: int = 0,
        direct: Optional[bool] = None,
        decode_threads: int = 0,
        verify: bool = True,
        var_bytes: int = 0,
        map: bool = False,
        tokens: Literal["stored", "inputs_targets"] = "stored",
        tensors: Literal["dlpack", "torch"] = "dlpack",
        on_error: Literal["raise", "skip"] = "raise",
        skip_limit: int = 0,
        cache_dir: Optional[Union[str, os.PathLike[str]]] = None,
        cache_bytes: int = 0,
        images: Optional[Dict[str, Any]] = None,
        inplace: bool = True,
    ) -> None: ...
    # With tensors="torch", the values are torch tensors (pairs of them).
    def __iter__(self) -> Iterator[Dict[str, Any]]: ...
    def __len__(self) -> int: ...
    def __getitem__(self, key: object) -> NoReturn: ...  # TypeError: iterate it
    def __enter__(self) -> "Loader": ...
    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> bool: ...
    def close(self) -> None: ...
    def set_epoch(self, epoch: int, /) -> None: ...
    def stats(self) -> Dict[str, int]: ...
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: Mapping[str, Any], /) -> None: ...
    @property
    def epoch(self) -> int: ...
    @property
    def device(self) -> str: ...
    @property
    def samples(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def depth(self) -> int: ...
    @property
    def held(self) -> int: ...
    @property
    def order_id(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def world(self) -> int: ...
    @property
    def rank_source(self) -> str: ...

class Dataset:
    """A dataset opened by open(): len(ds), ds[i] -> {field: ndarray}."""

    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, i: int) -> Dict[str, _NDArray]: ...
    @overload
    def __getitem__(self, i: slice) -> Dict[str, Union[_NDArray, List[_NDArray]]]: ...
    def take(self, indices: Iterable[int], /) -> Dict[str, Union[_NDArray, List[_NDArray]]]: ...
    def __enter__(self) -> "Dataset": ...
    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> bool: ...
    def close(self) -> None: ...
    def chunk_info(self, c: int, /) -> Dict[str, Any]: ...
    @property
    def schema(self) -> Dict[str, Dict[str, Any]]: ...
    @property
    def shards(self) -> List[str]: ...
    @property
    def chunks(self) -> int: ...

def open(paths: _Paths, verify: bool = True, cache_bytes: int = 268435456) -> Dataset:
    """Open a dataset for random access."""

def pack(path: _Path, columns: Mapping[str, Any], zstd: int = 0, chunk_bytes: int = 0,
         shard_bytes: int = 0, shuffle: Optional[int] = None) -> int:
    """Write a dataset from {name: array}; returns the samples written.

    An array is anything with the buffer protocol (NumPy) or a torch tensor
    (packed as its values; bf16 stays bf16).  A bool array is stored as u8
    0/1 and read back as uint8.  Arrays of strings or objects are refused.
    """

def version() -> str: ...
def strerror(code: int, /) -> str: ...

__all__: List[str]
