#pragma once
// Workgroup counts under a driver's loop limit (DeviceInfo::loopIterationLimit).
//
// lavapipe stops all loops of a shader invocation after 65535 iterations in
// all, silently. The kernels hand a CPU device few large workgroups, each
// looping over many tasks (rows, token tiles, KV heads), so a big enough
// dispatch ran past the limit and left its last tasks' outputs unwritten: a
// batched prefill at 2,048 cached rows of a 2-layer, 2-KV-head model lost
// attention rows for its last token tiles. Every kernel that loops over tasks
// sizes its dispatch here, from an estimate of the iterations one task costs
// an invocation.
#include <algorithm>
#include <cstdint>

namespace kvscope::gpu {

// Iterations one invocation may spend on a device with loop limit `limit`
// (0: no limit): half of it, the other half a margin for the loops a task's
// estimate leaves out.
inline uint64_t loopBudget(uint32_t limit) {
  return limit / 2;
}

// Workgroups for `tasks` tasks dealt out in turn (task i to workgroup
// i % groups), each costing an invocation about `iterationsPerTask` loop
// iterations: `wanted`, raised until no workgroup exceeds loopBudget(limit),
// never more than `tasks` or `maxGroups`. A kernel whose invocations take the
// tasks (task i to invocation i % (groups * WG)) passes ceil(tasks / WG).
// One task over the budget gets a workgroup of its own: the caller must split
// such tasks (see AttentionKernels::plan).
inline uint32_t groupsWithinLoopLimit(uint64_t tasks, uint64_t iterationsPerTask, uint32_t wanted,
                                      uint32_t limit, uint32_t maxGroups) {
  uint64_t groups = wanted;
  if (limit != 0) {
    const uint64_t perGroup =
        std::max<uint64_t>(1, loopBudget(limit) / std::max<uint64_t>(1, iterationsPerTask));
    groups = std::max(groups, (tasks + perGroup - 1) / perGroup);
  }
  groups = std::min({groups, std::max<uint64_t>(tasks, 1), uint64_t{maxGroups}});
  return static_cast<uint32_t>(std::max<uint64_t>(groups, 1));
}

}  // namespace kvscope::gpu
