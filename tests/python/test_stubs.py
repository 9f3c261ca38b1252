# SPDX-License-Identifier: MIT
# Description: the package is typed (PEP 561): py.typed and __init__.pyi sit
# in the package; the stub declares every public name of the module, every
# public method and property of Loader, Array and Dataset, and the same
# parameters, in the same order, as inspect.signature gives for Loader,
# pack and open.
import ast
import inspect
import os

import ringfeed
from rftest import check

pkg = os.path.dirname(ringfeed.__file__)
check(os.path.exists(os.path.join(pkg, "py.typed")), "py.typed is in the package")
stub_path = os.path.join(pkg, "__init__.pyi")
check(os.path.exists(stub_path), "__init__.pyi is in the package")
tree = ast.parse(open(stub_path).read())

top = {}
classes = {}
for node in tree.body:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        top[node.name] = node
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        top[node.target.id] = node
    if isinstance(node, ast.ClassDef):
        classes[node.name] = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}

for name in ringfeed.__all__ + ["__version__"]:
    check(name in top, "the stub declares ringfeed.%s" % name)
for name in top:
    if not name.startswith("_") and name != "__all__":
        check(hasattr(ringfeed, name), "ringfeed.%s, in the stub, exists" % name)

for cname in ("Loader", "Array", "Dataset"):
    cls = getattr(ringfeed, cname)
    for attr in dir(cls):
        if attr.startswith("_") and attr not in ("__dlpack__", "__dlpack_device__",
                                                 "__array__", "__len__", "__iter__",
                                                 "__getitem__", "__enter__", "__exit__"):
            continue
        if attr.startswith("__") and not hasattr(cls, attr):
            continue
        check(attr in classes[cname], "the stub declares %s.%s" % (cname, attr))


def stub_params(fn):
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    return [n for n in names if n != "self"]


check(stub_params(classes["Loader"]["__init__"]) == list(inspect.signature(ringfeed.Loader).parameters),
      "Loader's parameters in the stub")
for fname in ("pack", "open"):
    check(stub_params(top[fname]) == list(inspect.signature(getattr(ringfeed, fname)).parameters),
          "%s's parameters in the stub" % fname)
print("ok")
