#!/usr/bin/env bash
# tests/mpi/checkpoint_kill_test.sh: a rank killed in the middle of a save
# under mpirun leaves the previous checkpoint whole (checkpoint_kill_test.cc
# says how). Usage: checkpoint_kill_test.sh MPIEXEC NUMPROC_FLAG PROGRAM
#
# Phase 1 must fail, with a rank killed by signal 9; phase 2, a fresh job
# on the same directory, must pass.
set -u

mpiexec="${1:?usage: checkpoint_kill_test.sh MPIEXEC NUMPROC_FLAG PROGRAM}"
np_flag="${2:?}"
program="${3:?}"
dir="$(mktemp -d "${TMPDIR:-/tmp}/dtensor-checkpoint-kill-XXXXXX")"
log="$dir.log"
trap 'rm -rf "$dir" "$log"' EXIT

"$mpiexec" "$np_flag" 4 --oversubscribe "$program" save "$dir" >"$log" 2>&1
rc=$?
cat "$log"
if [[ "$rc" == 0 ]]; then
  echo "FAIL: the save job exited 0; expected rank 2 killed in the save" >&2
  exit 1
fi
# Open MPI: "exited on signal 9 (Killed)"; MPICH: "KILLED BY SIGNAL: 9".
if ! grep -Eiq 'signal:? 9' "$log"; then
  echo "FAIL: the save job exited $rc without a rank killed by signal 9" >&2
  exit 1
fi

if ! "$mpiexec" "$np_flag" 4 --oversubscribe "$program" verify "$dir"; then
  echo "FAIL: the job after the killed save did not find step A's checkpoint" >&2
  exit 1
fi
echo "checkpoint_kill_mid_save: ok"
