#!/usr/bin/env bash
# The whole test suite, in the order CI runs it. Every step must pass; the first failure stops the run.
#   1. notebooks are clean (nbdev_clean changes nothing)
#   2. the package is in sync with the notebooks (nbdev_export changes nothing)
#   3. README.md is index.ipynb's; the offline docs build has every page; nbdev_proc_nbs (what nbdev_docs runs before
#      Quarto, into _proc/) passes on every notebook and uses the top-level _quarto.yml
#   4. nbdev_test runs every notebook top to bottom
#   5. pytest (tests/, not the live ones); "no tests collected" (exit 5) is a failure
#   6. ruff finds no undefined or redefined names in the package
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d .venv/bin ] && export PATH="$PWD/.venv/bin:$PATH"

step() { printf '\n== %s\n' "$*"; }
snapshot() { find "$@" -type f \( -name '*.ipynb' -o -name '*.py' \) -not -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum; }

step "notebooks clean"
before=$(snapshot nbs)
nbdev_clean
after=$(snapshot nbs)
if [ "$before" != "$after" ]; then
  echo "nbdev_clean changed these notebooks; run nbdev_clean and commit them:"
  diff <(echo "$before") <(echo "$after") | sed -n 's/^> [0-9a-f]* *//p'
  exit 1
fi

step "package in sync with notebooks"
before=$(snapshot multis)
nbdev_export
after=$(snapshot multis)
if [ "$before" != "$after" ]; then
  echo "notebooks and library are not in sync: nbdev_export changed these files; export and commit them:"
  diff <(echo "$before") <(echo "$after") | sed -n 's/^> [0-9a-f]* *//p'
  exit 1
fi

step "README.md generated from nbs/index.ipynb"
python tools/make_readme.py --check

step "docs build: every module has a page"
python tools/build_docs.py --check

step "docs processing: nbdev_proc_nbs, as nbdev_docs runs it before Quarto"
python tools/build_docs.py --proc

step "nbdev_test"
nbdev_test --n_workers 2 --timing

step "pytest"
python -m pytest -q -m "not live" -p no:cacheprovider

step "ruff"
ruff check multis --select F821,F811

echo
echo "all checks passed"
