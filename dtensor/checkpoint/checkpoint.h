// Copyright 2026 The dtensor Authors.
//
// dtensor/checkpoint/checkpoint.h: distributed checkpoints of DTensors and
// plain tensors, saved sharded and loaded into any mesh and placements, as
// PyTorch's torch.distributed.checkpoint does.
//
//   std::map<std::string, at::Tensor> state = dtensor::checkpoint::state_dict(*model);
//   dtensor::checkpoint::save(state, "ckpt/step-100");   // collective
//   dtensor::checkpoint::load(state, "ckpt/step-100");   // collective, in place
//   dtensor::checkpoint::load(state, "model.safetensors");  // a plain file
//   auto pending = dtensor::checkpoint::save(state, "ckpt/step-200", {.async = true});
//   ...                                                     // train on
//   pending.wait();                                         // collective
//
// With the optimizer, to resume training on any mesh and placements:
//
//   auto state = dtensor::checkpoint::state_dict(*model);
//   state.merge(dtensor::checkpoint::state_dict(optimizer, *model));
//   dtensor::checkpoint::save(state, "ckpt/step-100");
//   ...  // later, perhaps on another mesh: parallelize, build the optimizer
//   dtensor::checkpoint::load_state_dict(*model, "ckpt/step-100");
//   dtensor::checkpoint::load_state_dict(optimizer, *model, "ckpt/step-100");
//
// A checkpoint is a directory: one safetensors file per writing rank
// (`rank-00003.safetensors`, any safetensors reader opens it) holding the
// boxes of global tensors that rank owns (entries "name@k"), and
// `index.json`, which says for each tensor its global shape, dtype and which
// file and entry hold which box:
//
//   {"format": "dtensor-checkpoint", "version": 1, "tensors": {"w": {
//     "shape": [8, 6], "dtype": "F32",
//     "boxes": [{"file": "rank-00000.safetensors", "entry": "w@0",
//                "offsets": [0, 0], "sizes": [4, 6]}, ...]}}}
//
// The DTensors of a state may live on several meshes, all over the same world
// ranks (the ranks of their roots, DeviceMesh::root); those ranks make the
// calls together, each with the same names, global shapes, dtypes and
// placements. A state of plain tensors only is saved and loaded by the
// calling process alone.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}  // namespace torch::nn
namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

namespace dtensor::checkpoint {

// How `save` runs.
struct SaveOptions {
  // Return as soon as every rank has agreed on the checkpoint's layout and
  // copied its part of the tensors to host memory (Partial reduced first);
  // a background thread then writes the files, and the returned handle's
  // wait() publishes them. The caller may change the tensors at once (keep
  // training): the checkpoint holds their values at the call. Costs host
  // memory for this rank's part until the files are written.
  bool async = false;
};

// A save that may still be running (SaveOptions::async); a synchronous
// save returns one with nothing left to do. Movable, not copyable.
//
//   dtensor::checkpoint::SaveHandle pending =
//       dtensor::checkpoint::save(state, "ckpt/step-100", {.async = true});
//   ...  // train on: the tensors were copied
//   pending.wait();  // collective: the checkpoint is in place when it returns
class SaveHandle {
 public:
  // Nothing to wait for.
  SaveHandle();
  // Waits as wait() does (so every rank must let its handle go at the same
  // point); a destructor cannot throw, so a failure is written to stderr
  // instead: call wait() to handle it.
  ~SaveHandle();
  SaveHandle(SaveHandle&& other) noexcept;
  // Waits for the save this handle held, then takes `other`'s.
  SaveHandle& operator=(SaveHandle&& other);
  SaveHandle(const SaveHandle&) = delete;
  SaveHandle& operator=(const SaveHandle&) = delete;

  // Waits for this rank's files to reach the disk, then, with every rank
  // (collective: each calls it at the same point of its program, on the
  // thread that runs its other collectives; the writing thread never
  // communicates), checks that every rank wrote its files and publishes the
  // checkpoint. Throws dtensor::Error on every rank when a write failed
  // anywhere, leaving `dir` as it was. Later calls do nothing.
  void wait();

 private:
  struct Pending;
  friend SaveHandle save(const std::map<std::string, at::Tensor>& state, const std::string& dir,
                         const SaveOptions& options);
  explicit SaveHandle(std::unique_ptr<Pending> pending);

