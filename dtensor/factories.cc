// Copyright 2026 The dtensor Authors.
#include <dtensor/factories.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <dtensor/base/check.h>
#include <dtensor/placements/replicate.h>

namespace dtensor {
namespace {

// The factories' results require grad when asked to, as at::ones's do.
DTensor with_requires_grad(DTensor made, const at::TensorOptions& options) {
  if (options.requires_grad()) made.tensor().set_requires_grad(true);
  return made;
}

at::TensorOptions on_mesh(at::TensorOptions options, const DeviceMesh& mesh) {
  const c10::ScalarType dtype =
      options.has_dtype() ? c10::typeMetaToScalarType(options.dtype()) : at::kFloat;
  return at::TensorOptions().dtype(dtype).device(mesh.device());
}

// The spec, and the same spec with its Partials replaced by Replicate: the
// shard is made for the latter, then redistributed locally to the former, so
// a Partial(sum) holds the value on coordinate 0 only.
template <typename MakeShard>
DTensor make(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
             const std::vector<PlacementPtr>& placements, at::TensorOptions options,
             MakeShard make_shard) {
  const at::TensorOptions resolved = on_mesh(options, mesh);
  DTensorSpec spec(mesh, placements, shape, c10::typeMetaToScalarType(resolved.dtype()));
  std::vector<PlacementPtr> spread = spec.placements();
  for (PlacementPtr& p : spread) {
    if (p->is_partial()) p = Replicate::make();
  }
  auto spread_spec = std::make_shared<const DTensorSpec>(spec.with_placements(spread));
  DTensor shard(make_shard(*spread_spec, resolved), spread_spec);
  return with_requires_grad(redistribute_any(shard, spec.placements()), options);
}

// Generates the global tensor with a seeded CPU generator and keeps the part
// of this rank.
DTensor make_random(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
                    const std::vector<PlacementPtr>& placements, uint64_t seed,
                    at::TensorOptions options, bool normal) {
  const at::TensorOptions resolved = on_mesh(options, mesh);
  DTENSOR_CHECK(c10::isFloatingType(c10::typeMetaToScalarType(resolved.dtype())),
                normal ? "randn" : "rand", ": expected a floating dtype, found ", resolved.dtype());
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::TensorOptions cpu = resolved.device(c10::kCPU);
  const at::Tensor global =
      normal ? at::randn(shape, generator, cpu) : at::rand(shape, generator, cpu);
  return with_requires_grad(distribute_tensor(global.to(resolved.device()), mesh, placements),
                            options);
}

}  // namespace

DTensor empty(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
              const std::vector<PlacementPtr>& placements, at::TensorOptions options) {
  return make(shape, mesh, placements, options, [](const DTensorSpec& spec, at::TensorOptions o) {
    return at::empty(spec.local_layout().local_shape, o);
  });
}

DTensor zeros(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
              const std::vector<PlacementPtr>& placements, at::TensorOptions options) {
  return full(shape, 0, mesh, placements, options);
}

DTensor ones(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
             const std::vector<PlacementPtr>& placements, at::TensorOptions options) {
  return full(shape, 1, mesh, placements, options);
}

DTensor full(const std::vector<int64_t>& shape, const at::Scalar& value, const DeviceMesh& mesh,
             const std::vector<PlacementPtr>& placements, at::TensorOptions options) {
  return make(shape, mesh, placements, options, [&](const DTensorSpec& spec, at::TensorOptions o) {
    return at::full(spec.local_layout().local_shape, value, o);
  });
}

DTensor rand(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
             const std::vector<PlacementPtr>& placements, uint64_t seed,
             at::TensorOptions options) {
  return make_random(shape, mesh, placements, seed, options, /*normal=*/false);
}

DTensor randn(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
              const std::vector<PlacementPtr>& placements, uint64_t seed,
              at::TensorOptions options) {
  return make_random(shape, mesh, placements, seed, options, /*normal=*/true);
}

}  // namespace dtensor
