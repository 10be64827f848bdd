// Copyright 2026 The dtensor Authors.
//
// tests/support/collective_cases.h: backend-agnostic checks of every
// collective, with exact expected values.
//
// Each function runs on every rank of `comm` (SPMD) and reports through
// GoogleTest's EXPECT macros, so the same cases serve the local backend
// (inside run_ranks), MPI (under mpirun) and NCCL (CUDA tensors on
// comm.device()). Data is small integers so that every dtype, bfloat16
// included, holds every expected value exactly. Cases cover uneven and empty
// parts, 0-dim tensors and trailing dims.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

#include <dtensor/mesh/communicator.h>

namespace dtensor::testing {

// The dtypes every collective is checked with.
const std::vector<c10::ScalarType>& collective_test_dtypes();

void check_all_reduce(Communicator& comm, c10::ScalarType dtype);
// all_reduce(input, output): the input unchanged, output == input allowed.
void check_all_reduce_out_of_place(Communicator& comm, c10::ScalarType dtype);
void check_bitwise_all_reduce(Communicator& comm);
// Complex sums and averages (all_reduce, reduce_scatter(_v)) reduce the real
// and imaginary parts; max is refused.
void check_complex_reductions(Communicator& comm);
void check_all_gather(Communicator& comm, c10::ScalarType dtype);
void check_all_gather_v(Communicator& comm, c10::ScalarType dtype);
// all_gather_v along dims 0, 1 and 2: parts land in strided places.
void check_all_gather_v_along(Communicator& comm, c10::ScalarType dtype);
void check_reduce_scatter(Communicator& comm, c10::ScalarType dtype);
void check_reduce_scatter_v(Communicator& comm, c10::ScalarType dtype);
void check_all_to_all(Communicator& comm, c10::ScalarType dtype);
void check_all_to_all_v(Communicator& comm, c10::ScalarType dtype);
// all_to_all_v cut along dims: one dim both ways, and S(a) -> S(b) and back,
// small and large (large_all_to_all_v_across_dims).
void check_all_to_all_v_along(Communicator& comm, c10::ScalarType dtype);
// The large S(0) -> S(2) case of check_all_to_all_v_along on `n` ranks
// (uneven, with empty parts; then S(2) -> S(0) back): the whole tensor's
// bytes, and its shortest non-empty column block's rows, in bytes. Run on
// groups of up to 4 ranks only (zeros for larger ones).
struct LargeAcrossDimsCase {
  int64_t bytes = 0;
  int64_t row_bytes = 0;
};
LargeAcrossDimsCase large_all_to_all_v_across_dims(int n, c10::ScalarType dtype);
void check_exchange(Communicator& comm, c10::ScalarType dtype);
void check_broadcast(Communicator& comm, c10::ScalarType dtype);
void check_scatter(Communicator& comm, c10::ScalarType dtype);
// Ring exchange with send/recv (tag 0); needs size() >= 2 to exchange.
void check_send_recv(Communicator& comm, c10::ScalarType dtype);
void check_split(Communicator& comm);
// Bad arguments, the same on every rank: every rank throws dtensor::Error
// with a message naming the problem, and the communicator stays usable.
void check_bad_arguments_throw(Communicator& comm);

// All of the above, for every dtype.
void run_all_collective_cases(Communicator& comm);

}  // namespace dtensor::testing
