// Copyright 2026 The dtensor Authors.
#include <dtensor/checkpoint/checkpoint.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include <dtensor/base/check.h>
#include <dtensor/checkpoint/files.h>
#include <dtensor/checkpoint/safetensors.h>
#include <dtensor/dtensor.h>
#include <dtensor/placements/placements.h>

namespace dtensor::checkpoint {
namespace {

using Shape = std::vector<int64_t>;
using IndexLists = std::vector<std::vector<int64_t>>;

constexpr const char* kIndexFile = "index.json";
constexpr const char* kFormat = "dtensor-checkpoint";
// A Hugging Face model directory: one file, or several and their index.
constexpr const char* kHfSingleFile = "model.safetensors";
constexpr const char* kHfIndexFile = "model.safetensors.index.json";

// ---------------------------------------------------------------------------
// Boxes: the parts of a global tensor one rank holds, as runs of consecutive
// global indices at consecutive local positions.

// `length` consecutive global indices from `global`, held at consecutive
// local positions from `local`.
struct Run {
  int64_t local;
  int64_t global;
  int64_t length;
};

// The first of `indices` when they are consecutive from it (a Shard's or
// Replicate's dim, and every dim of a plain tensor), else nothing.
std::optional<int64_t> consecutive_from(const std::vector<int64_t>& indices) {
  for (size_t j = 1; j < indices.size(); ++j) {
    if (indices[j] != indices[0] + static_cast<int64_t>(j)) return std::nullopt;
  }
  return indices.empty() ? 0 : indices[0];
}

// One dim's global indices in local order, with consecutive_from of them
// found once: a dim met by many boxes is then met by each in one step.
struct DimIndices {
  explicit DimIndices(const std::vector<int64_t>& list)
      : indices(&list), first(consecutive_from(list)) {}
  const std::vector<int64_t>* indices;
  std::optional<int64_t> first;
};

// The runs of `dim`'s indices that fall in [begin, end): at most one, found
// without visiting the indices, when they are consecutive.
std::vector<Run> runs_within(const DimIndices& dim, int64_t begin, int64_t end) {
  const std::vector<int64_t>& indices = *dim.indices;
  if (dim.first) {
    const int64_t low = std::max(*dim.first, begin);
    const int64_t high = std::min(*dim.first + static_cast<int64_t>(indices.size()), end);
    if (low >= high) return {};
    return {{low - *dim.first, low, high - low}};
  }
  std::vector<Run> runs;
  for (int64_t j = 0; j < static_cast<int64_t>(indices.size()); ++j) {
    const int64_t g = indices[j];
    if (g < begin || g >= end) continue;
    if (!runs.empty() && runs.back().local + runs.back().length == j &&
        runs.back().global + runs.back().length == g) {
      ++runs.back().length;
    } else {
      runs.push_back({j, g, 1});
    }
  }
  return runs;
}

// Calls `visit` with one run per dim for every combination of `runs` (once,
// with no runs, for a 0-dim tensor; never when a dim has none).
void for_each_region(const std::vector<std::vector<Run>>& runs,
                     const std::function<void(const std::vector<Run>&)>& visit) {
  for (const std::vector<Run>& dim : runs) {
    if (dim.empty()) return;
  }
  std::vector<size_t> pick(runs.size(), 0);
  std::vector<Run> region(runs.size());
  while (true) {
    for (size_t d = 0; d < runs.size(); ++d) region[d] = runs[d][pick[d]];
    visit(region);
    size_t d = runs.size();
    while (d > 0 && ++pick[d - 1] == runs[d - 1].size()) pick[--d] = 0;
    if (d == 0) return;
  }
}

// A box of a global tensor that `rank` writes, and where it starts in that
// rank's local shard.
struct OwnedBox {
  int64_t rank;
  Shape offsets;
  Shape sizes;
  Shape local_starts;
};

// The boxes a shard with global `indices` (per dim, in local order) holds.
void append_boxes(const IndexLists& indices, int64_t rank, std::vector<OwnedBox>& boxes) {
  std::vector<std::vector<Run>> runs;
  for (const std::vector<int64_t>& dim : indices) {
    runs.push_back(runs_within(DimIndices(dim), 0, std::numeric_limits<int64_t>::max()));
  }
  for_each_region(runs, [&](const std::vector<Run>& region) {
    OwnedBox box{rank, {}, {}, {}};
    for (const Run& run : region) {
      box.offsets.push_back(run.global);
      box.sizes.push_back(run.length);
      box.local_starts.push_back(run.local);
    }
    boxes.push_back(std::move(box));
  });
}

// Every index of a dim of `size`.
std::vector<int64_t> every_index(int64_t size) {
  std::vector<int64_t> indices(size);
  for (int64_t i = 0; i < size; ++i) indices[i] = i;
  return indices;
}

int64_t numel_of(const Shape& shape) {
  int64_t numel = 1;
  for (const int64_t size : shape) numel *= size;
  return numel;
}

IndexLists whole_tensor(const Shape& shape) {
  IndexLists indices;
  for (const int64_t size : shape) indices.push_back(every_index(size));
  return indices;
}

// The boxes of the DTensor of `spec` (no Partial, no merged dims) and who
// writes each: ranks holding the same elements are one group, and the
// tensor's `position` in the state picks the group's writer, spreading the
// writing of replicated tensors over the replicas.
std::vector<OwnedBox> dtensor_boxes(const DTensorSpec& spec, size_t position) {
  std::map<IndexLists, std::vector<int64_t>> holders;
  std::vector<const IndexLists*> order;
  for_each_grid_coordinate(spec.mesh().shape(), [&](const std::vector<int64_t>& coordinate) {
    const LocalLayout layout = spec.layout_at(coordinate);
    auto [it, inserted] = holders.try_emplace(layout.global_indices());
    if (inserted) order.push_back(&it->first);
    it->second.push_back(spec.mesh().rank_at(coordinate));
  });
  std::vector<OwnedBox> boxes;
  for (const IndexLists* indices : order) {
    const std::vector<int64_t>& ranks = holders.at(*indices);
    append_boxes(*indices, ranks[position % ranks.size()], boxes);
  }
  return boxes;
}

// ---------------------------------------------------------------------------
// The ranks a checkpoint call runs on.

// The root of every DTensor's mesh as one 1-D mesh, or none for a state of
// plain tensors (the calling process alone).
struct World {
  std::optional<DeviceMesh> mesh;
  int64_t rank = 0;
  std::vector<int64_t> ranks = {0};
};

// The world ranks of `mesh`, sorted.
std::vector<int64_t> rank_set(const DeviceMesh& mesh) {
  std::vector<int64_t> ranks = mesh.ranks();
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

World world_of(const std::map<std::string, at::Tensor>& state) {
  World world;
  std::optional<DeviceMesh> root;
  for (const auto& [name, tensor] : state) {
    if (!is_dtensor(tensor)) continue;
    const DeviceMesh mesh_root = DTensor(tensor).mesh().root();
    if (!root) root = mesh_root;
    DTENSOR_CHECK(root->world() == mesh_root.world() && rank_set(*root) == rank_set(mesh_root),
                  "checkpoint: tensor \"", name, "\": expected a mesh over the ranks of ",
                  root->to_string(), " as the other DTensors', found one over ",
                  mesh_root.to_string());
  }
  if (!root) return world;
  world.mesh = root->ndim() == 1 ? *root : root->flatten("checkpoint");
  world.ranks = world.mesh->ranks();
  world.rank = world.mesh->rank_at(world.mesh->coordinate());
  return world;
}

// The sum of every rank's `value` (a barrier too).
int64_t sum_over_ranks(const World& world, int64_t value) {
  return world.mesh ? sum_over_mesh(*world.mesh, value) : value;
}

// Throws on every rank when any rank's `error` is set (its own message where
// it failed).
void check_every_rank(const World& world, const std::optional<std::string>& error,
                      const std::string& step) {
  const int64_t failed = sum_over_ranks(world, error ? 1 : 0);
  if (failed == 0) return;
  DTENSOR_CHECK(false, "checkpoint::save: ", step, " failed on ", failed, " rank(s)",
                error ? ", here: " + *error : std::string());
}

// Runs `step`, returning its error message instead of throwing.
std::optional<std::string> attempt(const std::function<void()>& step) {
  try {
    step();
  } catch (const std::exception& error) {
    return std::string(error.what());
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Save.

// One tensor as it is saved: its local data (Partial reduced) and its boxes.
struct SaveItem {
  std::string name;
  at::Tensor local;
  Shape shape;
  c10::ScalarType dtype;
  std::vector<OwnedBox> boxes;
};

// `placements` with Partial and dims-merging Ragged placements made
// Replicate: what a DTensor is saved (and read) as.
std::vector<PlacementPtr> saved_placements(const std::vector<PlacementPtr>& placements) {
  std::vector<PlacementPtr> saved;
  for (const PlacementPtr& p : placements) {
    saved.push_back(p->is_partial() || p->merged_leading_dims() > 1 ? Replicate::make() : p);
  }
  return saved;
}

SaveItem save_item(const std::string& name, const at::Tensor& tensor, size_t position,
                   const World& world) {
  if (!is_dtensor(tensor)) {
    SaveItem item{name, tensor, tensor.sizes().vec(), tensor.scalar_type(), {}};
    append_boxes(whole_tensor(item.shape), world.ranks[position % world.ranks.size()], item.boxes);
    return item;
  }
  DTensor dtensor(tensor);
  const std::vector<PlacementPtr> placements = saved_placements(dtensor.placements());
  if (!same_placements(placements, dtensor.placements()))
    dtensor = dtensor.redistribute(placements);
  return {name, dtensor.to_local(), dtensor.sizes(), dtensor.dtype(),
          dtensor_boxes(dtensor.spec(), position)};
}

std::string rank_file(int64_t rank) {
  char name[64];
  std::snprintf(name, sizeof(name), "rank-%05lld.safetensors", static_cast<long long>(rank));
  return name;
}

std::string entry_name(const std::string& tensor, size_t box) {
  return tensor + "@" + std::to_string(box);
}

// The boxes `rank` writes, as slices of its local shards.
std::vector<std::pair<std::string, at::Tensor>> rank_entries(const std::vector<SaveItem>& items,
                                                             int64_t rank) {
  std::vector<std::pair<std::string, at::Tensor>> entries;
  for (const SaveItem& item : items) {
    for (size_t k = 0; k < item.boxes.size(); ++k) {
      const OwnedBox& box = item.boxes[k];
      if (box.rank != rank) continue;
      at::Tensor slice = item.local;
      for (size_t d = 0; d < box.sizes.size(); ++d) {
        slice = slice.narrow(static_cast<int64_t>(d), box.local_starts[d], box.sizes[d]);
      }
      entries.emplace_back(entry_name(item.name, k), slice);
    }
  }
  return entries;
}

nlohmann::json index_json(const std::vector<SaveItem>& items) {
  nlohmann::json tensors = nlohmann::json::object();
  for (const SaveItem& item : items) {
    nlohmann::json boxes = nlohmann::json::array();
    for (size_t k = 0; k < item.boxes.size(); ++k) {
      const OwnedBox& box = item.boxes[k];
      boxes.push_back({{"file", rank_file(box.rank)},
                       {"entry", entry_name(item.name, k)},
                       {"offsets", box.offsets},
                       {"sizes", box.sizes}});
    }
    tensors[item.name] = {
        {"shape", item.shape}, {"dtype", safetensors_dtype_name(item.dtype)}, {"boxes", boxes}};
  }
  return {{"format", kFormat}, {"version", 1}, {"tensors", tensors}};
}

void write_text(const std::string& path, const std::string& text) {
  OutputFile file(path);
  file.write(text.data(), static_cast<int64_t>(text.size()));
  file.close();
}

// Runs `write_shard` here while a second thread writes `text` to `path`:
// each waits for its file's fsync, and the leader's save is shorter by the
// index's (~0.24 ms of a 1 MiB save of 4 ranks here). Throws the shard's
// failure, else the index's, once both are done.
void write_beside(const std::function<void()>& write_shard, const std::string& path,
                  const std::string& text) {
  std::exception_ptr index_failure;
  std::thread index_writer([&] {
    try {
      write_text(path, text);
    } catch (...) {
      index_failure = std::current_exception();
    }
  });
  try {
    write_shard();
  } catch (...) {
    index_writer.join();
    throw;
  }
  index_writer.join();
  if (index_failure) std::rethrow_exception(index_failure);
}

// The temporary directories of the saves this process has begun and not
// finished: async saves to one directory overlap (save step k+1 starts before
// step k's handle is waited for), and cleaning up must not take theirs.
class SavesInFlight {
 public:
  static SavesInFlight& instance() {
    static auto* saves = new SavesInFlight();  // outlives every handle
    return *saves;
  }
  void add(const std::string& tmp) {
    const std::lock_guard<std::mutex> lock(mutex_);
    paths_.insert(tmp);
  }
  void remove(const std::string& tmp) {
    const std::lock_guard<std::mutex> lock(mutex_);
    paths_.erase(tmp);
  }
  bool contains(const std::string& path) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return paths_.count(path) != 0;
  }

 private:
  mutable std::mutex mutex_;
  std::set<std::string> paths_;
};

// Whether `entry` is `name` + `marker` + digits: a save's temporary or
// moved-aside directory, not a user's `name.old-backup`.
bool is_save_leftover(const std::string& entry, const std::string& name, const char* marker) {
  const std::string prefix = name + marker;
  return entry.size() > prefix.size() && entry.compare(0, prefix.size(), prefix) == 0 &&
         std::all_of(entry.begin() + static_cast<std::ptrdiff_t>(prefix.size()), entry.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// What saves to `dir` that were killed left beside it: their temporary
// directories (`dir.tmp-<id>`) and older checkpoints moved aside
// (`dir.old-<id>`), not those of saves still running. Best effort: the new
// checkpoint is in place already, and a leftover that cannot be removed
// (another user's, or one a concurrent cleanup took) stays.
void remove_leftovers(const std::string& dir) {
  const std::string parent = parent_directory(dir);
  const std::string name = dir.substr(dir.find_last_of('/') + 1);
  try {
    for (const std::string& entry : directory_entries(parent)) {
      const std::string path = join_path(parent, entry);
      if ((is_save_leftover(entry, name, ".tmp-") || is_save_leftover(entry, name, ".old-")) &&
          !SavesInFlight::instance().contains(path)) {
        remove_tree(path);
      }
    }
  } catch (const Error& error) {
    std::cerr << "dtensor::checkpoint: leftovers of earlier saves beside " << dir
              << " not removed: " << error.what() << std::endl;
  }
}

// Moves the finished `tmp` to `dir`. An older checkpoint there is swapped
// with it in one step, or where the file system cannot, moved aside first;
// it is removed last, so `dir` always holds a whole checkpoint. Then the
// leftovers of killed saves to `dir` go.
void publish(const std::string& tmp, const std::string& dir, int64_t id) {
  const std::string parent = parent_directory(dir);
  if (!path_exists(dir)) {
    rename_path(tmp, dir);
  } else if (!exchange_paths(tmp, dir)) {
    const std::string old = dir + ".old-" + std::to_string(id);
    rename_path(dir, old);
    rename_path(tmp, dir);
  }
  sync_directory(parent);
  remove_leftovers(dir);
}

std::string temporary_directory(const std::string& target, int64_t id) {
  return target + ".tmp-" + std::to_string(id);
}

// A number naming this save's temporary directory.
int64_t fresh_id() {
  static std::atomic<int64_t> count{0};
  const int64_t now = std::chrono::system_clock::now().time_since_epoch().count();
  return ((now ^ (static_cast<int64_t>(::getpid()) << 20)) + count++) & ((int64_t{1} << 62) - 1);
}

// ---------------------------------------------------------------------------
// Load.

// What a checkpoint holds: per tensor, its boxes, in files under `dir`.
struct Source {
  std::string dir;
  std::map<std::string, SavedTensor> tensors;
};

Shape json_sizes(const nlohmann::json& value, const std::string& where) {
  DTENSOR_CHECK(value.is_array(), where, ": expected a list of integers >= 0, found ",
                value.dump());
  Shape sizes;
  for (const nlohmann::json& size : value) {
    DTENSOR_CHECK(size.is_number_integer() && size.get<int64_t>() >= 0, where,
                  ": expected a list of integers >= 0, found ", value.dump());
    sizes.push_back(size.get<int64_t>());
  }
  return sizes;
}

std::string json_string(const nlohmann::json& object, const char* key, const std::string& where) {
  DTENSOR_CHECK(object.is_object() && object.contains(key) && object[key].is_string(), where,
                ": expected a string \"", key, "\", found ", object.dump());
  return object[key].get<std::string>();
}

const nlohmann::json& json_member(const nlohmann::json& object, const char* key,
                                  const std::string& where) {
  DTENSOR_CHECK(object.is_object() && object.contains(key), where, ": expected a member \"", key,
                "\", found ", object.dump());
  return object[key];
}

SavedBox parse_box(const nlohmann::json& value, const Shape& shape, const std::string& where) {
  SavedBox box{json_string(value, "file", where), json_string(value, "entry", where),
               json_sizes(json_member(value, "offsets", where), where + ": \"offsets\""),
               json_sizes(json_member(value, "sizes", where), where + ": \"sizes\"")};
  DTENSOR_CHECK(box.file.find('/') == std::string::npos, where, ": expected a file name, found \"",
                box.file, "\"");
  DTENSOR_CHECK(box.offsets.size() == shape.size() && box.sizes.size() == shape.size(), where,
                ": expected ", shape.size(), " offsets and sizes, found ", box.offsets.size(),
                " and ", box.sizes.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    DTENSOR_CHECK(box.offsets[d] + box.sizes[d] <= shape[d], where, ": dim ", d, ": box [",
                  box.offsets[d], ", ", box.offsets[d] + box.sizes[d], ") runs past the size ",
                  shape[d]);
  }
  return box;
}

// The JSON `text` of the file `path`, or a clear error.
nlohmann::json parse_json(const std::string& path, const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    DTENSOR_CHECK(false, "checkpoint: ", path, " is not valid JSON: ", error.what());
  }
  return {};
}

// The checkpoint in `dir` whose index.json holds `text`.
Source read_index(const std::string& dir, const std::string& text) {
  const std::string path = join_path(dir, kIndexFile);
  const nlohmann::json json = parse_json(path, text);
  const std::string where = "checkpoint: " + path;
  DTENSOR_CHECK(
      json.is_object() && json.value("format", "") == kFormat && json.value("version", 0) == 1,
      where, ": expected {\"format\": \"", kFormat, "\", \"version\": 1, ...}");
  const nlohmann::json& tensors = json_member(json, "tensors", where);
  DTENSOR_CHECK(tensors.is_object(), where, ": \"tensors\": expected an object, found ",
                tensors.type_name());
  Source source{dir, {}};
  for (const auto& [name, value] : tensors.items()) {
    const std::string tensor_where = where + ": tensor \"" + name + "\"";
    SavedTensor record;
    record.shape =
        json_sizes(json_member(value, "shape", tensor_where), tensor_where + ": \"shape\"");
    try {
      record.dtype = safetensors_dtype(json_string(value, "dtype", tensor_where));
    } catch (const Error& error) {
      DTENSOR_CHECK(false, tensor_where, ": ", error.what());
    }
    const nlohmann::json& boxes = json_member(value, "boxes", tensor_where);
    DTENSOR_CHECK(boxes.is_array(), tensor_where, ": \"boxes\": expected a list, found ",
                  boxes.dump());
    for (const nlohmann::json& box : boxes)
      record.boxes.push_back(parse_box(box, record.shape, tensor_where));
    source.tensors.emplace(name, std::move(record));
  }
  return source;
}

// The entries `names` of the safetensors file `file` in `source.dir` (every
// entry when `names` is null), each as one whole tensor.
void add_whole_tensors(Source& source, const std::string& file,
                       const std::set<std::string>* names) {
  const SafetensorsReader reader(join_path(source.dir, file));
  for (const auto& [name, entry] : reader.entries()) {
    if (names != nullptr && names->count(name) == 0) continue;
    source.tensors.emplace(
        name, SavedTensor{entry.shape,
                          entry.dtype,
                          {SavedBox{file, name, Shape(entry.shape.size(), 0), entry.shape}}});
  }
  if (names == nullptr) return;
  for (const std::string& name : *names) {
    DTENSOR_CHECK(source.tensors.count(name) == 1, "checkpoint: ", reader.path(), ": no tensor \"",
                  name, "\", which ", kHfIndexFile, " places there");
  }
}

// A Hugging Face sharded checkpoint: model.safetensors.index.json (`text`)
// has a "weight_map" that names the file of each tensor.
Source read_hf_index(const std::string& dir, const std::string& text) {
  const std::string path = join_path(dir, kHfIndexFile);
  const nlohmann::json json = parse_json(path, text);
  const std::string where = "checkpoint: " + path;
  const nlohmann::json& weight_map = json_member(json, "weight_map", where);
  DTENSOR_CHECK(weight_map.is_object(), where, ": \"weight_map\": expected an object, found ",
                weight_map.type_name());
  std::map<std::string, std::set<std::string>> files;
  for (const auto& [name, file] : weight_map.items()) {
    DTENSOR_CHECK(file.is_string() && file.get<std::string>().find('/') == std::string::npos, where,
                  ": \"", name, "\": expected a file name, found ", file.dump());
    files[file.get<std::string>()].insert(name);
  }
  Source source{dir, {}};
  for (const auto& [file, names] : files) add_whole_tensors(source, file, &names);
  return source;
}

// A checkpoint of `save` costs one open of its index, read whole (no stat
// first, no stream); the other kinds are looked for after.
Source read_source(const std::string& path) {
  if (!path.empty()) {
    if (const auto text = read_file_if_exists(join_path(path, kIndexFile)))
      return read_index(path, *text);
  }
  if (!is_directory(path)) {
    DTENSOR_CHECK(path_exists(path), "checkpoint: ", path, " does not exist");
    Source source{parent_directory(path), {}};
    add_whole_tensors(source, path.substr(path.find_last_of('/') + 1), nullptr);
    return source;
  }
  if (const auto text = read_file_if_exists(join_path(path, kHfIndexFile)))
    return read_hf_index(path, *text);
  DTENSOR_CHECK(path_exists(join_path(path, kHfSingleFile)),
                "checkpoint: expected a .safetensors file or a directory holding ", kIndexFile,
                ", ", kHfIndexFile, " or ", kHfSingleFile, ", found the directory ", path,
                " without any");
  Source source{path, {}};
  add_whole_tensors(source, kHfSingleFile, nullptr);
  return source;
}

// One tensor to fill: its local shard, and what is read for it. A layout
// that does not hold plain boxes of the tensor (Partial, Ragged merging
// dims) is read as it would be saved (saved_placements: its Replicate form,
// a whole region on every rank of those mesh dims) and laid out from there
// locally.
struct Target {
  std::string name;
  at::Tensor tensor;
  at::Tensor local;
  // The layout read, when it is not the tensor's own.
  DTensorSpecPtr read_as;
  // Which global index each index of what is read stands for.
  IndexLists indices;

  // The shape read.
  Shape read_shape() const {
    Shape shape;
    for (const std::vector<int64_t>& list : indices)
      shape.push_back(static_cast<int64_t>(list.size()));
    return shape;
  }
};

Target target_of(const std::string& name, const at::Tensor& tensor) {
  if (!is_dtensor(tensor))
    return {name, tensor, tensor, nullptr, whole_tensor(tensor.sizes().vec())};
  const DTensor dtensor(tensor);
  const std::vector<PlacementPtr> read = saved_placements(dtensor.placements());
  const DTensorSpecPtr read_as =
      same_placements(read, dtensor.placements())
          ? nullptr
          : std::make_shared<const DTensorSpec>(dtensor.spec().with_placements(read));
  const LocalLayout& layout = (read_as ? *read_as : dtensor.spec()).local_layout();
  return {name, tensor, dtensor.to_local(), read_as, layout.global_indices()};
}

// What `target`'s local shard becomes from `staged` (read as target.read_as
// says, when it says): from Replicate, so with no communication.
at::Tensor laid_out_as_target(const Target& target, const at::Tensor& staged) {
  if (!target.read_as) return staged;
  const DTensor tensor(target.tensor);
  return redistribute_any(DTensor(staged.to(tensor.mesh().device()), target.read_as),
                          tensor.placements())
      .to_local();
}

// Checks that `source` has `name` with `tensor`'s global shape and dtype.
const SavedTensor& matching_record(const Source& source, const std::string& name,
                                   const at::Tensor& tensor) {
  const auto found = source.tensors.find(name);
  DTENSOR_CHECK(found != source.tensors.end(), "checkpoint::load: ", source.dir, ": no tensor \"",
                name, "\" in the checkpoint");
  const SavedTensor& record = found->second;
  const Shape shape = is_dtensor(tensor) ? DTensor(tensor).sizes() : tensor.sizes().vec();
  DTENSOR_CHECK(record.shape == shape, "checkpoint::load: tensor \"", name,
                "\": expected the global shape ", c10::IntArrayRef(shape), ", found ",
                c10::IntArrayRef(record.shape), " in the checkpoint");
  DTENSOR_CHECK(record.dtype == tensor.scalar_type(), "checkpoint::load: tensor \"", name,
                "\": expected dtype ", tensor.scalar_type(), ", found ", record.dtype,
                " in the checkpoint");
  // Boxes are disjoint in a checkpoint, so covering the tensor is holding
  // as many elements as it has.
  int64_t held = 0;
  for (const SavedBox& box : record.boxes) held += numel_of(box.sizes);
  DTENSOR_CHECK(held == numel_of(record.shape), "checkpoint::load: tensor \"", name,
                "\": the checkpoint's ", record.boxes.size(), " boxes hold ", held,
                " elements, expected the tensor's ", numel_of(record.shape));
  return record;
}

// One box's part that a target needs: per dim, the runs of the box's indices
// the target holds.
struct Read {
  const SavedBox* box;
  std::vector<std::vector<Run>> runs;
};

// The reads that fill `target` from `record`, checked to cover every local
// element exactly once.
std::vector<Read> plan_reads(const Target& target, const SavedTensor& record) {
  const std::vector<DimIndices> dims(target.indices.begin(), target.indices.end());
  std::vector<Read> reads;
  int64_t covered = 0;
  for (const SavedBox& box : record.boxes) {
    Read read{&box, {}};
    int64_t count = 1;
    for (size_t d = 0; d < box.sizes.size(); ++d) {
      const int64_t begin = box.offsets[d];
      const int64_t end = begin + box.sizes[d];
      read.runs.push_back(runs_within(dims[d], begin, end));
      int64_t held = 0;
      for (const Run& run : read.runs.back()) held += run.length;
      count *= held;
    }
    if (count == 0) continue;
    covered += count;
    reads.push_back(std::move(read));
  }
  DTENSOR_CHECK(covered == numel_of(target.read_shape()), "checkpoint::load: tensor \"",
                target.name, "\": the checkpoint's ", record.boxes.size(), " boxes hold ", covered,
                " of the ", numel_of(target.read_shape()),
                " elements this rank needs (expected boxes covering the tensor once)");
  return reads;
}

// The open files of a source, each opened (its header read) on first use.
class Readers {
 public:
  explicit Readers(std::string dir) : dir_(std::move(dir)) {}
  const SafetensorsReader& open(const std::string& file) {
    auto found = readers_.find(file);
    if (found == readers_.end())
      found = readers_.emplace(file, SafetensorsReader(join_path(dir_, file))).first;
    return found->second;
  }

 private:
  std::string dir_;
  std::map<std::string, SafetensorsReader> readers_;
};

// Reads the part of `box` given by one run per dim into `destination`
// (contiguous, the runs' lengths, of `element`-byte elements), one pread per
// contiguous chunk of the file.
void read_region(const SafetensorsReader& reader, const SafetensorsEntry& entry,
                 const SavedBox& box, const std::vector<Run>& region, char* destination,
                 int64_t element) {
  const int64_t ndim = static_cast<int64_t>(region.size());
  if (ndim == 0) {
    reader.read(entry, 0, element, destination);
    return;
  }
  Shape strides(ndim, 1);
  for (int64_t d = ndim - 2; d >= 0; --d) strides[d] = strides[d + 1] * box.sizes[d + 1];
  // Dims after `outer` are read whole, so each chunk spans them and `outer`.
  int64_t outer = ndim - 1;
  while (outer > 0 && region[outer].length == box.sizes[outer]) --outer;
  const int64_t chunk = region[outer].length * strides[outer] * element;
  Shape position(outer, 0);
  while (true) {
    int64_t offset = (region[outer].global - box.offsets[outer]) * strides[outer];
    for (int64_t d = 0; d < outer; ++d)
      offset += (region[d].global - box.offsets[d] + position[d]) * strides[d];
    reader.read(entry, offset * element, chunk, destination);
    destination += chunk;
    int64_t d = outer;
    while (d > 0 && ++position[d - 1] == region[d - 1].length) position[--d] = 0;
    if (d == 0) return;
  }
}

// Where the elements of `tensor` at `region`'s local runs start, when they
// are one contiguous block of it (what is_contiguous says of the narrowed
// view, found without making it); else null.
char* block_start(const at::Tensor& tensor, const std::vector<Run>& region) {
  const c10::IntArrayRef strides = tensor.strides();
  int64_t offset = 0;
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(region.size()) - 1; d >= 0; --d) {
    offset += region[d].local * strides[d];
    if (region[d].length == 1) continue;
    if (strides[d] != expected) return nullptr;
    expected *= region[d].length;
  }
  return static_cast<char*>(tensor.data_ptr()) + offset * tensor.element_size();
}

// Checks that the file entry `read` names holds what the index says.
void check_entry(const Read& read, const SavedTensor& record, Readers& readers) {
  const SafetensorsReader& reader = readers.open(read.box->file);
  const SafetensorsEntry& entry = reader.entry(read.box->entry);
  DTENSOR_CHECK(entry.dtype == record.dtype && entry.shape == read.box->sizes,
                "checkpoint::load: ", reader.path(), ": entry \"", read.box->entry, "\": expected ",
                record.dtype, " of shape ", c10::IntArrayRef(read.box->sizes),
                " as the index says, found ", entry.dtype, " of shape ",
                c10::IntArrayRef(entry.shape));
}

// Reads `reads` (checked by check_entry) into `destination`, a CPU tensor
// of the target's read shape.
void read_into(at::Tensor& destination, const std::vector<Read>& reads, Readers& readers) {
  for (const Read& read : reads) {
    const SafetensorsReader& reader = readers.open(read.box->file);
    const SafetensorsEntry& entry = reader.entry(read.box->entry);
    for_each_region(read.runs, [&](const std::vector<Run>& region) {
      // Straight into the destination where the region is one block of it
      // (the whole shard, or whole rows of it): no second buffer to fault
      // in and copy.
      if (char* start = block_start(destination, region)) {
        read_region(reader, entry, *read.box, region, start, destination.element_size());
        return;
      }
      at::Tensor part = destination;
      for (size_t d = 0; d < region.size(); ++d) {
        part = part.narrow(static_cast<int64_t>(d), region[d].local, region[d].length);
      }
      at::Tensor block = at::empty(part.sizes(), destination.options());
      read_region(reader, entry, *read.box, region, static_cast<char*>(block.data_ptr()),
                  block.element_size());
      part.copy_(block);
    });
  }
}

// Fills `target` from the files. A CPU shard read as it is laid out is read
// into in place; any other goes through a staging buffer.
void fill(Target& target, const std::vector<Read>& reads, Readers& readers) {
  if (!target.read_as && target.local.device().is_cpu()) {
    read_into(target.local, reads, readers);
    // Written behind the dispatcher: what tracks writes (autograd, a
    // DTensor's remembered forms) must see one.
    target.local.unsafeGetTensorImpl()->bump_version();
    return;
  }
  at::Tensor staging = at::empty(target.read_shape(), target.local.options().device(at::kCPU));
  read_into(staging, reads, readers);
  target.local.copy_(laid_out_as_target(target, staging));
}

// What a load reads: per target its record and reads, every file entry
// they use opened and checked.
struct LoadPlan {
  Source source;
  Readers readers;
  std::vector<const SavedTensor*> records;
  std::vector<std::vector<Read>> reads;
};

std::unique_ptr<LoadPlan> plan_load(const std::vector<Target>& targets, const std::string& path) {
  Source source = read_source(path);
  std::string dir = source.dir;
  auto plan =
      std::make_unique<LoadPlan>(LoadPlan{std::move(source), Readers(std::move(dir)), {}, {}});
  for (const Target& target : targets) {
    plan->records.push_back(&matching_record(plan->source, target.name, target.tensor));
    plan->reads.push_back(plan_reads(target, *plan->records.back()));
    for (const Read& read : plan->reads.back()) {
      check_entry(read, *plan->records.back(), plan->readers);
    }
  }
  return plan;
}

}  // namespace

// A save once its layout is agreed on: this rank's files, written by
// `writer` (a thread for an async save), then every rank's outcome agreed
// on and the checkpoint published.
struct SaveHandle::Pending {
  World world;
  bool leader = false;
  int64_t id = 0;
  std::string tmp;
  std::string target;
  std::thread writer;
  // Set by the writer; read once it is joined.
  std::optional<std::string> write_error;

  // Collective, on the thread of the other collectives.
  void finish() {
    if (writer.joinable()) writer.join();
    if (leader) SavesInFlight::instance().remove(tmp);
    const int64_t write_failures = sum_over_ranks(world, write_error ? 1 : 0);
    if (write_failures > 0) {
      if (leader) remove_tree(tmp);
      DTENSOR_CHECK(false, "checkpoint::save: writing ", tmp, " failed on ", write_failures,
                    " rank(s)", write_error ? ", here: " + *write_error : std::string(), "; ",
                    target, " is unchanged");
    }
    check_every_rank(world, leader ? attempt([&] { publish(tmp, target, id); }) : std::nullopt,
                     "moving " + tmp + " to " + target);
  }
};

SaveHandle::SaveHandle() = default;
SaveHandle::SaveHandle(std::unique_ptr<Pending> pending) : pending_(std::move(pending)) {}
SaveHandle::SaveHandle(SaveHandle&& other) noexcept = default;

SaveHandle& SaveHandle::operator=(SaveHandle&& other) {
  if (this != &other) {
    wait();
    pending_ = std::move(other.pending_);
  }
  return *this;
}

SaveHandle::~SaveHandle() {
  try {
    wait();
  } catch (const std::exception& error) {
    std::cerr << "dtensor::checkpoint: an async save failed: " << error.what() << std::endl;
  }
}

void SaveHandle::wait() {
  if (!pending_) return;
  // Done whatever happens: a failed save is not waited for twice.
  const std::unique_ptr<Pending> pending = std::move(pending_);
  pending->finish();
}

SaveHandle save(const std::map<std::string, at::Tensor>& state, const std::string& dir,
                const SaveOptions& options) {
  at::NoGradGuard no_grad;
  auto pending = std::make_unique<SaveHandle::Pending>();
  pending->world = world_of(state);
  const World& world = pending->world;
  std::vector<SaveItem> items;
  for (const auto& [name, tensor] : state)
    items.push_back(save_item(name, tensor, items.size(), world));

  pending->leader = world.rank == world.ranks.front();
  pending->target = without_trailing_slashes(dir);
  // The leader names and makes the temporary directory; one collective
  // tells every rank its name, or that making it failed (-1).
  std::optional<std::string> made_error;
  int64_t made_id = 0;
  if (pending->leader) {
    made_id = fresh_id();
    const std::string tmp = temporary_directory(pending->target, made_id);
    SavesInFlight::instance().add(tmp);
    made_error = attempt([&] { make_directories(tmp); });
    if (made_error) {
      SavesInFlight::instance().remove(tmp);
      made_id = -1;
    }
  }
  pending->id = sum_over_ranks(world, made_id);
  DTENSOR_CHECK(pending->id >= 0, "checkpoint::save: creating the temporary directory for ",
                pending->target, " failed on rank ", world.ranks.front(),
                made_error ? ", here: " + *made_error : std::string(), "; ", pending->target,
                " is unchanged");
  pending->tmp = temporary_directory(pending->target, pending->id);
  const std::string tmp = pending->tmp;

  // What this rank writes: views of its tensors, or for an async save their
  // copies in host memory. Errors here are agreed on with the writes' ones.
  std::vector<std::pair<std::string, at::Tensor>> entries;
  std::string index;
  pending->write_error = attempt([&] {
    entries = rank_entries(items, world.rank);
    if (options.async) {
      for (auto& [name, tensor] : entries)
        tensor = at::empty(tensor.sizes(), tensor.options().device(at::kCPU)).copy_(tensor);
    }
    if (pending->leader) index = index_json(items).dump(1);
  });
  if (!pending->write_error) {
    auto write = [job = pending.get(), entries = std::move(entries), index = std::move(index),
                  file = join_path(tmp, rank_file(world.rank))] {
      job->write_error = attempt([&] {
        const auto write_shard = [&] {
          if (!entries.empty()) write_safetensors(file, entries);
        };
        if (job->leader) {
          write_beside(write_shard, join_path(job->tmp, kIndexFile), index);
        } else {
          write_shard();
        }
        sync_directory(job->tmp);
      });
    };
    if (options.async) {
      pending->writer = std::thread(std::move(write));
    } else {
      write();
    }
  }
  SaveHandle handle(std::move(pending));
  if (!options.async) handle.wait();
  return handle;
}

void load(std::map<std::string, at::Tensor>& state, const std::string& path) {
  at::NoGradGuard no_grad;
  const World world = world_of(state);
  std::vector<Target> targets;
  std::unique_ptr<LoadPlan> plan;
  std::exception_ptr failure;
  try {
    for (const auto& [name, tensor] : state) targets.push_back(target_of(name, tensor));
    plan = plan_load(targets, path);
  } catch (...) {
    failure = std::current_exception();
  }
  // No rank changes a tensor unless every rank's checks passed.
  const int64_t failures = sum_over_ranks(world, failure ? 1 : 0);
  if (failure) std::rethrow_exception(failure);
  DTENSOR_CHECK(failures == 0, "checkpoint::load: ", path, ": failed on ", failures,
                " other rank(s); no tensor changed");
  for (size_t i = 0; i < targets.size(); ++i) {
    try {
      fill(targets[i], plan->reads[i], plan->readers);
    } catch (const Error& error) {
      DTENSOR_CHECK(false, "checkpoint::load: ", path, ": reading \"", targets[i].name,
                    "\" failed after every check passed (", error.what(), "); ", i,
                    " tensor(s) before it were loaded, it and those after it may be partly "
                    "loaded or unchanged");
    }
  }
}

std::map<std::string, SavedTensor> inspect(const std::string& path) {
  return read_source(path).tensors;
}

std::map<std::string, at::Tensor> state_dict(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> state;
  for (const auto& item : module.named_parameters(/*recurse=*/true))
    state.emplace(item.key(), item.value());
  for (const auto& item : module.named_buffers(/*recurse=*/true))
    state.emplace(item.key(), item.value());
  return state;
}

void load_state_dict(torch::nn::Module& module, const std::string& path) {
  std::map<std::string, at::Tensor> state = state_dict(module);
  load(state, path);
}

}  // namespace dtensor::checkpoint
