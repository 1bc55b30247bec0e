#include "backend/vulkan_step.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "backend/cpu_matmul.h"
#include "backend/cpu_ops.h"
#include "backend/vulkan_backend.h"
#include "shaders/gates.h"

namespace kvscope::backend {

using model::Act;

namespace {
constexpr uint32_t kLogitsSlot = ~0u;

static_assert(float(KVS_SWIGLU_OAI_ALPHA) == model::kSwigluOaiAlpha &&
                  float(KVS_SWIGLU_OAI_LIMIT) == model::kSwigluOaiLimit,
              "shaders/gates.h's clamped SwiGLU is the model's");

// A product's epilogue: the model's, with its bias's device copy.
gpu::Epilogue deviceEpilogue(const model::Epilogue& e, const gpu::BufferRange* bias) {
  return {.bias = bias,
          .accumulate = e.accumulate,
          .siluGate = e.gate == model::Gate::kSilu,
          .geluGate = e.gate == model::Gate::kGelu,
          .swigluOaiGate = e.gate == model::Gate::kSwigluOai};
}
}  // namespace

VulkanStep::VulkanStep(VulkanBackend& backend, std::span<const int32_t> tokens, uint32_t pos0,
                       bool allLogits, bool lastChunk)
    : m_b(backend),
      m_tokens(tokens),
      m_n(static_cast<uint32_t>(tokens.size())),
      m_pos0(pos0),
      m_logitRows(allLogits ? m_n : 1),
      m_lastChunk(lastChunk || allLogits) {}

// Buffers of the backend's activation capacity, made on a slot's first use
// and kept until the capacity grows. A slot asked for wider than it is (a
// model whose layers differ in width: Gemma 4's heads) gets a new buffer;
// the old one, which dispatches recorded earlier in the step may use, is
// retired until the step has run. Its values are not carried over: a
// description rewrites a slot whose width changes.
// A failure is the step's next op's error (act() returns no status); a slot
// whose buffer could not be made is not kept.
Act VulkanStep::act(std::string_view slot, uint32_t width) {
  VulkanBackend::Slots& slots = m_b.m_slots;
  auto make = [&]() -> std::optional<gpu::Buffer> {
    auto made = gpu::Buffer::create(m_b.m_shared->context(),
                                    size_t{m_b.m_act->capacity} * width * sizeof(float));
    if (made.ok()) return std::move(made).value();
    if (m_error.ok()) m_error = made.error();
    return std::nullopt;
  };
  auto it = std::find(slots.names.begin(), slots.names.end(), slot);
  if (it == slots.names.end()) {
    std::optional<gpu::Buffer> made = make();
    if (!made) return {0, width};
    slots.buffers.push_back(std::move(*made));
    slots.names.emplace_back(slot);
    slots.widths.push_back(width);
    it = slots.names.end() - 1;
  }
  const auto index = static_cast<uint32_t>(it - slots.names.begin());
  if (width > slots.widths[index]) {
    std::optional<gpu::Buffer> made = make();
    if (!made) return {0, width};
    slots.retired.push_back(std::exchange(slots.buffers[index], std::move(*made)));
    slots.widths[index] = width;
  }
  return {index, width};
}

gpu::Buffer& VulkanStep::buffer(Act a) {
  return a.slot == kLogitsSlot ? m_b.m_act->logits : m_b.m_slots.buffers[a.slot];
}

// Resource indices: 0 the logits, 1 the attention scratch (every layer's
// attention shares it), then the slots.
void VulkanStep::order(std::initializer_list<Act> reads, std::initializer_list<Act> writes,
                       bool scratch) {
  const auto index = [](Act a) { return a.slot == kLogitsSlot ? size_t{0} : size_t{a.slot} + 2; };
  const size_t resources = m_b.m_slots.names.size() + 2;
  m_written.resize(resources);
  m_read.resize(resources);
  // Read after write, write after write, write after read.
  bool hazard = scratch && (m_written[1] || m_read[1]);
  for (Act a : reads) hazard = hazard || m_written[index(a)];
  for (Act a : writes) hazard = hazard || m_written[index(a)] || m_read[index(a)];
  if (hazard) {
    m_b.m_rec->barrier();
    std::fill(m_written.begin(), m_written.end(), false);
    std::fill(m_read.begin(), m_read.end(), false);
  }
  for (Act a : reads) m_read[index(a)] = true;
  for (Act a : writes) m_written[index(a)] = true;
  if (scratch) m_written[1] = true;
}

// A copy of the captured op output to a host buffer, read after the submit.
Status VulkanStep::captured(Act out, model::OpName name) {
  // A prefill split into chunks computes the logit rows of its last one only.
  if ((out.logitRows && !m_lastChunk) || !m_b.m_dump.wants(name)) return okStatus();
  m_dumpWidth = out.width;
  const size_t bytes = size_t{rows(out)} * out.width * sizeof(float);
  KVS_ASSIGN_OR_RETURN(m_dump,
                       gpu::Buffer::create(m_b.m_shared->context(), bytes, gpu::MemoryUse::kHost));
  m_b.m_rec->copy(buffer(out), 0, m_dump, 0, bytes);
  return okStatus();
}

Status VulkanStep::collectDump() {
  if (m_dump.size() == 0) return okStatus();
  std::vector<float> values(m_dump.size() / sizeof(float));
  KVS_TRY(m_dump.download(std::span<float>(values)));
  m_b.m_dump.append(values, m_dumpWidth);
  return okStatus();
}

Expected<Act> VulkanStep::logitRows(Act x, model::OpName name) {
  KVS_TRY(m_error);
  Act out = act("logit_rows", x.width);
  out.logitRows = true;
  order({x}, {out});
  const size_t rowBytes = size_t{x.width} * sizeof(float);
  m_b.m_rec->copy(buffer(x), (m_n - m_logitRows) * rowBytes, buffer(out), 0,
                  m_logitRows * rowBytes);
  KVS_TRY(captured(out, name));
  return out;
}

Act VulkanStep::logits(uint32_t vocab) {
  return {kLogitsSlot, vocab, true};
}

Status VulkanStep::embed(const model::TensorView& table, Act out, float scale, model::OpName name) {
  KVS_TRY(m_error);
  std::vector<float> rows(size_t{m_n} * out.width);
  for (uint32_t t = 0; t < m_n; ++t)
    cpu::dequantizeRow(table, m_tokens[t], {&rows[size_t{t} * out.width], out.width});
  if (scale != 1.0f)
    for (float& x : rows) x *= scale;
  KVS_TRY(buffer(out).upload(std::span<const float>(rows)));
  return captured(out, name);
}

Status VulkanStep::scale(Act x, float s, model::OpName name) {
  KVS_TRY(m_error);
  order({x}, {x});
  KVS_TRY(m_b.m_shared->kernels().scale(*m_b.m_rec, buffer(x), rows(x) * x.width, s));
  return captured(x, name);
}

Status VulkanStep::add(Act x, Act out, model::OpName name) {
  KVS_TRY(m_error);
  if (x.width != out.width)
    return makeError(ErrorCode::kInternal, "add of {} values to {}", x.width, out.width);
  order({x, out}, {out});
  KVS_TRY(m_b.m_shared->kernels().add(*m_b.m_rec, buffer(x), buffer(out), rows(x) * x.width));
  return captured(out, name);
}

Status VulkanStep::gatedMul(model::Gate act, Act gate, Act up, uint32_t upFirst,
                            model::OpName name) {
  KVS_TRY(m_error);
  if (act == model::Gate::kNone || upFirst + gate.width > up.width) {
    return makeError(ErrorCode::kInternal, "gated product of columns [{}, {}) of {}", upFirst,
                     upFirst + gate.width, up.width);
  }
  const gpu::Kernels::Gate g = act == model::Gate::kSilu   ? gpu::Kernels::Gate::kSilu
                               : act == model::Gate::kGelu ? gpu::Kernels::Gate::kGelu
                                                           : gpu::Kernels::Gate::kSwigluOai;
  order({gate, up}, {gate});
  KVS_TRY(m_b.m_shared->kernels().gatedMul(*m_b.m_rec, g, buffer(gate), buffer(up), rows(gate),
                                           gate.width, up.width, upFirst));
  return captured(gate, name);
}

Status VulkanStep::softCap(Act x, float cap, model::OpName name) {
  KVS_TRY(m_error);
  order({x}, {x});
  KVS_TRY(m_b.m_shared->kernels().softCap(*m_b.m_rec, buffer(x), rows(x) * x.width, cap));
  return captured(x, name);
}

Status VulkanStep::rmsnorm(Act x, const model::TensorView* weight, Act out, uint32_t group,
                           float eps, model::OpName name) {
  KVS_TRY(m_error);
  order({x}, {out});
  KVS_TRY(m_b.m_shared->kernels().rmsnorm(*m_b.m_rec, buffer(x),
                                          weight ? &m_b.m_shared->vector(*weight) : nullptr,
                                          buffer(out), group, rows(x) * x.width / group, eps));
  return captured(out, name);
}

Status VulkanStep::rmsnormAdd(Act x, const model::TensorView& weight, Act out, float eps,
                              model::OpName name) {
  KVS_TRY(m_error);
  order({x, out}, {out});
  KVS_TRY(m_b.m_shared->kernels().rmsnorm(*m_b.m_rec, buffer(x), &m_b.m_shared->vector(weight),
                                          buffer(out), x.width, rows(x), eps, true));
  return captured(out, name);
}

Status VulkanStep::matmul(const model::TensorView& w, Act x, Act out, const model::Epilogue& e,
                          model::OpName name) {
  KVS_TRY(m_error);
  KVS_TRY(model::checkEpilogue(e, out.width));
  order({x, out}, {out});
  const VulkanModel::Matrix& m = m_b.m_shared->matrix(w);
  std::optional<gpu::BufferRange> bias;
  if (e.bias) bias.emplace(m_b.m_shared->vector(*e.bias));
  KVS_TRY(m_b.m_shared->weightKernels().matmul(*m_b.m_rec, m.type, m.buffer, buffer(x), buffer(out),
                                               rows(x), m.rows, m.cols,
                                               deviceEpilogue(e, bias ? &*bias : nullptr)));
  return captured(out, name);
}

// One angle table per step and RoPE spec, written on the host at the spec's
// first rope() into a host-visible buffer of its own (the step reads them all
// after the submit).
Status VulkanStep::rope(Act x, uint32_t heads, uint32_t headDim, const model::RopeSpec& spec,
                        model::OpName name) {
  KVS_TRY(m_error);
  auto it = std::find(m_ropeSpecs.begin(), m_ropeSpecs.end(), &spec);
  std::vector<gpu::Buffer>& tables = m_b.m_act->ropeTables;
  const auto index = static_cast<size_t>(it - m_ropeSpecs.begin());
  if (it == m_ropeSpecs.end()) {
    const size_t bytes = size_t{m_b.m_act->capacity} * spec.dims * sizeof(float);
    if (tables.size() <= index) tables.emplace_back();
    if (tables[index].size() < bytes) {
      KVS_ASSIGN_OR_RETURN(tables[index], gpu::Buffer::create(m_b.m_shared->context(), bytes,
                                                              gpu::MemoryUse::kHost));
    }
    std::vector<float> angles(size_t{m_n} * spec.dims);
    cpu::ropeTable(spec, m_pos0, m_n, angles);
    KVS_TRY(tables[index].upload(std::span<const float>(angles)));
    m_ropeSpecs.push_back(&spec);
  }
  order({x}, {x});
  KVS_TRY(m_b.m_shared->kernels().rope(*m_b.m_rec, buffer(x), tables[index], m_n, heads, headDim,
                                       spec.dims, spec.style == model::RopeStyle::kNeox,
                                       spec.scale));
  return captured(x, name);
}

Status VulkanStep::attention(Act q, Act k, Act v, Act out, const model::AttentionSpec& spec,
                             model::OpName name) {
  KVS_TRY(m_error);
  KVS_TRY(model::checkAttentionSpec(spec, "Vulkan"));
  order({q, k, v}, {out}, true);
  VulkanBackend& b = m_b;
  gpu::Recorder& rec = *b.m_rec;
  if (b.m_probeRow >= 0) {  // this token's K and V rows, for the codec error meter
    const size_t row = size_t{spec.nHeadKv} * spec.headDim * sizeof(float);
    const size_t stride = size_t{b.m_layout.widestKv()} * sizeof(float);
    const auto t = static_cast<size_t>(b.m_probeRow);
    rec.copy(buffer(k), t * row, b.m_probe, (size_t{spec.layer} * 2) * stride, row);
    rec.copy(buffer(v), t * row, b.m_probe, (size_t{spec.layer} * 2 + 1) * stride, row);
  }
  // A window layer's few rows are attended whole, never through the indexer,
  // so it has no sidecar.
  const gpu::IndexerBuffers* index = b.m_index.get();
  KVS_TRY(b.m_shared->attention().writeKv(
      rec, b.m_layout, b.pagesOf(spec.layer), spec.layer, buffer(k), buffer(v), m_n, m_pos0,
      b.m_act->scratch, index && index->indexes(spec.layer) ? index : nullptr, b.tailRing()));
  rec.barrier();
  return attend(q, out, spec, true, name);
}

// A KV-shared layer: the rows its source layer wrote earlier in the step.
Status VulkanStep::attendCache(Act q, Act out, const model::AttentionSpec& spec,
                               model::OpName name) {
  KVS_TRY(m_error);
  KVS_TRY(model::checkAttentionSpec(spec, "Vulkan"));
  order({q}, {out}, true);
  return attend(q, out, spec, false, name);
}

Status VulkanStep::attend(Act q, Act out, const model::AttentionSpec& spec, bool owner,
                          model::OpName name) {
  VulkanBackend& b = m_b;
  const gpu::IndexerBuffers* index = b.m_index.get();
  // m_selectStep implies the indexer is on; only global layers are indexed,
  // and the first ones attend whole (IndexerOptions::denseLayers).
  const bool indexed =
      b.m_selectStep && index->indexes(spec.layer) && b.m_indexer.selects(spec.layer);
  std::optional<gpu::BufferRange> sinks;
  if (spec.sinks) sinks.emplace(b.m_shared->vector(*spec.sinks));
  const gpu::SparseAttention sparse{
      .sparseV = b.m_indexer.sparseV,
      .indexer = indexed ? index : nullptr,
      .scale = spec.scale,
      .window = spec.window,
      .sinks = sinks ? &*sinks : nullptr,
      .recorded = owner,
      .denseHeads = indexed ? std::span<const uint32_t>(b.m_denseHeads[spec.layer])
                            : std::span<const uint32_t>()};
  KVS_TRY(b.m_shared->attention().attend(*b.m_rec, b.m_layout, b.pagesOf(spec.layer), spec.layer,
                                         buffer(q), buffer(out), m_n, m_pos0, spec.nHead,
                                         b.m_act->scratch, sparse, b.tailRing()));
  return captured(out, name);
}

// The router's scores (a product with its bias), the picks and weights of
// moe_route, the chosen experts' gate, up (gated in its epilogue) and down
// products (per pair in a decode step, grouped by expert in a prefill), and
// moe_sum's weighted sum into the residual: the CPU backend's arithmetic
// (cpu_step.cpp moe()) in 6 dispatches (7 in a prefill).
Status VulkanStep::moe(Act x, const model::MoeSpec& spec, Act out, model::OpName name) {
  KVS_TRY(m_error);
  // moe_sum scales a product that already holds its bias, where the CPU adds
  // the bias after the scale: no architecture has both.
  if (spec.downScale && spec.downBias) {
    return makeError(ErrorCode::kUnsupported,
                     "{}: experts with both output scales and biases have no Vulkan kernel",
                     name.str());
  }
  const uint32_t width = x.width, used = spec.nUsed, n = rows(x);
  const Act routerIn = spec.routerInput.width != 0 ? spec.routerInput : x;
  const Act scores = act("moe_scores", spec.nExpert);
  const Act ids = act("moe_ids", used);  // uint32 in float-sized cells
  const Act weights = act("moe_weights", used);
  const Act gate = act("moe_gate", used * spec.ff);
  const Act products = act("moe_product", used * width);
  // Accumulating: the sum in its own buffer, added to `out` (the residual).
  const Act moeOut = spec.accumulate ? act("moe_out", width) : out;
  const Act groups = act("moe_groups", 2 * spec.nExpert);  // [experts] + [experts][n] uint32
  KVS_TRY(m_error);
  VulkanModel& vm = *m_b.m_shared;
  gpu::Recorder& rec = *m_b.m_rec;
  gpu::WeightKernels& wk = vm.weightKernels();
  // A vector's device copy (biases, expert scales), or none.
  const auto vectorOf = [&](const model::TensorView* t) -> std::optional<gpu::BufferRange> {
    if (!t) return std::nullopt;
    return gpu::BufferRange(vm.vector(*t));
  };

  order({routerIn}, {scores});
  const VulkanModel::Matrix& router = vm.matrix(*spec.router);
  const auto routerBias = vectorOf(spec.routerBias);
  KVS_TRY(wk.matmul(rec, router.type, router.buffer, buffer(routerIn), buffer(scores), n,
                    router.rows, router.cols, {.bias = routerBias ? &*routerBias : nullptr}));
  order({scores}, {ids, weights});
  const float scale = spec.scale != 0.0f ? spec.scale : 1.0f;
  KVS_TRY(vm.kernels().moeRoute(rec, buffer(scores), buffer(ids), buffer(weights), n, spec.nExpert,
                                used, spec.weighting == model::ExpertWeighting::kSoftmaxTopK,
                                scale));
  if (name.layer >= 0 && m_b.m_act->expertIds.size() > 0) {  // the picks, for the ExpertLog
    const size_t bytes = size_t{n} * used * sizeof(uint32_t);
    rec.copy(buffer(ids), 0, m_b.m_act->expertIds, static_cast<size_t>(name.layer) * bytes, bytes);
  }

  // A prefill groups the pairs by expert (each expert's weights read once per
  // tile of its tokens); a decode step's pairs each read their expert.
  const bool grouped = n > 1;
  const gpu::BufferRange idRange(buffer(ids)), groupRange(buffer(groups));
  if (grouped) {
    order({ids}, {groups});
    KVS_TRY(vm.kernels().moeGroup(rec, buffer(ids), buffer(groups), n, spec.nExpert, used));
  }
  const Act routes = grouped ? groups : ids;
  const gpu::ExpertRouting shared{&idRange, &groupRange, n, used, spec.nExpert, true};
  gpu::ExpertRouting own = shared;
  own.sharedInput = false;
  const auto product = [&](const VulkanModel::Matrix& m, Act in, Act to,
                           const gpu::ExpertRouting& routing, const gpu::Epilogue& e) {
    return grouped ? wk.expertMatmul(rec, m.type, m.buffer, buffer(in), buffer(to), m.rows, m.cols,
                                     routing, e)
                   : wk.expertMatvec(rec, m.type, m.buffer, buffer(in), buffer(to), m.rows, m.cols,
                                     routing, e);
  };
  const auto gateBias = vectorOf(spec.gateBias), upBias = vectorOf(spec.upBias),
             downBias = vectorOf(spec.downBias);
  // A fused gate/up stack is read as its two halves (VulkanModel::gateUp).
  const VulkanModel::GateUp* fused = spec.gateUp ? &vm.gateUp(*spec.gateUp) : nullptr;
  order({x, routes}, {gate});
  KVS_TRY(product(fused ? fused->gate : vm.matrix(*spec.gate), x, gate, shared,
                  {.bias = gateBias ? &*gateBias : nullptr}));
  order({x, routes, gate}, {gate});
  KVS_TRY(product(fused ? fused->up : vm.matrix(*spec.up), x, gate, shared,
                  deviceEpilogue({.gate = spec.act}, upBias ? &*upBias : nullptr)));
  order({gate, routes}, {products});
  KVS_TRY(product(vm.matrix(*spec.down), gate, products, own,
                  {.bias = downBias ? &*downBias : nullptr}));
  const auto downScale = vectorOf(spec.downScale);
  const gpu::BufferRange residual(buffer(out));
  order({products, weights, ids, out}, {moeOut, out});
  KVS_TRY(vm.kernels().moeSum(rec, buffer(products), buffer(weights), buffer(moeOut),
                              spec.accumulate ? &residual : nullptr, n, used, width,
                              {downScale ? &*downScale : nullptr, &idRange}));
  KVS_TRY(captured(moeOut, {"ffn_moe_out", name.layer}));
  return captured(out, name);
}

}  // namespace kvscope::backend
