// Copyright 2026 The dtensor Authors.
#include <dtensor/redistribute/row_exchange.h>

#include <numeric>

#include <ATen/ATen.h>

#include <dtensor/base/buffer_pool.h>
#include <dtensor/mesh/communicator.h>
#include <dtensor/redistribute/collective_counter.h>

namespace dtensor {

at::Tensor exchange_rows(const at::Tensor& rows, const DeviceMesh& mesh, int64_t mesh_dim,
                         const std::vector<int64_t>& send_rows,
                         const std::vector<int64_t>& recv_rows) {
  std::vector<int64_t> shape = rows.sizes().vec();
  shape[0] = std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0});
  const at::Tensor input = pooled_contiguous(rows);
  at::Tensor output = pooled_empty(shape, input.options());
  mesh.communicator(mesh_dim)->all_to_all_v(input, send_rows, output, recv_rows);
  CollectiveCounter::record("all_to_all_v", input);
  return output;
}

at::Tensor exchange_blocks(const at::Tensor& blocks, const DeviceMesh& mesh, int64_t mesh_dim) {
  const at::Tensor input = pooled_contiguous(blocks).to(mesh.device());
  at::Tensor output = pooled_empty(input.sizes(), input.options());
  mesh.communicator(mesh_dim)->all_to_all(input, output);
  CollectiveCounter::record("all_to_all", input);
  return output.cpu();
}

}  // namespace dtensor
