#include "ui/indexer_panel.h"

namespace kvscope::ui {

IndexerPanel::IndexerPanel(QWidget* parent)
    : InspectorPanel(QStringLiteral("indexerPanel"), PanelSketch::Kind::kSelectedRows,
                     tr("No selections yet"),
                     tr("With sparse attention on, an indexer picks which cached rows each layer "
                        "attends to. Here you will see the picked positions for every step and how "
                        "much attention they capture."),
                     parent) {}

}  // namespace kvscope::ui
