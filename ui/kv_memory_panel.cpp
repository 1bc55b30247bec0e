#include "ui/kv_memory_panel.h"

namespace kvscope::ui {

KvMemoryPanel::KvMemoryPanel(QWidget* parent)
    : InspectorPanel(QStringLiteral("kvMemoryPanel"), PanelSketch::Kind::kLayerBars,
                     tr("No KV cache yet"),
                     tr("Load a model and send a message to see how much device memory each "
                        "layer's keys and values take, next to what an uncompressed f16 cache "
                        "would need. It updates live while the model generates."),
                     parent) {}

}  // namespace kvscope::ui
