// Copyright 2026 The dtensor Authors.
//
// dtensor/redistribute/row_exchange.h (<dtensor/redistribute/row_exchange.h>):
// moving rows between the ranks of one mesh dim with counts known only at
// run time, for the layers above that must do so without a DTensor layout.
//
// An MoE's token dispatch sends each rank the rows routed to its experts: no
// placement holds "the rows rank q sends rank p" for every pair, so this is
// not a redistribute between two specs. It is still one collective of this
// layer's, counted by CollectiveCounter like every redistribute step.
//
//   at::Tensor theirs = dtensor::exchange_rows(mine, mesh, mesh.dim_index("ep"), send, recv);
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/mesh/device_mesh.h>

namespace dtensor {

// The rows the calling rank receives over mesh dim `mesh_dim` when it sends
// the `send_rows[p]` rows of `rows` that follow those for ranks before p to
// rank p and receives `recv_rows[q]` from rank q, in rank order: one
// all_to_all_v. The counts must match across ranks (send_rows[p] on q is
// recv_rows[q] on p); the communicator checks the local ones.
at::Tensor exchange_rows(const at::Tensor& rows, const DeviceMesh& mesh, int64_t mesh_dim,
                         const std::vector<int64_t>& send_rows,
                         const std::vector<int64_t>& recv_rows);

// Block p of `blocks` (int64, [ranks of `mesh_dim`, k], on the CPU) goes to
// rank p; block q of the result (likewise shaped, on the CPU) came from rank
// q: one all_to_all on the mesh's device, for exchanging small counts.
at::Tensor exchange_blocks(const at::Tensor& blocks, const DeviceMesh& mesh, int64_t mesh_dim);

}  // namespace dtensor
