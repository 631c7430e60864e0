#!/usr/bin/env bash
# Installs the Python SDK built in build/python (scripts/build.sh release) for Debian's
# /usr/bin/python3: the `cairn` package and its dist-info (which registers the fsspec protocol
# `cairn`) are copied into /usr/local/lib/python3.X/dist-packages, where Debian's interpreter
# looks first. Afterwards `import cairn` and fsspec.open("cairn:///...") work in any folder.
# Idempotent; run as root. (docs/python.md)
set -euo pipefail
cd "$(dirname "$0")/.."
src=build/python
if [[ ! -f "$src/cairn/__init__.py" ]] || ! compgen -G "$src/cairn/_cairn*.so" >/dev/null; then
  echo "install-python: $src has no built SDK; run scripts/build.sh release first" >&2
  exit 1
fi
site=$(/usr/bin/python3 -c 'import sys; print(f"/usr/local/lib/python3.{sys.version_info[1]}/dist-packages")')
mkdir -p "$site"
rm -rf "$site/cairn" "$site"/cairn-*.dist-info
cp -r "$src/cairn" "$src"/cairn-*.dist-info "$site/"
find "$site/cairn" -name __pycache__ -prune -exec rm -rf {} +
# Checked from another folder, so the copy (not this checkout) is what imports.
(cd / && /usr/bin/python3 -c 'import cairn, cairn._cairn' )
echo "installed the cairn Python package in $site"
