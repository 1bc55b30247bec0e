#pragma once
// The readers kvscope-fuzz feeds: each takes one input as the bytes of a file
// a user could hand the app and reads it the way the app does, then touches
// what the reader returned (every tensor's first and last byte, the
// tokenizer) so a bound it got wrong shows under AddressSanitizer. A reader
// must refuse a bad input with an error; anything else (crash, hang,
// sanitizer report) is a failure.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kvscope::fuzz {

class Target {
 public:
  virtual ~Target() = default;
  // Reads `input`; true when the reader accepted it, false when it refused it.
  virtual bool run(std::span<const uint8_t> input) = 0;
};

// The target called `name` ("gguf", "hf-config", "safetensors", "kv-cache",
// "conversation"), working in `workDir` (a scratch folder it owns) with the
// other files it needs taken from `seedRoot` (tests/fuzz/seeds); null for an
// unknown name, with the known ones in `known`.
std::unique_ptr<Target> makeTarget(const std::string& name, const std::filesystem::path& seedRoot,
                                   const std::filesystem::path& workDir, std::string& known);

}  // namespace kvscope::fuzz
