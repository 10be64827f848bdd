// Copyright 2026 The dtensor Authors.
#include <dtensor/redistribute/cross_step.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include <dtensor/mesh/device_mesh.h>

namespace dtensor::redistribute_internal {
namespace {

// A set of indices as sorted, disjoint [begin, end) runs.
using Runs = std::vector<std::pair<int64_t, int64_t>>;

Runs runs_of(const std::vector<int64_t>& list) {
  std::vector<int64_t> sorted;
  const std::vector<int64_t>* ordered = &list;
  if (!std::is_sorted(list.begin(), list.end())) {
    sorted = list;
    std::sort(sorted.begin(), sorted.end());
    ordered = &sorted;
  }
  Runs runs;
  for (int64_t index : *ordered) {
    if (!runs.empty() && runs.back().second == index) {
      ++runs.back().second;
    } else {
      runs.emplace_back(index, index + 1);
    }
  }
  return runs;
}

Runs intersect(const Runs& a, const Runs& b) {
  Runs common;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    const int64_t begin = std::max(a[i].first, b[j].first);
    const int64_t end = std::min(a[i].second, b[j].second);
    if (begin < end) common.emplace_back(begin, end);
    (a[i].second < b[j].second ? i : j)++;
  }
  return common;
}

// The union of two runs lists.
Runs unite(const Runs& a, const Runs& b) {
  Runs all(a);
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  Runs merged;
  for (const auto& run : all) {
    if (!merged.empty() && run.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, run.second);
    } else {
      merged.push_back(run);
    }
  }
  return merged;
}

int64_t count(const Runs& runs) {
  int64_t n = 0;
  for (const auto& [begin, end] : runs) n += end - begin;
  return n;
}

// One runs list per tensor dim: a layout's index lists, or a piece of one.
using Box = std::vector<Runs>;

std::optional<Box> box_of_layout(const LocalLayout& layout) {
  if (layout.merged_leading_dims > 1) return std::nullopt;
  Box box;
  for (const std::vector<int64_t>& list : layout.global_indices()) box.push_back(runs_of(list));
  return box;
}

Box intersect(const Box& a, const Box& b) {
  Box common;
  for (size_t d = 0; d < a.size(); ++d) common.push_back(intersect(a[d], b[d]));
  return common;
}

int64_t volume(const Box& box) {
  int64_t n = 1;
  for (const Runs& runs : box) n *= count(runs);
  return n;
}

bool disjoint(const Box& a, const Box& b) {
  for (size_t d = 0; d < a.size(); ++d) {
    if (intersect(a[d], b[d]).empty()) return true;
  }
  return false;
}

// Whether no two of `pieces` share an element.
bool pairwise_disjoint(const std::vector<Box>& pieces) {
  for (size_t p = 0; p < pieces.size(); ++p) {
    for (size_t q = p + 1; q < pieces.size(); ++q) {
      if (!disjoint(pieces[p], pieces[q])) return false;
    }
  }
  return true;
}

}  // namespace

std::optional<GroupExchange> exact_group_exchange(const DTensorSpec& from, const DTensorSpec& to,
                                                  int64_t first, int64_t last) {
  const std::vector<int64_t>& mesh_shape = from.mesh().shape();
  const std::vector<int64_t> group_shape(mesh_shape.begin() + first, mesh_shape.begin() + last + 1);
  const int64_t ranks = from.mesh().size();
  // By flat rank, made on first use; nullopt for a layout merging dims.
  std::vector<std::optional<Box>> held(ranks);
  std::vector<char> made(ranks, 0);
  GroupExchange exchange;
  std::vector<int64_t> sent(ranks, 0), sent_to(ranks, 0);
  for (int64_t rank = 0; rank < ranks; ++rank) {
    std::vector<int64_t> coordinate = grid_coordinate(rank, mesh_shape);
    const LocalLayout wanted_layout = to.layout_at(coordinate);
    const std::optional<Box> wanted = box_of_layout(wanted_layout);
    if (!wanted) return std::nullopt;
    std::vector<Box> pieces;
    int64_t covered = 0, received = 0, peers = 0, own = 0;
    bool merged = false;
    for_each_grid_coordinate(group_shape, [&](const std::vector<int64_t>& member) {
      std::copy(member.begin(), member.end(), coordinate.begin() + first);
      const int64_t flat = grid_position(coordinate, mesh_shape);
      if (!made[flat]) {
        held[flat] = box_of_layout(from.layout_at(coordinate));
        made[flat] = 1;
      }
      if (!held[flat]) {
        merged = true;
        return;
      }
      Box piece = intersect(*held[flat], *wanted);
      const int64_t n = volume(piece);
      if (n == 0) return;
      covered += n;
      if (flat == rank) {
        own = n;
      } else {
        received += n;
        ++peers;
        sent[flat] += n;
        ++sent_to[flat];
      }
      pieces.push_back(std::move(piece));
    });
    if (merged || covered != wanted_layout.local_numel() || !pairwise_disjoint(pieces)) {
      return std::nullopt;
    }
    exchange.max_bytes = std::max(exchange.max_bytes, received);
    exchange.max_own_bytes = std::max(exchange.max_own_bytes, own);
    exchange.max_peers = std::max(exchange.max_peers, peers);
  }
  exchange.max_bytes = std::max(exchange.max_bytes, *std::max_element(sent.begin(), sent.end()));
  exchange.max_peers =
      std::max(exchange.max_peers, *std::max_element(sent_to.begin(), sent_to.end()));
  const auto element = static_cast<int64_t>(c10::elementSize(from.dtype()));
  exchange.max_bytes *= element;
  exchange.max_own_bytes *= element;
  exchange.rank0_sent_bytes = sent[0] * element;
  return exchange;
}

bool groups_hold_their_targets(const DTensorSpec& from, const DTensorSpec& to, int64_t first,
                               int64_t last, int64_t dim) {
  const std::vector<int64_t>& mesh_shape = from.mesh().shape();
  const int64_t ranks = from.mesh().size();
  std::map<std::vector<int64_t>, Runs> held;  // group -> indices of `dim` it holds
  std::vector<Runs> wanted(ranks);
  std::vector<std::vector<int64_t>> group_of(ranks);
  for (int64_t rank = 0; rank < ranks; ++rank) {
    std::vector<int64_t> coordinate = grid_coordinate(rank, mesh_shape);
    const LocalLayout before = from.layout_at(coordinate);
    const LocalLayout after = to.layout_at(coordinate);
    if (before.merged_leading_dims > 1 || after.merged_leading_dims > 1) return false;
    const std::vector<std::vector<int64_t>>& have = before.global_indices();
    const std::vector<std::vector<int64_t>>& want = after.global_indices();
    if (want.size() != have.size()) return false;
    for (size_t d = 0; d < want.size(); ++d) {
      if (static_cast<int64_t>(d) != dim && want[d] != have[d]) return false;
    }
    std::fill(coordinate.begin() + first, coordinate.begin() + last + 1, 0);
    Runs& group = held[coordinate];
    group = unite(group, runs_of(have[dim]));
    wanted[rank] = runs_of(want[dim]);
    group_of[rank] = std::move(coordinate);
  }
  for (int64_t rank = 0; rank < ranks; ++rank) {
    if (count(intersect(wanted[rank], held[group_of[rank]])) != count(wanted[rank])) return false;
  }
  return true;
}

}  // namespace dtensor::redistribute_internal
