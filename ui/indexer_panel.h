#pragma once
// IndexerPanel is the inspector's view of sparse attention: which cached rows the indexer picked
// per layer and the attention mass they captured, from IndexerSnapshot.

#include "ui/inspector_panel.h"

namespace kvscope::ui {

class IndexerPanel : public InspectorPanel {
  Q_OBJECT

 public:
  explicit IndexerPanel(QWidget* parent = nullptr);
};

}  // namespace kvscope::ui
