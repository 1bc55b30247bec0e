#include "gpu/weight_kernels.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <string>
#include <thread>

#include "gpu/loop_limit.h"
#include "shaders/weights.h"

namespace kvscope::gpu {
namespace {

using gguf::TensorType;

// One field of a GGUF block: byte offset and size (block_layout.h).
struct Field {
  uint32_t offset;
  uint32_t bytes;
};

struct TypeInfo {
  TensorType type;
  const char* name;  // lower case, as in shader variant names
  uint32_t blockElements;
  uint32_t blockBytes;
  uint32_t planeCount;  // 0: rows stay raw
  std::array<Field, 4> planes;
  // kCpu shape, swept on lavapipe: matvec rows per invocation (the k-quants'
  // 64-value units fill registers sooner, so fewer rows), matmul tile of
  // rows x tokens per invocation.
  uint32_t matvecRows;
  uint32_t matmulRows, matmulTokens;
};

constexpr TypeInfo kTypes[] = {
    {TensorType::kF32, "f32", 1, 4, 0, {}, 16, 8, 8},
    {TensorType::kF16, "f16", 1, 2, 0, {}, 16, 8, 8},
    {TensorType::kBF16, "bf16", 1, 2, 0, {}, 16, 8, 8},
    {TensorType::kQ8_0, "q8_0", 32, 34, 2, {{{2, 32}, {0, 2}}}, 8, 8, 8},
    {TensorType::kQ4_0, "q4_0", 32, 18, 2, {{{2, 16}, {0, 2}}}, 8, 8, 8},
    {TensorType::kQ4_1, "q4_1", 32, 20, 3, {{{4, 16}, {0, 2}, {2, 2}}}, 8, 8, 8},
    {TensorType::kQ5_0, "q5_0", 32, 22, 3, {{{6, 16}, {2, 4}, {0, 2}}}, 8, 8, 8},
    {TensorType::kQ5_1, "q5_1", 32, 24, 4, {{{8, 16}, {4, 4}, {0, 2}, {2, 2}}}, 8, 8, 8},
    {TensorType::kIQ4_NL, "iq4_nl", 32, 18, 2, {{{2, 16}, {0, 2}}}, 8, 8, 8},
    {TensorType::kMXFP4, "mxfp4", 32, 17, 2, {{{1, 16}, {0, 1}}}, 8, 8, 8},
    {TensorType::kQ4_K, "q4_k", 256, 144, 2, {{{16, 128}, {0, 16}}}, 4, 8, 8},
    {TensorType::kQ5_K, "q5_k", 256, 176, 3, {{{48, 128}, {16, 32}, {0, 16}}}, 2, 8, 8},
    {TensorType::kQ6_K, "q6_k", 256, 210, 4, {{{0, 128}, {128, 64}, {192, 16}, {208, 2}}}, 4, 8, 8},
    {TensorType::kIQ4_XS, "iq4_xs", 256, 136, 2, {{{8, 128}, {0, 8}}}, 4, 8, 8},
};

constexpr uint32_t kPlaneAlign = 32;  // the widest shader load
constexpr uint32_t kCpuWorkgroup = 16;
constexpr uint32_t kGroupsPerCpuThread = 3;             // few large groups: see header
constexpr uint32_t kGpuWorkgroup = KVS_WEIGHT_TILE_WG;

const TypeInfo* findType(TensorType type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

// Values of a row one step of the kernels' loops takes (weight_types.glsl's UNIT).
uint32_t unitValues(const TypeInfo& t) {
  if (t.blockElements == 1) return t.type == TensorType::kF32 ? 8 : 16;
  return std::min<uint32_t>(t.blockElements, 64);
}

uint64_t roundUp(uint64_t v, uint64_t to) {
  return (v + to - 1) / to * to;
}

// Where each plane starts within a device row of `cols` values, and the row stride.
struct RowLayout {
  uint64_t rowBytes = 0;
  std::array<uint64_t, 4> planeOffset{};
};

RowLayout rowLayout(const TypeInfo& t, uint32_t cols) {
  RowLayout layout;
  const uint64_t blocks = cols / t.blockElements;
  if (t.planeCount == 0) {
    layout.rowBytes = blocks * t.blockBytes;
    return layout;
  }
  for (uint32_t p = 0; p < t.planeCount; ++p) {
    layout.planeOffset[p] = layout.rowBytes;
    layout.rowBytes += roundUp(blocks * t.planes[p].bytes, kPlaneAlign);
  }
  return layout;
}

Error unsupportedType(TensorType type) {
  return makeError(ErrorCode::kUnsupported,
                   "GGUF tensor type {} has no GPU weight kernel (supported: F32, F16, BF16, Q8_0, "
                   "Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q4_K, Q5_K, Q6_K, IQ4_XS)",
                   gguf::typeName(static_cast<uint32_t>(type)));
}

std::string upper(const char* name) {
  std::string s = name;
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

WeightShape resolveShape(const Context& ctx, WeightShape shape) {
  if (shape != WeightShape::kAuto) return shape;
  const DeviceInfo& info = ctx.info();
  if (info.type == DeviceType::kCpu && info.shaderInt64) return WeightShape::kCpu;
  return info.subgroupArithmetic ? WeightShape::kGpuSubgroup : WeightShape::kGpuShared;
}

}  // namespace

const char* weightShapeName(WeightShape shape) {
  switch (shape) {
    case WeightShape::kAuto:
      return "auto";
    case WeightShape::kCpu:
      return "cpu";
    case WeightShape::kGpuSubgroup:
      return "gpu-subgroup";
    case WeightShape::kGpuShared:
      return "gpu-shared";
  }
  return "?";
}

MatvecLaunch matvecLaunchFor(uint32_t cols) {
  return {std::clamp(std::bit_floor(std::max(cols / 64, 1u)), 32u, 256u), 4};
}

MatvecLaunch WeightKernels::matvecLaunch(uint32_t cols) const {
  // Within what the device runs in one workgroup, a power of two (reduce.glsl).
  MatvecLaunch launch = m_launch ? *m_launch : matvecLaunchFor(cols);
  const VkPhysicalDeviceLimits& limits = m_ctx.limits();
  launch.workgroup = std::bit_floor(std::clamp(
      launch.workgroup, 1u,
      std::min(limits.maxComputeWorkGroupInvocations, limits.maxComputeWorkGroupSize[0])));
  launch.rows = std::max(launch.rows, 1u);
  return launch;
}

WeightKernels::WeightKernels(Context& ctx, WeightShape shape, std::optional<MatvecLaunch> launch)
    : m_ctx(ctx), m_shape(resolveShape(ctx, shape)), m_launch(launch) {
  if (m_shape == WeightShape::kCpu)
    m_cpuThreads = std::max(1u, std::thread::hardware_concurrency());
}

bool WeightKernels::supportsType(TensorType type) {
  return findType(type) != nullptr;
}

std::optional<uint64_t> WeightKernels::rowBytes(TensorType type, uint32_t cols) {
  const TypeInfo* t = findType(type);
  if (!t || cols == 0 || cols % t->blockElements != 0) return std::nullopt;
  return rowLayout(*t, cols).rowBytes;
}

Expected<std::vector<uint8_t>> WeightKernels::repack(TensorType type, uint32_t cols,
                                                     std::span<const uint8_t> raw) {
  const TypeInfo* t = findType(type);
  if (!t) return unsupportedType(type);
  if (cols == 0 || cols % t->blockElements != 0) {
    return makeError(ErrorCode::kInvalidArgument,
                     "{} rows of {} values are not whole {}-value blocks", upper(t->name), cols,
                     t->blockElements);
  }
  const uint64_t blocks = cols / t->blockElements;
  const uint64_t rawRow = blocks * t->blockBytes;
  if (raw.size() % rawRow != 0) {
    return makeError(ErrorCode::kInvalidArgument, "{} bytes are not whole {} rows of {} bytes",
                     raw.size(), upper(t->name), rawRow);
  }
  const uint64_t rows = raw.size() / rawRow;
  const RowLayout layout = rowLayout(*t, cols);
  // Padded to a word so the last fp16/bf16 pair of an odd-sized tensor is readable.
  std::vector<uint8_t> out(roundUp(rows * layout.rowBytes, 4), 0);
  if (t->planeCount == 0) {
    std::copy(raw.begin(), raw.end(), out.begin());
    return out;
  }
  for (uint64_t r = 0; r < rows; ++r) {
    const uint8_t* src = raw.data() + r * rawRow;
    uint8_t* dst = out.data() + r * layout.rowBytes;
    for (uint64_t b = 0; b < blocks; ++b) {
      for (uint32_t p = 0; p < t->planeCount; ++p) {
        const Field& f = t->planes[p];
        std::memcpy(dst + layout.planeOffset[p] + b * f.bytes, src + b * t->blockBytes + f.offset,
                    f.bytes);
      }
    }
  }
  return out;
}

Expected<const Pipeline*> WeightKernels::pipeline(size_t typeIndex, Kernel kernel,
                                                  uint32_t epilogue, const MatvecLaunch& launch) {
  const bool cpu = m_shape == WeightShape::kCpu;
  const bool matmul = kernel == kMatmul || kernel == kExpertMatmul;
  const bool experts = kernel == kExpertMatvec || kernel == kExpertMatmul;
  const bool launched = !cpu && !matmul;
  const auto key = std::make_tuple(typeIndex, kernel, epilogue, launched ? launch.workgroup : 0u,
                                   launched ? launch.rows : 0u);
  auto found = m_pipelines.find(key);
  if (found == m_pipelines.end()) {
    const TypeInfo& t = kTypes[typeIndex];
    const char* suffix = cpu                                    ? "cpu"
                         : matmul                               ? "gpu"
                         : m_shape == WeightShape::kGpuSubgroup ? "sg"
                                                                : "smem";
    const std::string name = std::string(matmul ? "weight_matmul_" : "weight_matvec_") + t.name +
                             "_" + suffix + (experts ? "_experts" : "");
    // Ids 0-2: workgroup, rows and tokens per invocation (1 where a shape
    // has no such constant); 3: the epilogue.
    std::vector<uint32_t> spec;
    if (cpu) {
      spec = !matmul ? std::vector<uint32_t>{kCpuWorkgroup, t.matvecRows, 1, epilogue}
                     : std::vector<uint32_t>{kCpuWorkgroup, t.matmulRows, t.matmulTokens, epilogue};
    } else {
      spec = !matmul ? std::vector<uint32_t>{launch.workgroup, launch.rows, 1, epilogue}
                     : std::vector<uint32_t>{kGpuWorkgroup, 1, 1, epilogue};
    }
    KVS_ASSIGN_OR_RETURN(Pipeline p, Pipeline::create(m_ctx, {name, experts ? 5u : 4u,
                                                              sizeof(push::WeightPush), spec,
                                                              experts  ? "experts"
                                                              : matmul ? "matmul"
                                                                       : "matvec"}));
    found = m_pipelines.emplace(key, std::move(p)).first;
  }
  return &found->second;
}

Expected<BufferRange> WeightKernels::bind(const BufferRange& range, uint64_t bytes,
                                          const char* what) const {
  const uint64_t align = m_ctx.limits().minStorageBufferOffsetAlignment;
  const uint64_t size = range.buffer->size();
  if (range.offset % align != 0) {
    return makeError(ErrorCode::kInvalidArgument,
                     "{} offset {} is not a multiple of the device's {}-byte alignment", what,
                     range.offset, align);
  }
  const uint64_t avail = range.offset > size ? 0
                         : range.bytes == VK_WHOLE_SIZE
                             ? size - range.offset
                             : std::min<uint64_t>(range.bytes, size - range.offset);
  if (avail < bytes) {
    return makeError(ErrorCode::kInvalidArgument, "{} need {} bytes but the binding holds {}", what,
                     bytes, avail);
  }
  if (bytes > m_ctx.limits().maxStorageBufferRange) {
    return makeError(ErrorCode::kUnsupported,
                     "{} take {} bytes, more than the device binds at once ({})", what, bytes,
                     m_ctx.limits().maxStorageBufferRange);
  }
  return BufferRange(*range.buffer, range.offset, bytes);
}

uint32_t WeightKernels::groups(uint64_t tasks, uint32_t perGroup) const {
  const uint64_t needed = (tasks + perGroup - 1) / perGroup;
  const uint64_t cap = m_cpuThreads ? uint64_t{m_cpuThreads} * kGroupsPerCpuThread
                                    : uint64_t{m_ctx.limits().maxComputeWorkGroupCount[0]};
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min(needed, cap)));
}

Status WeightKernels::matvec(Recorder& rec, TensorType type, const BufferRange& w,
                             const BufferRange& x, const BufferRange& y, uint32_t rows,
                             uint32_t cols, const Epilogue& epilogue) {
  return record(rec, type, kMatvec, w, x, y, 1, rows, cols, epilogue);
}

Status WeightKernels::matmul(Recorder& rec, TensorType type, const BufferRange& w,
                             const BufferRange& x, const BufferRange& y, uint32_t n, uint32_t rows,
                             uint32_t cols, const Epilogue& epilogue) {
  return record(rec, type, n == 1 ? kMatvec : kMatmul, w, x, y, n, rows, cols, epilogue);
}

Status WeightKernels::expertMatvec(Recorder& rec, TensorType type, const BufferRange& w,
                                   const BufferRange& x, const BufferRange& y, uint32_t rows,
                                   uint32_t cols, const ExpertRouting& routing,
                                   const Epilogue& epilogue) {
  if (!routing.ids) return makeError(ErrorCode::kInvalidArgument, "expert product without ids");
  return record(rec, type, kExpertMatvec, w, x, y, 1, rows, cols, epilogue, &routing);
}

Status WeightKernels::expertMatmul(Recorder& rec, TensorType type, const BufferRange& w,
                                   const BufferRange& x, const BufferRange& y, uint32_t rows,
                                   uint32_t cols, const ExpertRouting& routing,
                                   const Epilogue& epilogue) {
  if (!routing.groups)
    return makeError(ErrorCode::kInvalidArgument, "grouped expert product without groups");
  return record(rec, type, kExpertMatmul, w, x, y, routing.tokens, rows, cols, epilogue, &routing);
}

// An expert product (routing set) binds the stack's rows * experts rows,
// `pairs` outputs and (pairs - 1) / share + 1 inputs; workgroup rows z are
// the pairs (matvec) or the experts (matmul).
Status WeightKernels::record(Recorder& rec, TensorType type, Kernel kernel, const BufferRange& w,
                             const BufferRange& x, const BufferRange& y, uint32_t n, uint32_t rows,
                             uint32_t cols, const Epilogue& epilogue,
                             const ExpertRouting* routing) {
  const TypeInfo* t = findType(type);
  if (!t) return unsupportedType(type);
  if (m_shape == WeightShape::kCpu && !m_ctx.info().shaderInt64) {
    return makeError(ErrorCode::kUnsupported,
                     "{} has no 64-bit integers for the CPU weight kernels", m_ctx.info().name);
  }
  if (m_shape == WeightShape::kGpuSubgroup && !m_ctx.info().subgroupArithmetic) {
    return makeError(ErrorCode::kUnsupported, "{} has no subgroup arithmetic in compute shaders",
                     m_ctx.info().name);
  }
  if (rows == 0 || cols == 0 || n == 0) {
    return makeError(ErrorCode::kInvalidArgument, "empty weight product: {} tokens x [{}, {}]", n,
                     rows, cols);
  }
  if (cols % t->blockElements != 0) {
    return makeError(ErrorCode::kInvalidArgument,
                     "{} weights need columns in whole {}-value blocks, not {}", upper(t->name),
                     t->blockElements, cols);
  }
  const RowLayout layout = rowLayout(*t, cols);
  if (routing && (routing->pairs() == 0 || routing->experts == 0)) {
    return makeError(ErrorCode::kInvalidArgument, "expert product of {} pairs over {} experts",
                     routing->pairs(), routing->experts);
  }
  const uint32_t experts = routing ? routing->experts : 1;
  const uint32_t outputRows = routing ? routing->pairs() : n;
  const uint32_t inputRows = routing ? (routing->pairs() - 1) / routing->share() + 1 : n;
  const uint32_t zGroups = kernel == kExpertMatvec   ? outputRows
                           : kernel == kExpertMatmul ? experts
                                                     : 1;
  if (zGroups > m_ctx.limits().maxComputeWorkGroupCount[2]) {
    return makeError(ErrorCode::kUnsupported,
                     "{} expert products are more than the device dispatches at once ({})", zGroups,
                     m_ctx.limits().maxComputeWorkGroupCount[2]);
  }
  const uint64_t elements = uint64_t{rows} * experts * cols;
  // Shaders index words and elements with 32-bit integers.
  if (elements >= (1ull << 32) || uint64_t{inputRows} * cols >= (1ull << 32) ||
      uint64_t{outputRows} * rows >= (1ull << 32)) {
    return makeError(ErrorCode::kUnsupported,
                     "weight product {} tokens x [{}, {}] is too large for one dispatch", n, rows,
                     cols);
  }
  KVS_ASSIGN_OR_RETURN(BufferRange wb,
                       bind(w, roundUp(uint64_t{rows} * experts * layout.rowBytes, 4), "weights"));
  KVS_ASSIGN_OR_RETURN(BufferRange xb,
                       bind(x, uint64_t{inputRows} * cols * sizeof(float), "inputs"));
  KVS_ASSIGN_OR_RETURN(BufferRange yb,
                       bind(y, uint64_t{outputRows} * rows * sizeof(float), "outputs"));
  // Binding 3 is read only with a bias; otherwise y stands in for it.
  BufferRange biasb = yb;
  if (epilogue.bias) {
    KVS_ASSIGN_OR_RETURN(biasb,
                         bind(*epilogue.bias, uint64_t{rows} * experts * sizeof(float), "bias"));
  }
  // Binding 4 of the expert kernels: the ids (matvec) or the groups (matmul).
  std::optional<BufferRange> routeb;
  if (kernel == kExpertMatvec) {
    KVS_ASSIGN_OR_RETURN(routeb, bind(*routing->ids, uint64_t{outputRows} * 4, "expert ids"));
  } else if (kernel == kExpertMatmul) {
    KVS_ASSIGN_OR_RETURN(
        routeb, bind(*routing->groups, uint64_t{experts} * (1 + uint64_t{routing->tokens}) * 4,
                     "expert groups"));
  }
  const bool gated = epilogue.siluGate || epilogue.geluGate || epilogue.swigluOaiGate;
  const uint32_t flags = (epilogue.bias ? KVS_WEIGHT_BIAS : 0u) |
                         (epilogue.accumulate ? KVS_WEIGHT_ACCUMULATE : 0u) |
                         (epilogue.siluGate ? KVS_WEIGHT_SILU_GATE : 0u) |
                         (epilogue.geluGate ? KVS_WEIGHT_GELU_GATE : 0u) |
                         (epilogue.swigluOaiGate ? KVS_WEIGHT_SWIGLU_OAI_GATE : 0u);

  const auto typeIndex = static_cast<size_t>(t - kTypes);
  const MatvecLaunch launch = matvecLaunch(cols);
  KVS_ASSIGN_OR_RETURN(const Pipeline* p, pipeline(typeIndex, kernel, flags, launch));
  const push::WeightPush push{rows,
                              cols,
                              n,
                              static_cast<uint32_t>(layout.rowBytes / 4),
                              static_cast<uint32_t>(layout.planeOffset[1] / 4),
                              static_cast<uint32_t>(layout.planeOffset[2] / 4),
                              static_cast<uint32_t>(layout.planeOffset[3] / 4),
                              routing ? routing->share() : 1,
                              experts};
  // Workgroups, and what each round of them costs an invocation in loop
  // iterations (for the loop limit, gpu/loop_limit.h): a walk over a row's
  // units (value by value for a float row the unit does not divide) and the
  // per-row loops.
  const uint32_t unit = unitValues(*t);
  const uint64_t unitSteps = cols % unit == 0 ? cols / unit : cols;
  uint32_t count = 0;
  uint64_t rounds = 0, perRound = 0;
  if (m_shape == WeightShape::kCpu) {
    const bool vec = kernel == kMatvec || kernel == kExpertMatvec;
    const uint32_t taskRows = vec ? t->matvecRows : t->matmulRows;
    const uint64_t rowTasks = (rows + taskRows - 1) / taskRows;
    const uint64_t tokenTasks = vec ? 1 : (n + t->matmulTokens - 1) / t->matmulTokens;
    // An invocation takes a task (rows x tokens) per round.
    rounds = (rowTasks * tokenTasks + kCpuWorkgroup - 1) / kCpuWorkgroup;
    perRound = unitSteps + 2 * taskRows + 4;
    count = groups(rowTasks * tokenTasks, kCpuWorkgroup);
    // Expert pairs or experts multiply the workgroups: a CPU device's
    // threads are already busy with a few per product.
    count = std::max(1u, count / std::min(count, zGroups));
  } else if (kernel == kMatvec || kernel == kExpertMatvec) {
    // A workgroup takes launch.rows rows per round, its invocations a share
    // of the units each, then sum across the workgroup.
    rounds = (rows + launch.rows - 1) / launch.rows;
    perRound = 2 * ((unitSteps + launch.workgroup - 1) / launch.workgroup) + 2 * launch.rows + 16;
    count = groups(rounds, 1);
  } else {
    // A workgroup takes a tile per round, staging kstep columns per step.
    const uint64_t rowTiles = (rows + KVS_WEIGHT_TILE_ROWS - 1) / KVS_WEIGHT_TILE_ROWS;
    const uint64_t kstep = t->blockElements == 1 ? 32 : unit;
    const uint64_t perStep =
        4 + kstep + (KVS_WEIGHT_TILE_ROWS + KVS_WEIGHT_TILE_TOKENS) * kstep / kGpuWorkgroup;
    rounds = rowTiles * ((n + KVS_WEIGHT_TILE_TOKENS - 1) / KVS_WEIGHT_TILE_TOKENS);
    perRound = (cols + kstep - 1) / kstep * perStep;
    count = groups(rounds, 1);
  }
  count = groupsWithinLoopLimit(rounds, perRound, count, m_ctx.info().loopIterationLimit,
                                m_ctx.limits().maxComputeWorkGroupCount[0]);
  if (routing) {
    rec.dispatch(*p, {wb, xb, yb, biasb, *routeb}, push, count, 1, zGroups);
  } else {
    rec.dispatch(*p, {wb, xb, yb, biasb}, push, count);
  }
  // The weights once (an expert product: its expert's rows once per pair,
  // or at most once per expert grouped), the inputs, the outputs (also read
  // by the residual and gate epilogues) and the bias.
  const uint64_t outputs = uint64_t{outputRows} * rows;
  const uint64_t weightReads = kernel == kExpertMatvec   ? outputRows
                               : kernel == kExpertMatmul ? std::min(experts, outputRows)
                                                         : 1;
  rec.traffic(weightReads * rows * layout.rowBytes + uint64_t{inputRows} * cols * sizeof(float) +
                  outputs * sizeof(float) * (epilogue.accumulate || gated ? 2 : 1) +
                  (epilogue.bias ? weightReads * rows * sizeof(float) : 0),
              2 * outputs * cols);
  return okStatus();
}

}  // namespace kvscope::gpu
