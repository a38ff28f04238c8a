# shellcheck shell=bash
# The scaffolding of the check scripts (source it): check_start WORKDIR
# empties WORKDIR and zeroes the counts; ok and bad MESSAGE count a passed or
# failed check (bad prints it); check_report NAME prints the counts and
# returns 0 only when nothing failed (the script's exit status, last).
check_start() { rm -rf "$1" && mkdir -p "$1"; pass=0; fail=0; }
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAILED: $*"; }
check_report() { echo "$1: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
