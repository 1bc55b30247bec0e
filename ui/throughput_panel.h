#pragma once
// ThroughputPanel is the inspector's speed view: prefill and decode tokens per second, time to
// first token and GPU time per kernel class, from the engine's StepStats.

#include "ui/inspector_panel.h"

namespace kvscope::ui {

class ThroughputPanel : public InspectorPanel {
  Q_OBJECT

 public:
  explicit ThroughputPanel(QWidget* parent = nullptr);
};

}  // namespace kvscope::ui
