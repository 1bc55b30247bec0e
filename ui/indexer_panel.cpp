#include "ui/indexer_panel.h"

namespace kvscope::ui {

IndexerPanel::IndexerPanel(QWidget* parent)
    : InspectorPanel(QStringLiteral("indexerPanel"), PanelSketch::Kind::kSelectedRows,
                     tr("Sparse attention is off"),
                     tr("With sparse attention, a small indexer scores every cached row and each "
                        "layer attends only to the rows it picks, so long contexts cost less per "
                        "token. Once a KV policy turns the indexer on, this panel shows the "
                        "positions picked at every step and how much of the attention they "
                        "capture."),
                     parent) {}

}  // namespace kvscope::ui
