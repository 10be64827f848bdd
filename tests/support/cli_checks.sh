# tests/support/cli_checks.sh: checks of a command-line tool's exact output,
# sourced by the CLI tests (tests/explain/explain_test.sh,
# tests/checkpoint/inspect_test.sh). The sourcing script sets $tool (the
# program) and $tool_name (how it names itself on stderr), and $case_name
# before each case.
#
# Plain bash and grep on purpose: the tests must run wherever ctest does, with
# nothing to install. Every check runs (no early exit) so one run reports all
# that is wrong; finish_checks prints the tally and fails if any check did.

failures=0
checks=0

fail() {
  echo "FAIL [$case_name]: $*" >&2
  failures=$((failures + 1))
}

# Runs the tool; leaves stdout, stderr and the exit code in $out, $err, $rc.
run() {
  local err_file
  err_file="$(mktemp)"
  out="$("$tool" "$@" 2>"$err_file")"
  rc=$?
  err="$(cat "$err_file")"
  rm -f "$err_file"
}

expect_rc() {
  checks=$((checks + 1))
  [[ "$rc" == "$1" ]] || fail "exit code: expected $1, found $rc (stderr: $err)"
}

# The whole of stdout equals $1.
expect_out() {
  checks=$((checks + 1))
  [[ "$out" == "$1" ]] || fail "stdout: expected
$1
found
$out"
}

# stdout has a line exactly equal to $1.
expect_line() {
  checks=$((checks + 1))
  grep -Fxq -- "$1" <<<"$out" || fail "stdout: expected the line '$1' in
$out"
}

# stdout has exactly $1 lines matching the extended regex $2.
expect_count() {
  checks=$((checks + 1))
  local found
  found="$(grep -Ec -- "$2" <<<"$out")"
  [[ "$found" == "$1" ]] || fail "stdout: expected $1 lines matching '$2', found $found in
$out"
}

# Bad input: exit code 2, nothing on stdout, one line on stderr that starts
# with the tool's name and contains $1.
expect_error() {
  expect_rc 2
  checks=$((checks + 1))
  [[ -z "$out" ]] || fail "stdout: expected nothing, found '$out'"
  [[ "$(printf '%s\n' "$err" | wc -l)" == 1 ]] || fail "stderr: expected one line, found
$err"
  [[ "$err" == "$tool_name: "*"$1"* ]] ||
    fail "stderr: expected '$tool_name: ...$1...', found '$err'"
}

# The tally, as the test's last command: its status is the test's.
finish_checks() {
  echo "$1: $checks checks, $failures failed"
  [[ "$failures" == 0 ]]
}
