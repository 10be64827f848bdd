#!/usr/bin/env bash
# tests/checkpoint/inspect_test.sh: runs `dtensor-checkpoint inspect` on the
# checkpoints checkpoint_sample writes and checks its exact output.
# Usage: inspect_test.sh PATH/TO/dtensor-checkpoint PATH/TO/checkpoint_sample
# Checks: tests/support/cli_checks.sh.
set -u

tool="${1:?usage: inspect_test.sh TOOL SAMPLE}"
sample="${2:?usage: inspect_test.sh TOOL SAMPLE}"
dir="$(mktemp -d "${TMPDIR:-/tmp}/dtensor-checkpoint-inspect-XXXXXX")"
trap 'rm -rf "$dir"' EXIT
tool_name=dtensor-checkpoint
source "$(dirname "$0")/../support/cli_checks.sh"

"$sample" "$dir" || { echo "FAIL: checkpoint_sample $dir failed" >&2; exit 1; }

# S(0) of 5 rows over 4 ranks: 2, 2, 1 and none, so rank 3 has no box of w;
# the replicated b and the plain scalar are written once, by the rank their
# position in the state picks (0 and 2); the empty tensor has no box at all.
case_name="checkpoint directory"
run inspect "$dir/ckpt"
expect_rc 0
expect_out "tensor  dtype  shape   box         file                    entry
b       BF16   [4]     [0:4]       rank-00000.safetensors  b@0
empty   F32    [0, 3]  -
step    I64    []      []          rank-00002.safetensors  step@0
w       F32    [5, 3]  [0:2, 0:3]  rank-00000.safetensors  w@0
                       [2:4, 0:3]  rank-00001.safetensors  w@1
                       [4:5, 0:3]  rank-00002.safetensors  w@2
x       F32    [4, 4]  [0:2, 0:2]  rank-00000.safetensors  x@0
                       [2:4, 0:2]  rank-00001.safetensors  x@1
                       [0:2, 2:4]  rank-00002.safetensors  x@2
                       [2:4, 2:4]  rank-00003.safetensors  x@3
totals: tensors 5, boxes 9, files 4"

case_name="plain safetensors file"
run inspect "$dir/plain.safetensors"
expect_rc 0
expect_out "tensor  dtype  shape   box         file               entry
a       F32    [2, 3]  [0:2, 0:3]  plain.safetensors  a
i       I32    [5]     [0:5]       plain.safetensors  i
totals: tensors 2, boxes 2, files 1"

case_name="missing path"
run inspect "$dir/nothing-here"
expect_error "$dir/nothing-here does not exist"

case_name="corrupt index"
run inspect "$dir/corrupt"
expect_error "$dir/corrupt/index.json is not valid JSON"

case_name="unknown subcommand"
run show "$dir/ckpt"
expect_error "unknown subcommand 'show'"

case_name="no path"
run inspect
expect_error "inspect: expected one PATH, found 0 arguments"

case_name="help"
run --help
expect_rc 0
checks=$((checks + 1))
grep -q '^  dtensor-checkpoint inspect PATH$' <<<"$out" || fail "stdout: expected the usage, found
$out"

finish_checks checkpoint_inspect_cli
