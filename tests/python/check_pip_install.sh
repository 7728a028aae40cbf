#!/usr/bin/env bash
# The pip install of docs/guide/python.md, as a user runs it on a fresh source tree: copy the working tree (no
# build trees, .git or virtual environments) to a temporary directory, make a virtual environment
# that sees Debian's numpy and torch, `pip install --no-build-isolation --no-index .` there
# (setup.py builds the extension with CMake, offline), import the package from outside the tree and
# check its version, files and names, then remove the directory. The ctest python_pip_install;
# about 3 min on 2 cores (the extension's build). CMAKE_BUILD_PARALLEL_LEVEL limits the jobs.
# Usage: bash tests/python/check_pip_install.sh [python3 of the virtual environment]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python="${1:-/usr/bin/python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
tar -C "$root" --exclude='./build*' --exclude=./.git --exclude=./.venv --exclude='*.egg-info' \
  --exclude=__pycache__ -cf - . | tar -C "$tmp/src" -xf -
start=$SECONDS
"$python" -m venv --system-site-packages "$tmp/venv"
(cd "$tmp/src" && "$tmp/venv/bin/pip" install --no-build-isolation --no-index .)
echo "check_pip_install: venv and pip install took $((SECONDS - start)) s"
version="$(sed -n 's/^#define SPARSEPUSH_VERSION_\(MAJOR\|MINOR\|PATCH\) \+\([0-9]\+\) *$/\2/p' \
  "$root/include/sparsepush/config.hpp" | paste -sd.)"
cd /
"$tmp/venv/bin/python" - "$tmp/venv" "$version" <<'PY'
import os, sys
import sparsepush, sparsepush._core
venv, version = sys.argv[1], sys.argv[2]
pkg = os.path.dirname(sparsepush.__file__)
assert pkg.startswith(venv + os.sep), f"imported {pkg}, not the virtual environment's package"
assert sparsepush.__version__ == version, f"sparsepush.__version__ is {sparsepush.__version__}, the project is {version}"
for f in ("__init__.py", "_core.pyi", "py.typed"):
    assert os.path.isfile(os.path.join(pkg, f)), f"the installed package lacks {f}"
assert sparsepush.PushSumNode.__module__ == "sparsepush" and "torch" not in sys.modules
print(f"check_pip_install: sparsepush {sparsepush.__version__} from {pkg}: ok")
PY
