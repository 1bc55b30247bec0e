#pragma once
// KvMemoryPanel is the inspector's KV memory view: device bytes per layer, split into keys and
// values and compared with the f16 size, from the engine's periodic KvSnapshot.

#include "ui/inspector_panel.h"

namespace kvscope::ui {

class KvMemoryPanel : public InspectorPanel {
  Q_OBJECT

 public:
  explicit KvMemoryPanel(QWidget* parent = nullptr);
};

}  // namespace kvscope::ui
