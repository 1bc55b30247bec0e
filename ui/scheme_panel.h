#pragma once
// SchemePanel is the inspector's view of the KV policy: the K and V codec of every layer, with bits
// per value and the codec error measured by the engine.

#include "ui/inspector_panel.h"

namespace kvscope::ui {

class SchemePanel : public InspectorPanel {
  Q_OBJECT

 public:
  explicit SchemePanel(QWidget* parent = nullptr);
};

}  // namespace kvscope::ui
