#!/usr/bin/env bash
# Removes what the last install from a build tree put in place:
#   scripts/uninstall.sh BUILD/install_manifest.txt
# Every file the manifest lists (under $DESTDIR when set, as at install time)
# goes, and then the directories of gradkern's own (lib/cmake/gradkern) that
# are left empty; shared directories (bin, lib, include) stay.
set -euo pipefail
manifest=${1:?usage: scripts/uninstall.sh BUILD/install_manifest.txt}
if [ ! -f "$manifest" ]; then
  echo "uninstall: $manifest not found (nothing was installed from this build tree)" >&2
  exit 1
fi
while IFS= read -r file || [ -n "$file" ]; do
  [ -n "$file" ] || continue
  path="${DESTDIR:-}$file"
  if [ -e "$path" ] || [ -L "$path" ]; then
    rm -f -- "$path"
    echo "removed $path"
  fi
  dir=$(dirname -- "$path")
  if [ "$(basename -- "$dir")" = gradkern ] && [ -d "$dir" ]; then
    rmdir --ignore-fail-on-non-empty -- "$dir"
  fi
done < "$manifest"
