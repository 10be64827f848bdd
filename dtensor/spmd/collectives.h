// Copyright 2026 The dtensor Authors.
//
// dtensor/spmd/collectives.h: differentiable collectives on local tensors,
// typed by the local SPMD types of their input and output.
//
// In per-rank code (inside local_map, or a hand-written tensor-parallel
// block), every local tensor has, per mesh dim, one of four types (issue 21,
// after JAX's shard_map and PyTorch's local SPMD types):
//   V  Varying:   values differ across ranks (a shard, locally).
//   P  Partial:   a pending sum: the value is the sum over the ranks.
//   I  Invariant: the same value on every rank, and so is its gradient.
//   R  Replicate: the same value on every rank, and its gradient is Partial
//                 (each rank holds one term: a replicated weight).
// Gradients have the dual type: V <-> V, I <-> I, R <-> P. A collective from
// type A to type B therefore has a backward from dual(B) to dual(A), and that
// fixes it; no backward here is written by hand:
//
//   forward                      backward (on the gradient)
//   all_reduce      P -> R       P -> R: all_reduce
//   all_reduce      P -> I       I -> R: nothing (the gradient of every term
//                                is the whole gradient: Megatron's g)
//   all_gather      S(d) -> R    P -> S(d): reduce_scatter
//   all_gather      S(d) -> I    I -> S(d): this rank's slice, no communication
//   reduce_scatter  P -> S(d)    S(d) -> R: all_gather
//   invariant_to_replicate I->R  P -> I: all_reduce (Megatron's f)
//   replicate_to_invariant R->I  I -> P: exact, no communication: coordinate
//                                0 keeps the gradient, the others hold zeros
//   all_to_all      V -> V       V -> V: all_to_all with the dims swapped
//   all_to_all_v    V -> V       V -> V: all_to_all_v with the splits swapped
//
// all_reduce and reduce_scatter also take a Varying value as each rank's
// term of the sum (the local product of a row-parallel matmul, V times V,
// is V): their result and backward are the same.
//
// Each but all_to_all_v runs as a redistribute of the local tensor read as a
// DTensor over the one mesh dim `dim` (from_local, redistribute, to_local),
// so its collective is planned, counted by CollectiveCounter and shown by
// explain like any other, and the backward is that of the layout functions
// with the gradient layouts above. all_to_all_v moves rows whose counts come
// from the data (MoE token routing): no placement holds "the rows rank q
// sends rank p" for every pair, so it runs redistribute's exchange_rows
// (dtensor/redistribute/row_exchange.h), counted alike, and its backward is
// the same call with the splits swapped (the dual of V -> V).
//
// A Megatron tensor-parallel MLP, x Invariant over "tp", w1 split by
// columns and w2 by rows (Varying):
//
//   at::Tensor h = at::relu(at::mm(spmd::invariant_to_replicate(x, mesh, "tp"), w1));
//   at::Tensor y = spmd::all_reduce(at::mm(h, w2), mesh, "tp",
//                                   spmd::ReplicatedType::kInvariant);
//
// Sequence parallel: x split along the sequence (dim 0), gathered in and
// reduce-scattered out:
//
//   at::Tensor full = spmd::all_gather(x, mesh, "tp", 0, spmd::ReplicatedType::kReplicate);
//   at::Tensor y = spmd::reduce_scatter(at::mm(at::relu(at::mm(full, w1)), w2), mesh, "tp", 0);
//
// Expert-parallel MoE dispatch: each rank sends the rows of `tokens` (sorted
// by destination rank) to the ranks holding their experts, and the results
// come back the same way:
//
//   std::vector<int64_t> recv = spmd::exchange_split_sizes(tokens, send, mesh, "ep");
//   // (one count per rank; examples/moe passes one per expert)
//   at::Tensor mine = spmd::all_to_all_v(tokens, mesh, "ep", send, recv);
//   at::Tensor back = spmd::all_to_all_v(experts(mine), mesh, "ep", recv, send);
//
// Every call is collective over `dim`'s group: each rank of it makes the
// same call. `dim` names a dim of `mesh`; other mesh dims play no part.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/mesh/device_mesh.h>

namespace dtensor::spmd {

// The type of a collective's result that is the same on every rank: whether
// its gradient is Partial (kReplicate) or the same on every rank (kInvariant).
enum class ReplicatedType { kReplicate, kInvariant };

// P -> R or I: the sum of every rank's `x` over mesh dim `dim`.
at::Tensor all_reduce(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                      ReplicatedType dst);

// S(gather_dim) -> R or I: every rank's `x` concatenated along `gather_dim`
// in rank order. Every rank's `x` has the same shape (as NCCL's all-gather).
at::Tensor all_gather(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                      int64_t gather_dim, ReplicatedType dst);

// P -> S(scatter_dim): this rank's torch.chunk piece along `scatter_dim` of
// the sum of every rank's `x`. A size not divisible by the group gives
// torch.chunk's uneven pieces (5 rows over 4 ranks: 2, 2, 1, 0).
at::Tensor reduce_scatter(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                          int64_t scatter_dim);

// I -> R: `x` itself; the backward all-reduces the gradient.
at::Tensor invariant_to_replicate(const at::Tensor& x, const DeviceMesh& mesh,
                                  std::string_view dim);

// R -> I: `x` itself; the backward keeps the gradient on coordinate 0 of
// `dim` and zeros on the others, so that it sums to the gradient once.
at::Tensor replicate_to_invariant(const at::Tensor& x, const DeviceMesh& mesh,
                                  std::string_view dim);

// V -> V: this rank cuts `x` along `split_dim` into as many equal pieces as
// `dim` has ranks, sends piece p to rank p, and concatenates the pieces it
// receives along `concat_dim` in rank order (JAX's all_to_all). With
// split_dim != concat_dim it is the redistribute S(concat_dim) ->
// S(split_dim) of the tensor every rank's `x` concatenate into; with them
// equal, S(d) -> StridedShard(d, ranks). Every rank's `x` has the same shape,
// and x.size(split_dim) divides by the number of ranks.
at::Tensor all_to_all(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                      int64_t split_dim, int64_t concat_dim);

// V -> V along dim 0 with counts known at run time: this rank sends the
// `send_splits[p]` rows of `x` that follow those for ranks before p to rank
// p, and returns the rows received, `recv_splits[q]` from rank q, in rank
// order. send_splits[p] on rank q must equal recv_splits[q] on rank p
// (exchange_split_sizes computes them); every rank's `x` has the same dtype
// and the same shape past dim 0. One all_to_all_v forward, one backward.
at::Tensor all_to_all_v(const at::Tensor& x, const DeviceMesh& mesh, std::string_view dim,
                        std::vector<int64_t> send_splits, std::vector<int64_t> recv_splits);

// The `recv_splits` of all_to_all_v for this rank when every rank of `dim`
// passes its own `x` and `send_splits`: entry q is what rank q sends here.
// `send_splits` may also hold g > 1 counts per rank, the rows for rank p
// being entries [p g, (p + 1) g) (an MoE's rows per expert, E/n experts per
// rank); then entries [q g, (q + 1) g) of the result are rank q's for this
// rank, and all_to_all_v takes the per-rank sums. One small all_to_all of
// int64 counts, which also checks that every rank's `x` has the same dtype
// and row shape (an error on every rank otherwise, before any rows move).
std::vector<int64_t> exchange_split_sizes(const at::Tensor& x,
                                          const std::vector<int64_t>& send_splits,
                                          const DeviceMesh& mesh, std::string_view dim);

}  // namespace dtensor::spmd
