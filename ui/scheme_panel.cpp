#include "ui/scheme_panel.h"

namespace kvscope::ui {

SchemePanel::SchemePanel(QWidget* parent)
    : InspectorPanel(QStringLiteral("schemePanel"), PanelSketch::Kind::kSchemeGrid,
                     tr("No codecs in use yet"),
                     tr("Every layer stores its keys and values with its own codec: f16, q8_0, "
                        "fp8, turbo3 and more. This panel lists them per layer, with bits per "
                        "value and the measured reconstruction error."),
                     parent) {}

}  // namespace kvscope::ui
