"""Reads canonical datashapes (one per line) on stdin and checks that
Blaze's `datashape` package parses each and prints exactly the same text.

Prints one line per shape and a closing 'N passed, N failed' line; exits
non-zero on any difference.
"""
import sys

import datashape

passed = failed = 0
for line in sys.stdin.read().splitlines():
    if not line:
        continue
    try:
        printed = str(datashape.dshape(line))
    except Exception as exc:  # Blaze rejects it
        printed = "error: %s" % " ".join(str(exc).split())
    if printed == line:
        passed += 1
        print("ok    %s" % line)
    else:
        failed += 1
        print("DIFF  %s  ->  %s" % (line, printed))
print("blaze: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