  std::unique_ptr<Pending> pending_;
};

// Saves `state` as the checkpoint directory `dir` (its parents are created).
// Each rank writes only the boxes it owns: a DTensor's local shard, with the
// data replicated over mesh dims written by one rank (tensor by tensor, the
// writing is spread over the replicas); Partial placements are reduced first
// (redistributed to Replicate). Plain tensors count as replicated over every
// rank. Nothing is gathered to one rank.
//
// Atomic: the files go to `dir.tmp-<id>`, and only when every rank has
// written and flushed its file does rank 0 move them to `dir`, replacing an
// older checkpoint there: the two directories swap in one step where the
// file system can (renameat2's RENAME_EXCHANGE: Linux's local file systems),
// else the older one is moved aside first; then it is removed. A failed
// write on any rank throws dtensor::Error on every rank and leaves `dir` as
// it was. So does a rank killed in the middle of a save
// (tests/mpi/checkpoint_kill_test): its `dir.tmp-<id>` stays behind, never
// read by `load`, until the next save to `dir` succeeds and removes it (not
// those of saves this process still runs: async saves to one `dir` may
// overlap).
//
// Synchronous by default: the checkpoint is in place when save returns (the
// handle has nothing left to do). With `options.async`, see SaveOptions;
// the write's errors are thrown by the handle's wait().
SaveHandle save(const std::map<std::string, at::Tensor>& state, const std::string& dir,
                const SaveOptions& options = {});

// Fills every tensor of `state` in place (its storage, so optimizers holding
// the tensors see the new values) from the checkpoint at `path`: a directory
// written by `save`, one plain `.safetensors` file (each entry one whole
// tensor, as Hugging Face writes them), or a Hugging Face model directory
// (`model.safetensors`, or `model.safetensors.index.json` and the files its
// "weight_map" names). Each rank reads, with pread, exactly
// the byte ranges its current local shard needs, whatever mesh and placements
// wrote the checkpoint: Shard (uneven, empty), Replicate, StridedShard,
// Ragged over one dim and user placements through their index lists. A
// Partial DTensor, or one Ragged over merged dims, reads the region its
// Replicate form holds and takes its own layout from that locally, as
// redistribute from Replicate does (a Partial(sum) shard is the whole value
// on one rank of each Partial mesh dim and zeros on the others).
//
// Each rank first checks everything it will read (the index, every file
// header and entry it needs, shapes, dtypes, coverage, bounds), and reads
// only after every rank's checks passed (one all-reduce over the DTensors'
// root mesh), so bad input anywhere leaves every rank's state untouched.
// It then reads straight into CPU shards (no copy), and through a host
// staging buffer into device shards and Partial / merged-Ragged targets. A
// read that fails after every check passed (an I/O error) raises, naming
// the tensor; tensors from it on may be partly loaded.
//
// Checks first and throws dtensor::Error, leaving `state` untouched, for: a
// path that does not exist, a corrupt or truncated file or index, a tensor
// the checkpoint lacks, a global shape or dtype that differs, boxes that do
// not cover a tensor.
void load(std::map<std::string, at::Tensor>& state, const std::string& path);

// One box of a saved tensor: the elements [offsets, offsets + sizes) of the
// global tensor, held whole (row-major) by the entry `entry` of the
// safetensors file `file`, a name in the checkpoint's directory.
struct SavedBox {
  std::string file;
  std::string entry;
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
};

// A tensor of a checkpoint: its global shape, dtype and boxes.
struct SavedTensor {
  std::vector<int64_t> shape;
  c10::ScalarType dtype;
  std::vector<SavedBox> boxes;
};

// What the checkpoint at `path` (any path `load` accepts) holds, by tensor
// name, read from its index (from the headers, for plain safetensors files:
// one box per entry, the whole tensor) with the checks `load` makes of them;
// no tensor data is read. The calling process alone, for tools and tests:
//
//   for (const auto& [name, saved] : dtensor::checkpoint::inspect("ckpt/step-100"))
//     std::cout << name << ": " << saved.boxes.size() << " boxes\n";
//
// `dtensor-checkpoint inspect PATH` prints it (examples/checkpoint).
std::map<std::string, SavedTensor> inspect(const std::string& path);

// The parameters and buffers of `module` and its submodules by dotted name
// ("layers.0.weight"): the module's own tensors (DTensors where the module is
// distributed), so `load` into this map fills the module in place.
std::map<std::string, at::Tensor> state_dict(const torch::nn::Module& module);

// Loads the checkpoint at `path` into `module`'s parameters and buffers in
// place: `load(state_dict(module), path)`.
void load_state_dict(torch::nn::Module& module, const std::string& path);

// The state of `optimizer` (torch::optim::Adam, AdamW or SGD; another type
// throws dtensor::Error), named after its parameters' names in `module`, so
// that it loads into the same model however it is laid out then:
//
//   "optim.<param>.exp_avg", "optim.<param>.exp_avg_sq",   Adam, AdamW
//   "optim.<param>.max_exp_avg_sq" (amsgrad only),
//   "optim.<param>.step" (int64, 0-dim)
//   "optim.<param>.momentum_buffer"                          SGD, momentum != 0
//   "optim.param_groups.<i>.lr" (float64, 0-dim)             every optimizer
//
// The state tensors are the optimizer's own (DTensors laid out as their
// parameters where the model is distributed); step and lr are copies. A
// parameter without state yet (the optimizer has not stepped) gets the
// state its first step would create: zeros and step 0, which Adam and AdamW
// then continue exactly as from no state (for SGD with dampening != 0, the
// first step starts a missing buffer from the gradient, a zero one from
// dampened momentum). The other hyperparameters are the optimizer's own as
// constructed. Throws dtensor::Error when a parameter of the optimizer is
// not one of `module`'s.
std::map<std::string, at::Tensor> state_dict(const torch::optim::Optimizer& optimizer,
                                             const torch::nn::Module& module);

// Loads the state of `optimizer` from the checkpoint at `path` (written
// with `state_dict(optimizer, module)` on any mesh and placements, into any
// optimizer of the same type over the same named parameters): the
// parameters with state are filled in place, those without get new state
// laid out as the parameter (zeros_like), filled, then installed, and the
// steps and learning rates are set. Collective, as `load`; nothing changes
// when it throws.
void load_state_dict(torch::optim::Optimizer& optimizer, const torch::nn::Module& module,
                     const std::string& path);

}  // namespace dtensor::checkpoint
