#include "ui/throughput_panel.h"

namespace kvscope::ui {

ThroughputPanel::ThroughputPanel(QWidget* parent)
    : InspectorPanel(
          QStringLiteral("throughputPanel"), PanelSketch::Kind::kThroughputLine,
          tr("No measurements yet"),
          tr("Prefill and decode speed in tokens per second, time to first token, and how each "
             "step's GPU time splits across kernels, as soon as the model starts working."),
          parent) {}

}  // namespace kvscope::ui
