#include "ui/resources.h"

#include <QtGlobal>

// Global scope: Q_INIT_RESOURCE declares an extern function, which must not land in a
// namespace.
static void initKvscopeResources() {
  Q_INIT_RESOURCE(kvscope);
}

namespace kvscope::ui {

void registerResources() {
  static const bool registered = (initKvscopeResources(), true);
  (void)registered;
}

}  // namespace kvscope::ui
