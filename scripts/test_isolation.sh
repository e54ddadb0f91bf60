#!/usr/bin/env bash
# Order independence of the unit tests: every test file on its own, then all of them
# in reverse order. A test that passes only after another one relies on state it left behind.
#
#   scripts/test_isolation.sh                          # every tests/*/test_*.py
#   scripts/test_isolation.sh tests/core/test_train.py # some files
#
# Book tests (-m book) are left out. The reverse run lists the test ids (pytest --collect-only),
# reverses them and passes them back: pytest runs ids given on the command line in that order.
# PYTHON picks the interpreter (default: python). Exit status 1 names what failed.
set -u
cd "$(dirname "$0")/.."
py=${PYTHON:-python}
if [ $# -gt 0 ]; then files=("$@"); else files=(tests/*/test_*.py); fi
failed=()
for file in "${files[@]}"; do
    echo "== $file on its own"
    "$py" -m pytest -q -m "not book" "$file"
    rc=$?
    # 5: the file holds only book tests, which this script leaves out
    [ $rc -eq 0 ] || [ $rc -eq 5 ] || failed+=("$file on its own")
done
ids=()
while IFS= read -r id; do ids=("$id" "${ids[@]}"); done < <("$py" -m pytest -q --collect-only -m "not book" "${files[@]}" | grep '::')
if [ ${#ids[@]} -eq 0 ]; then
    echo "no tests collected from ${files[*]}" >&2
    exit 1
fi
echo "== ${#ids[@]} tests in reverse order (first: ${ids[0]})"
"$py" -m pytest -q -m "not book" "${ids[@]}" || failed+=("reverse order")
if [ ${#failed[@]} -gt 0 ]; then
    printf 'FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "every file passed on its own and in reverse order"
