#include "backend/device_check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu_ops.h"
#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/kernels.h"
#include "gpu/recorder.h"
#include "gpu/weight_kernels.h"

namespace kvscope::backend {
namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

Expected<DeviceCheckReport> checkDevice(int deviceIndex) {
  DeviceCheckReport report;
  auto t0 = Clock::now();
  gpu::ContextOptions options;
  options.device = deviceIndex;
  KVS_ASSIGN_OR_RETURN(auto ctx, gpu::Context::create(options));
  report.contextMs = msSince(t0);
  report.deviceName = ctx->info().name;
  report.cacheBytesLoaded = ctx->pipelineCacheBytesLoaded();

  gpu::Kernels kernels(*ctx);
  t0 = Clock::now();
  KVS_ASSIGN_OR_RETURN(report.pipelines, kernels.prepareAll());
  report.pipelinesMs = msSince(t0);

  constexpr uint32_t kDim = 256, kRows = 512;
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(kDim), norm(kDim, 1.0f), w(size_t{kRows} * kDim);
  for (float& v : x) v = dist(rng);
  for (float& v : w) v = dist(rng);

  KVS_ASSIGN_OR_RETURN(auto xb, gpu::Buffer::create(*ctx, x.size() * 4));
  KVS_ASSIGN_OR_RETURN(auto nb, gpu::Buffer::create(*ctx, norm.size() * 4));
  KVS_ASSIGN_OR_RETURN(auto wb, gpu::Buffer::create(*ctx, w.size() * 4));
  KVS_ASSIGN_OR_RETURN(auto hb, gpu::Buffer::create(*ctx, kDim * 4));
  KVS_ASSIGN_OR_RETURN(auto lb, gpu::Buffer::create(*ctx, kRows * 4));
  KVS_ASSIGN_OR_RETURN(auto pb, gpu::Buffer::create(*ctx, kRows * 4));
  KVS_TRY(xb.upload(std::span<const float>(x)));
  KVS_TRY(nb.upload(std::span<const float>(norm)));
  KVS_TRY(wb.upload(std::span<const float>(w)));

  gpu::WeightKernels weights(*ctx);
  KVS_ASSIGN_OR_RETURN(auto rec, gpu::Recorder::create(*ctx));
  for (double* ms : {&report.firstStepMs, &report.stepMs}) {
    KVS_TRY(rec->begin());
    KVS_TRY(kernels.rmsnorm(*rec, xb, &nb, hb, kDim, 1, 1e-5f));
    rec->barrier();
    KVS_TRY(weights.matvec(*rec, gguf::TensorType::kF32, wb, hb, lb, kRows, kDim));
    rec->barrier();
    KVS_TRY(kernels.softmax(*rec, lb, pb, kRows, 1, 1.0f));
    t0 = Clock::now();
    KVS_TRY(rec->submitAndWait());
    *ms = msSince(t0);
  }

  std::vector<float> got(kRows), h(kDim), logits(kRows), probs(kRows);
  KVS_TRY(pb.download(std::span<float>(got)));
  cpu::rmsnorm(x, norm, h, kDim, 1, 1e-5f);
  cpu::matvec(w, h, logits, kRows, kDim);
  cpu::softmax(logits, probs, kRows, 1);
  for (uint32_t i = 0; i < kRows; ++i) {
    report.maxAbsError =
        std::max(report.maxAbsError, static_cast<double>(std::fabs(got[i] - probs[i])));
  }
  report.passed = report.maxAbsError < 1e-5;
  return report;
}

}  // namespace kvscope::backend
