#!/usr/bin/env bash
# Maps pytest's exit status for make and CI: 5 ("no tests collected") is a failure here, with a clear message.
status=${1:?usage: pytest_status.sh STATUS}
case "$status" in
  0) exit 0 ;;
  5) echo "pytest collected no tests: the selection or test paths are wrong" >&2; exit 1 ;;
  *) exit "$status" ;;
esac
