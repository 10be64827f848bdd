// Copyright 2026 The dtensor Authors.
#include <dtensor/redistribute/async_redistribute.h>

#include <memory>

#if DTENSOR_TORCH_HAS_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <dtensor/core/tensor_impl.h>

namespace dtensor {

#if DTENSOR_TORCH_HAS_CUDA
namespace {

// The caching allocator may hand a block to another allocation on its own
// stream as soon as the tensor dies; telling it about `stream` keeps the block
// until `stream` has passed this point.
void keep_alive_on(const at::Tensor& tensor, const c10::cuda::CUDAStream& stream) {
  if (tensor.defined() && tensor.has_storage() && tensor.storage().data_ptr().get() != nullptr) {
    c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), stream);
  }
}

class CudaPendingWork final : public PendingWork {
 public:
  explicit CudaPendingWork(const c10::cuda::CUDAStream& side) { done_.record(side); }

  void wait(const at::Tensor& local) const override {
    const c10::cuda::CUDAStream current =
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(done_.device_index()));
    done_.block(current);
    keep_alive_on(local, current);
  }

  bool ready() const override { return done_.query(); }

 private:
  mutable at::cuda::CUDAEvent done_;
};

}  // namespace

at::Tensor redistribute_async(const at::Tensor& source,
                              const std::function<at::Tensor()>& redistribute) {
  DTensorImpl* source_impl = dtensor_impl(source);
  const c10::Device device = source_impl->spec()->mesh().device();
  if (!device.is_cuda()) return redistribute();

  const auto index = static_cast<c10::DeviceIndex>(device.index());
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(index);
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index);
  // First: the source may itself come from an async redistribute, and
  // local() orders the caller stream after that work, which the event below
  // then passes on to the side stream.
  const at::Tensor& source_local = source_impl->local();
  at::cuda::CUDAEvent inputs_ready;
  inputs_ready.record(caller);
  inputs_ready.block(side);
  at::Tensor result = [&] {
    c10::cuda::CUDAStreamGuard on_side(side);
    return redistribute();
  }();
  if (result.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) return result;  // no step
  keep_alive_on(source_local, side);
  const auto work = std::make_shared<const CudaPendingWork>(side);
  dtensor_impl(result)->set_pending(work);
  source_impl->set_pending(work);  // its shard is being read
  return result;
}

#else  // no CUDA libtorch: no streams, every backend completes in the call

at::Tensor redistribute_async(const at::Tensor&, const std::function<at::Tensor()>& redistribute) {
  return redistribute();
}

#endif

}  // namespace dtensor
