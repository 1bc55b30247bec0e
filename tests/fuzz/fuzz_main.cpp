// kvscope-fuzz: feeds one reader mutations of valid files (tests/fuzz/seeds)
// and fails on a crash, a hang or a sanitizer report. Build it with
// -DKVSCOPE_SANITIZE=ON (tools/fuzz.sh) for AddressSanitizer and
// UndefinedBehaviorSanitizer; the short runs in the tests use the normal build.
//
//   kvscope-fuzz TARGET [--inputs N] [--seed S] [--timeout-ms T] [--seeds DIR]
//                       [--crash-dir DIR] [--only I]
//
// Inputs are a pure function of (seed, input number): `--only I` makes input
// I again and runs just that one. On a crash or hang the input is written to
// CRASH_DIR/TARGET-crash-I.bin before the process dies.
#include <fcntl.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "fuzz/fuzz_targets.h"
#include "fuzz/mutator.h"

// Sanitizer reports end the process through abort(), so the handler below
// saves the input first; leaks are reported at exit.
extern "C" const char* __asan_default_options() {
  return "abort_on_error=1:detect_leaks=1";
}
extern "C" const char* __ubsan_default_options() {
  return "halt_on_error=1:abort_on_error=1:print_stacktrace=1";
}

namespace {

namespace fs = std::filesystem;
using kvscope::fuzz::Mutator;

// What the signal handler needs, set before each input runs.
const std::vector<uint8_t>* g_input = nullptr;
char g_crashPath[4096] = {};
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_previous[std::size(kFatalSignals)];  // the sanitizers' handlers, if any

void say(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
  (void)ignored;
}

void saveInput(const char* why) {
  if (!g_input || !g_crashPath[0]) return;
  say(why);
  const int fd = open(g_crashPath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const bool saved =
      fd >= 0 && write(fd, g_input->data(), g_input->size()) == ssize_t(g_input->size());
  if (fd >= 0) close(fd);
  say(saved ? "; input saved to " : "; could not save the input to ");
  say(g_crashPath);
  say("\n");
}

// Saves the input, then hands the signal to the handler that was there before
// (AddressSanitizer's prints where it crashed) or to the default action.
void onFatalSignal(int signal) {
  saveInput("kvscope-fuzz: crashed");
  for (size_t i = 0; i < std::size(kFatalSignals); ++i)
    if (kFatalSignals[i] == signal) sigaction(signal, &g_previous[i], nullptr);
  raise(signal);
}

void onTimeout(int) {
  saveInput("kvscope-fuzz: hang (input ran past --timeout-ms)");
  _exit(3);
}

void armTimer(int ms) {
  itimerval t{};
  t.it_value.tv_sec = ms / 1000;
  t.it_value.tv_usec = (ms % 1000) * 1000;
  setitimer(ITIMER_REAL, &t, nullptr);
}

std::vector<uint8_t> readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Feed a kvscope file reader mutated inputs; fail on crash, hang or sanitizer report"};
  std::string target;
  uint64_t inputs = 10000;
  uint64_t seed = 1;
  int timeoutMs = 2000;
  std::string seedRoot = KVSCOPE_FUZZ_SEEDS;
  std::string crashDir = ".";
  std::optional<uint64_t> only;
  app.add_option("target", target, "gguf, hf-config, safetensors, kv-cache or conversation")->required();
  app.add_option("--inputs", inputs, "Inputs to generate")->default_val(inputs);
  app.add_option("--seed", seed, "Random seed of the mutations")->default_val(seed);
  app.add_option("--timeout-ms", timeoutMs, "Longest one input may take")->default_val(timeoutMs);
  app.add_option("--seeds", seedRoot, "Seed folder root (one subfolder per target)")
      ->default_val(seedRoot);
  app.add_option("--crash-dir", crashDir, "Where a failing input is saved")->default_val(crashDir);
  app.add_option("--only", only, "Run only input number I (reproduce a failure)");
  CLI11_PARSE(app, argc, argv);
  if (timeoutMs <= 0) {
    fmt::print(stderr, "error: --timeout-ms must be positive\n");
    return 2;
  }

  // Sorted, so the inputs of a seed are the same on every machine.
  std::vector<fs::path> seedFiles;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(seedRoot) / target, ec))
    if (entry.is_regular_file()) seedFiles.push_back(entry.path());
  std::sort(seedFiles.begin(), seedFiles.end());
  std::vector<std::vector<uint8_t>> seeds;
  for (const fs::path& file : seedFiles) seeds.push_back(readFile(file));
  if (seeds.empty()) {
    fmt::print(stderr, "error: no seed files in {}\n", (fs::path(seedRoot) / target).string());
    return 2;
  }
  char work[] = "/tmp/kvscope-fuzz-XXXXXX";
  if (!mkdtemp(work)) {
    fmt::print(stderr, "error: cannot create a scratch folder in /tmp\n");
    return 2;
  }
  std::string known;
  auto reader = kvscope::fuzz::makeTarget(target, seedRoot, work, known);
  if (!reader) {
    fmt::print(stderr, "error: unknown target '{}' (known: {})\n", target, known);
    fs::remove_all(work, ec);
    return 2;
  }

  // Mutations of a file the reader refuses would mostly test its first check.
  for (size_t i = 0; i < seeds.size(); ++i) {
    if (!reader->run(seeds[i])) {
      fmt::print(stderr, "error: the reader refuses seed {}\n", seedFiles[i].string());
      fs::remove_all(work, ec);
      return 2;
    }
  }

  for (size_t i = 0; i < std::size(kFatalSignals); ++i) {
    struct sigaction action {};
    action.sa_handler = onFatalSignal;
    sigemptyset(&action.sa_mask);
    sigaction(kFatalSignals[i], &action, &g_previous[i]);
  }
  std::signal(SIGALRM, onTimeout);
  Mutator mutator(seed);
  uint64_t accepted = 0, refused = 0;
  const auto start = std::chrono::steady_clock::now();
  const uint64_t first = only.value_or(0);
  const uint64_t end = only ? *only + 1 : inputs;
  for (uint64_t i = 0; i < end; ++i) {
    const auto& base = seeds[mutator.next() % seeds.size()];
    const auto& other = seeds[mutator.next() % seeds.size()];
    const std::vector<uint8_t> input = mutator.mutate(base, other);
    if (i < first) continue;
    std::snprintf(g_crashPath, sizeof g_crashPath, "%s/%s-crash-%llu.bin", crashDir.c_str(),
                  target.c_str(), static_cast<unsigned long long>(i));
    g_input = &input;
    armTimer(timeoutMs);
    const bool ok = reader->run(input);
    armTimer(0);
    g_input = nullptr;
    ++(ok ? accepted : refused);
    if (!only && inputs >= 10 && (i + 1) % (inputs / 10) == 0)
      fmt::print(stderr, "{}: {}/{} inputs\n", target, i + 1, inputs);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const uint64_t ran = accepted + refused;
  fmt::print(
      "fuzz {}: {} inputs from {} seeds (seed {}), {} accepted, {} refused, {:.1f} s "
      "({:.0f} inputs/s)\n",
      target, ran, seeds.size(), seed, accepted, refused, seconds, ran / seconds);
  reader.reset();
  fs::remove_all(work, ec);
  return 0;
}
