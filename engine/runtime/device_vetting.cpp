#include "runtime/device_vetting.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "backend/logit_comparison.h"
#include "backend/vulkan_backend.h"
#include "core/log.h"
#include "core/paths.h"
#include "gpu/device_info.h"
#include "gpu/pipeline.h"
#include "kv/auto_policy.h"
#include "model/synthetic_model.h"
#include "shaders/spirv_registry.h"

namespace kvscope::runtime {
namespace {

constexpr double kWorstRel = 2e-2, kMeanRel = 1e-3;
// Decode steps: the first kDense with dense attention, the rest indexed.
constexpr uint32_t kDecode = 6, kDense = 3;
// The synthetic model's widths: multiples of 256, so a row of any weight type
// is whole blocks, and wider than one workgroup, so the kernels loop.
constexpr uint32_t kEmbd = 512, kFf = 1024, kVocab = 512;

// The 2-D tensors a synthetic model has, by name without "blk.N.".
constexpr std::string_view kMatrices[] = {
    "token_embd.weight",  "output.weight",   "attn_q.weight", "attn_k.weight",  "attn_v.weight",
    "attn_output.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};

// "blk.12.attn_q.weight" -> "attn_q.weight"; other names unchanged.
std::string_view withoutLayer(std::string_view name) {
  if (!name.starts_with("blk.")) return name;
  const size_t dot = name.find('.', 4);
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

// FNV-1a over the SPIR-V of every pipeline as it would be built (a
// KernelSubstitution included): changes whenever a kernel does.
uint64_t kernelsHash() {
  uint64_t h = 1469598103934665603ull;
  for (const shaders::SpirvEntry& e : shaders::all()) {
    for (uint32_t word : gpu::kernelCode(e.name)) {
      for (int b = 0; b < 4; ++b) h = (h ^ ((word >> (8 * b)) & 0xffu)) * 1099511628211ull;
    }
  }
  return h;
}

std::string kernelsTag() {
  return fmt::format("kernels {:016x}", kernelsHash());
}

std::string deviceKey(const gpu::DeviceInfo& d, const std::string& kernels) {
  return fmt::format("{:04x}:{:04x} {} | {} | Vulkan {} | {}", d.vendorId, d.deviceId, d.name,
                     d.driverInfo, d.apiVersion, kernels);
}

// The indexed decode steps' attention, at the vetting run's scale: one page
// picked by score besides 4 sinks and a window of 4, with sparse V, with the
// policy's scorer and page size. Every vetting runs it, whether the policy
// turns the indexer on or not: the app turns it on mid-chat without a
// re-encode (Backend::setIndexer), and its kernels depend only on the scorer.
kv::IndexerOptions vetAttention(const kv::IndexerOptions& asked) {
  kv::IndexerOptions o;
  o.pageRows = asked.pageRows;
  o.pageScore = asked.pageScore;
  o.topK = o.pageRows;
  o.window = 4;
  o.sinks = 4;
  o.sparseV = 0.01f;
  o.denseLayers = 0;  // every layer selects: the kernels are what is vetted
  return o;
}

// A window layer's window: shorter than the prefill (vetPrefill), so the
// window's start moves through the cached rows.
constexpr uint32_t kVetWindow = 7;
// A precision tail's rows: shorter than the prefill and longer than the
// indexer's window (vetAttention), so both passes and the grown selection run.
constexpr uint32_t kVetTail = 6;

// A prefill of a few pages, so that an indexed step leaves some out.
uint32_t vetPrefill(const kv::IndexerOptions& attention) {
  return attention.sinks + attention.window + 3 * attention.pageRows;
}

// Opens the synthetic model from a temporary file, removed once it is mapped.
Expected<std::shared_ptr<const model::ModelFile>> openSynthetic(
    const model::SyntheticModelSpec& spec) {
  static std::atomic<uint32_t> counter{0};
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) return makeError(ErrorCode::kIo, "no temporary folder: {}", ec.message());
  const std::filesystem::path path =
      dir / fmt::format("kvscope-vet-{}-{}.gguf", ::getpid(), counter++);
  KVS_TRY(model::writeSyntheticModel(spec, path));
  auto opened = model::ModelFile::open(path);
  std::filesystem::remove(path, ec);
  if (!opened.ok()) return opened.error();
  return std::shared_ptr<const model::ModelFile>(std::move(opened).value());
}

nlohmann::json readVerdicts(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();  // a corrupt file is measured anew
}

// The remembered verdict for `v.key`, when the file holds a well-formed one.
bool readVerdict(const nlohmann::json& all, DeviceVerdict& v) {
  const auto it = all.find(v.key);
  if (it == all.end() || !it->is_object()) return false;
  const nlohmann::json& e = *it;
  for (const char* field : {"worst_rel", "mean_rel", "steps", "argmax_agree"})
    if (!e.contains(field) || !e[field].is_number()) return false;
  if (!e.contains("passed") || !e["passed"].is_boolean()) return false;
  if (e.contains("failure") && !e["failure"].is_string()) return false;
  if (e.contains("selecting_steps") && !e["selecting_steps"].is_number_unsigned()) return false;
  v.passed = e["passed"].get<bool>();
  v.worstRel = e["worst_rel"].get<double>();
  v.meanRel = e["mean_rel"].get<double>();
  v.steps = e["steps"].get<uint32_t>();
  v.argmaxAgree = e["argmax_agree"].get<uint32_t>();
  v.failure = e.value("failure", std::string());
  v.selectingSteps = e.value("selecting_steps", 0u);
  v.remembered = true;
  return true;
}

// Records `v`, dropping verdicts of other kernel builds (they are never read again).
void writeVerdict(const std::filesystem::path& file, nlohmann::json all, const DeviceVerdict& v,
                  const std::string& kernels) {
  for (auto it = all.begin(); it != all.end();) {
    if (it.key().find(kernels) == std::string::npos)
      it = all.erase(it);
    else
      ++it;
  }
  // JSON has no infinity (a non-finite logit's measure): store the largest double.
  const auto finite = [](double x) {
    return std::isfinite(x) ? x : std::numeric_limits<double>::max();
  };
  all[v.key] = {{"passed", v.passed},
                {"worst_rel", finite(v.worstRel)},
                {"mean_rel", finite(v.meanRel)},
                {"steps", v.steps},
                {"argmax_agree", v.argmaxAgree},
                {"failure", v.failure},
                {"selecting_steps", v.selectingSteps}};
  // Device and driver names come from the driver: replace what is not UTF-8.
  const std::string text = all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!paths::writeFileAtomic(file, text.data(), text.size()).ok())
    log::warn("could not remember the Vulkan device check in {}; it runs again next time",
              file.string());
}

// Runs the same tokens through both backends, a prefill then kDecode single
// steps (after kDense of them, with `indexed` attention), and adds every
// step's logits.
Status compare(backend::Backend& cpu, backend::Backend& gpu, const kv::IndexerOptions& indexed,
               uint32_t nVocab, backend::LogitComparison& c, uint32_t& selectingSteps) {
  const uint32_t prefill = vetPrefill(indexed);
  std::vector<int32_t> tokens;
  for (uint32_t i = 0; i < prefill + kDecode; ++i)
    tokens.push_back(static_cast<int32_t>((i * 37u + 11u) % nVocab));
  backend::Logits a, b;
  for (uint32_t at = 0; at < tokens.size(); at += at == 0 ? prefill : 1) {
    const uint32_t n = at == 0 ? prefill : 1;
    if (at == prefill + kDense) {
      KVS_TRY(cpu.setIndexer(indexed));
      KVS_TRY(gpu.setIndexer(indexed));
    }
    const backend::Batch batch{std::span(tokens).subspan(at, n)};
    KVS_TRY(cpu.forward(batch, a));
    KVS_TRY(gpu.forward(batch, b));
    c.add(a.last(), b.last());
    // A step the device's indexer really selected for (some rows left out).
    const backend::IndexerStep step = gpu.indexerStep();
    if (std::any_of(step.layers.begin(), step.layers.end(), [](const auto& layer) {
          return std::any_of(layer.heads.begin(), layer.heads.end(),
                             [](const auto& runs) { return !runs.empty(); });
        }))
      ++selectingSteps;
  }
  return okStatus();
}

Expected<DeviceVerdict> measure(int device, const VetSpec& spec, DeviceVerdict verdict) {
  KVS_ASSIGN_OR_RETURN(const model::SyntheticModelSpec synthetic, vetModelSpec(spec));
  KVS_ASSIGN_OR_RETURN(const auto m, openSynthetic(synthetic));
  std::vector<kv::LayerSchemes> schemes(synthetic.nLayer);
  for (size_t i = 0; i < schemes.size() && !spec.layers.empty(); ++i)
    schemes[i] = spec.layers[i % spec.layers.size()];
  const uint32_t tail = spec.tail ? kVetTail : 0;
  KVS_ASSIGN_OR_RETURN(auto cpu,
                       backend::CpuBackend::create(m, {.kvSchemes = schemes, .kvTail = tail}));
  KVS_ASSIGN_OR_RETURN(auto gpu, backend::VulkanBackend::create(m, {.device = device,
                                                                    .timing = false,
                                                                    .kvSchemes = schemes,
                                                                    .kvTail = tail,
                                                                    .errorStride = 0}));
  backend::LogitComparison c;
  // A device that opens but cannot run the model is the one to avoid most.
  if (Status s = compare(*cpu, *gpu, vetAttention(spec.attention), synthetic.nVocab, c,
                         verdict.selectingSteps);
      !s.ok()) {
    verdict.failure = s.error().message;
    return verdict;
  }
  verdict.worstRel = c.worstRel;
  verdict.meanRel = c.meanRel;
  verdict.steps = c.steps;
  verdict.argmaxAgree = c.argmaxAgree;
  verdict.passed = c.worstRel <= kWorstRel && c.meanRel <= kMeanRel && c.argmaxAgree + 1 >= c.steps;
  return verdict;
}

}  // namespace

Expected<model::SyntheticModelSpec> vetModelSpec(const VetSpec& v) {
  model::SyntheticModelSpec m;
  m.architecture = v.architecture;
  m.nEmbd = kEmbd;
  m.nFf = kFf;
  m.nVocab = kVocab;
  m.headDim = v.headDim;
  m.ropeDims = v.ropeDims;
  m.ropeLinearFactor = v.ropeLinearFactor;
  m.ropeFreqFactors = v.ropeFreqFactors;
  m.tiedEmbeddings = v.tiedEmbeddings;
  if (v.window) {
    m.slidingWindow = kVetWindow;
    m.windowPeriod = 2;  // window layers 0, 2, ...; global layers 1, 3, ...
    m.headDimWindow = v.windowHeadDim;
    m.ropeDimsWindow = v.windowRopeDims;
  }
  m.weightType = gguf::TensorType::kF16;
  // Enough layers for every cache pair and every type a layer tensor comes in.
  size_t layers = std::max<size_t>(2, v.layers.size());
  for (const auto& [name, types] : v.weightTypes)
    if (name != "token_embd.weight" && name != "output.weight")
      layers = std::max(layers, types.size());
  m.nLayer = static_cast<uint32_t>(layers);
  m.contextLength = 4096;
  // The fewest KV heads whose query width is whole blocks of attn_output's
  // types in every layer (the model's own head count always is); the window
  // layers' KV heads share the query heads by their own gqa.
  const uint32_t windowGqa = v.windowGqa != 0 ? v.windowGqa : v.gqa;
  const uint32_t windowHeadDim = v.windowHeadDim != 0 ? v.windowHeadDim : v.headDim;
  const auto out = v.weightTypes.find("attn_output.weight");
  const auto fits = [&](uint32_t kvHeads) {
    const uint64_t heads = uint64_t{kvHeads} * v.gqa;
    if (v.window && heads % windowGqa != 0) return false;
    if (out == v.weightTypes.end()) return true;
    return std::all_of(out->second.begin(), out->second.end(), [&](gguf::TensorType t) {
      const uint32_t block = gguf::traits(t).blockElements;
      return heads * v.headDim % block == 0 && (!v.window || heads * windowHeadDim % block == 0);
    });
  };
  m.nHeadKv = 1;
  while (!fits(m.nHeadKv) && m.nHeadKv < 64) m.nHeadKv *= 2;
  if (!fits(m.nHeadKv))
    return makeError(ErrorCode::kUnsupported, "no small model of this shape can be built");
  m.nHead = m.nHeadKv * v.gqa;
  if (v.window && windowGqa != v.gqa) {
    for (uint32_t l = 0; l < m.nLayer; ++l)
      m.layerHeadsKv.push_back(l % 2 == 0 ? m.nHead / windowGqa : m.nHeadKv);
  }
  for (const auto& [name, types] : v.weightTypes) {
    if (types.empty()) continue;
    if (name == "token_embd.weight" || name == "output.weight") {
      m.tensorTypes[name] = types.front();
      continue;
    }
    for (uint32_t i = 0; i < m.nLayer; ++i)
      m.tensorTypes[fmt::format("blk.{}.{}", i, name)] = types[i % types.size()];
  }
  return m;
}

Expected<VetSpec> vetSpecFor(const model::ModelFile& model, const kv::KvPolicy& policy) {
  const model::ModelConfig& c = model.config();
  VetSpec s;
  s.architecture = c.architecture;
  // The global layers' shape, and the window layers' where it differs
  // (VulkanModel::checkRuns: every layer has nHead query heads).
  uint32_t global = 0, window = 0;
  while (global < c.nLayer && c.isWindowLayer(global)) ++global;
  while (window < c.nLayer && !c.isWindowLayer(window)) ++window;
  if (global == c.nLayer) global = 0;
  s.headDim = c.headDimOf(global);
  s.gqa = c.nHead / c.headsKvOf(global);
  s.ropeDims = c.ropeDimsOf(global);
  if (window < c.nLayer) {
    const uint32_t gqa = c.nHead / c.headsKvOf(window);
    if (c.headDimOf(window) != s.headDim || gqa != s.gqa || c.ropeDimsOf(window) != s.ropeDims) {
      s.windowHeadDim = c.headDimOf(window);
      s.windowGqa = gqa;
      s.windowRopeDims = c.ropeDimsOf(window);
    }
  }
  s.ropeLinearFactor = c.rope.scaling == model::RopeScaling::kLinear ? c.rope.factor : 1.0f;
  s.ropeFreqFactors = c.rope.scaling == model::RopeScaling::kFreqFactors;
  s.tiedEmbeddings = c.tiedEmbeddings;
  s.window = c.slidingWindow > 0;
  for (const model::TensorView& t : model.all()) {
    const std::string_view name = withoutLayer(t.name);
    if (std::find(std::begin(kMatrices), std::end(kMatrices), name) == std::end(kMatrices))
      continue;
    std::vector<gguf::TensorType>& types = s.weightTypes[std::string(name)];
    if (std::find(types.begin(), types.end(), t.type) == types.end()) types.push_back(t.type);
  }
  for (auto& [name, types] : s.weightTypes) std::sort(types.begin(), types.end());

  // Every (K, V) pair a layer gets, in first-use order (attention kernels
  // are built per pair). `auto` may pair any two of its candidates: each runs
  // as K and as V (one layer each), not each pair, whose random layers
  // compound the codecs' rounding differences past the bounds on lavapipe
  // (16 pairs of the former 4 candidates: 3.5e-3 of the spread, mean
  // 6.8e-4, against 1.8e-5 and 1.8e-6 with one layer per candidate).
  // resolve() also checks the policy (an auto budget against head_dim).
  KVS_ASSIGN_OR_RETURN(const auto resolved, policy.resolve(backend::kvTarget(c)));
  const auto add = [&s](kv::LayerSchemes pair) {
    if (std::find(s.layers.begin(), s.layers.end(), pair) == s.layers.end())
      s.layers.push_back(std::move(pair));
  };
  s.anyPair = policy.autoBits.has_value();
  if (s.anyPair) {
    for (std::string_view name : kv::autoCandidates()) add({std::string(name), std::string(name)});
  } else {
    for (const kv::LayerSchemes& l : resolved) add(l);
  }
  s.tail = policy.tail > 0;
  s.attention = policy.attention;
  s.attention.diagnostic = false;
  return s;
}

std::string VetSpec::text() const {
  std::vector<std::string> weights, cache;
  for (const auto& [name, types] : weightTypes) {
    std::vector<std::string> names;
    for (gguf::TensorType t : types) names.emplace_back(gguf::traits(t).name);
    weights.push_back(fmt::format("{}={}", name, fmt::join(names, "+")));
  }
  for (const kv::LayerSchemes& l : layers) cache.push_back(l.key + "/" + l.value);
  if (anyPair) cache.push_back("(any pair)");
  if (tail) cache.push_back("tail");
  // Only the page size decides the indexer's kernels (vetAttention).
  return fmt::format(
      "{} head_dim {} gqa {} rope {}{}{}{}{} | {} | kv {} | attention dense, {}", architecture,
      headDim, gqa, ropeDims,
      ropeLinearFactor > 1.0f ? fmt::format(" linear {}", ropeLinearFactor) : "",
      ropeFreqFactors ? " factors" : "", tiedEmbeddings ? " tied" : "",
      window
          ? fmt::format(" window {}{}", kVetWindow,
                        windowHeadDim != 0 ? fmt::format(" head_dim {} gqa {} rope {}",
                                                         windowHeadDim, windowGqa, windowRopeDims)
                                           : std::string())
          : "",
      fmt::join(weights, " "), fmt::join(cache, " "), attention.scorerText());
}

std::string VetSpec::describe() const {
  std::set<gguf::TensorType> types;
  for (const auto& [name, list] : weightTypes) types.insert(list.begin(), list.end());
  std::vector<std::string> typeNames, schemes;
  for (gguf::TensorType t : types) typeNames.emplace_back(gguf::traits(t).name);
  for (const kv::LayerSchemes& l : layers) {
    for (const std::string& name : {l.key, l.value})
      if (std::find(schemes.begin(), schemes.end(), name) == schemes.end()) schemes.push_back(name);
  }
  return fmt::format(
      "a small {} model with {} weights, head_dim {}, {} query head{} per KV head and a KV cache "
      "in {}{}",
      architecture, fmt::join(typeNames, ", "), headDim, gqa, gqa == 1 ? "" : "s",
      fmt::join(schemes, ", "), tail ? " with a precision tail" : "");
}

std::string DeviceVerdict::finding() const {
  if (!failure.empty()) return fmt::format("{} failed to run {} ({})", device, model, failure);
  const std::string measured = fmt::format(
      "largest logit difference {:.1e} of the spread (allowed {:.0e}), mean {:.1e}, "
      "same top token on {}/{} steps",
      worstRel, kWorstRel, meanRel, argmaxAgree, steps);
  if (passed) return fmt::format("{} matches the CPU backend on {}: {}", device, model, measured);
  return fmt::format("{} gives results that differ from the CPU backend on {} ({})", device, model,
                     measured);
}

std::string DeviceVerdict::summary() const {
  if (passed) return finding();
  return finding() +
         "; kvscope uses the CPU backend instead. Please report this device and driver.";
}

bool VetSpec::covers(const VetSpec& other) const {
  const auto ran = [this](const kv::LayerSchemes& pair) {
    if (std::find(layers.begin(), layers.end(), pair) != layers.end()) return true;
    if (!anyPair) return false;
    const auto has = [this](const std::string& name, std::string kv::LayerSchemes::*part) {
      return std::any_of(layers.begin(), layers.end(),
                         [&](const kv::LayerSchemes& l) { return l.*part == name; });
    };
    return has(pair.key, &kv::LayerSchemes::key) && has(pair.value, &kv::LayerSchemes::value);
  };
  if (!std::all_of(other.layers.begin(), other.layers.end(), ran)) return false;
  VetSpec same = other;
  same.layers = layers;
  same.anyPair = anyPair;
  return same.text() == text();
}

std::filesystem::path defaultVerdictFile() {
  auto dir = paths::cacheDir();
  return dir.ok() ? *dir / "device-checks.json" : std::filesystem::path();
}

Expected<DeviceVerdict> vetDevice(int device, const std::filesystem::path& verdictFile,
                                  const VetSpec& spec) {
  KVS_ASSIGN_OR_RETURN(auto devices, gpu::listDevices());
  KVS_ASSIGN_OR_RETURN(const int index, gpu::chooseDevice(devices, device));
  const auto found = std::find_if(devices.begin(), devices.end(),
                                  [&](const gpu::DeviceInfo& d) { return d.index == index; });
  if (found == devices.end())
    return makeError(ErrorCode::kDevice, "Vulkan device {} is not in the device list", index);
  const gpu::DeviceInfo& info = *found;
  const std::string kernels = kernelsTag();
  DeviceVerdict verdict{.device = info.name,
                        .key = deviceKey(info, kernels) + " | " + spec.text(),
                        .model = spec.describe()};

  nlohmann::json all = verdictFile.empty() ? nlohmann::json::object() : readVerdicts(verdictFile);
  if (readVerdict(all, verdict)) return verdict;
  KVS_ASSIGN_OR_RETURN(verdict, measure(index, spec, std::move(verdict)));
  if (!verdictFile.empty()) writeVerdict(verdictFile, std::move(all), verdict, kernels);
  return verdict;
}

}  // namespace kvscope::runtime
