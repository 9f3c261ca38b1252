# SPDX-License-Identifier: MIT
# Description: inspect.signature works on ringfeed.Loader, pack, open and
# the Loader's methods (the docstrings carry __text_signature__, so help()
# and Jupyter show them); the signature's defaults are what the functions
# take (a Loader given every default explicitly delivers what one given none
# does); help(Loader) explains every argument; help(pack) ties the advice to
# shuffle sorted data to the window's size rather than saying the window
# shuffle mixes poorly.
import inspect
import os
import pydoc

import numpy as np

import ringfeed
from rftest import check, tmpdir

sig = {}
for name, obj in (("Loader", ringfeed.Loader), ("pack", ringfeed.pack), ("open", ringfeed.open),
                  ("set_epoch", ringfeed.Loader.set_epoch),
                  ("load_state_dict", ringfeed.Loader.load_state_dict)):
    try:
        sig[name] = inspect.signature(obj)
    except (ValueError, TypeError) as e:
        check(False, "inspect.signature(%s): %s" % (name, e))

if "Loader" in sig:
    params = sig["Loader"].parameters
    want = ["paths", "batch_size", "fields", "shuffle", "seed", "epoch", "rank", "world",
            "device", "depth", "pinned_bytes", "drop_last", "window", "pinning", "io_depth",
            "direct", "decode_threads", "verify", "var_bytes", "map", "tokens", "tensors",
            "on_error", "skip_limit", "cache_dir", "cache_bytes", "images", "inplace"]
    check(list(params) == want, "Loader's parameters: %s" % list(params))
    d = tmpdir()
    p = os.path.join(d, "data.rfs")
    ringfeed.pack(p, {"y": np.arange(100, dtype=np.int64)})
    defaults = {k: v.default for k, v in params.items()
                if v.default is not inspect.Parameter.empty}
    defaults["device"] = "cpu"
    a = ringfeed.Loader(p, 8, **defaults)
    b = ringfeed.Loader(p, 8, device="cpu")
    ya = [np.asarray(x["y"]).tolist() for x in a]
    yb = [np.asarray(x["y"]).tolist() for x in b]
    check(ya == yb and len(a) == len(b), "a Loader of the signature's defaults is the default")
    check(a.stats()["pinned_peak"] == b.stats()["pinned_peak"], "pinned_bytes=0 is the default")
    a.close()
    b.close()
if "pack" in sig:
    check(list(sig["pack"].parameters) ==
          ["path", "columns", "zstd", "chunk_bytes", "shard_bytes", "shuffle"],
          "pack's parameters: %s" % list(sig["pack"].parameters))
if "set_epoch" in sig:
    check(list(sig["set_epoch"].parameters) == ["self", "epoch"], "set_epoch's parameters")

text = pydoc.render_doc(ringfeed.Loader, renderer=pydoc.plaintext)
for arg in ("fields", "shuffle", "seed", "epoch", "rank, world", "device", "depth",
            "pinned_bytes", "drop_last", "window", "pinning", "io_depth", "direct",
            "decode_threads", "verify", "var_bytes", "map", "tokens", "tensors", "on_error",
            "skip_limit"):
    check(("\n |    %s " % arg) in text, "help(Loader) explains %s" % arg)
ptext = pydoc.render_doc(ringfeed.pack, renderer=pydoc.plaintext)
check("poorly" not in ptext and "larger than the loader's window" in ptext,
      "help(pack) says when the window shuffle does not mix")
print("ok")
