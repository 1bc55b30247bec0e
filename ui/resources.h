#pragma once
// The compiled-in resources (resources/kvscope.qrc: icons). They live in the kvscope_ui
// static library, where the linker drops their registration unless something calls it;
// every widget that loads a ":/" path calls registerResources() first. Idempotent.

namespace kvscope::ui {

void registerResources();

}  // namespace kvscope::ui
