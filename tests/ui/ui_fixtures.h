#pragma once
// Shared fixtures for UI tests, found as tests/support finds them: $KVSCOPE_SHARED, else
// the shared/ folder beside the repository (KVSCOPE_DEFAULT_SHARED).

#include <QDir>
#include <QFileInfo>
#include <QString>

namespace kvscope::ui::test {

inline QString sharedFile(const QString& relative) {
  QString dir = qEnvironmentVariable("KVSCOPE_SHARED");
  if (dir.isEmpty()) dir = QStringLiteral(KVSCOPE_DEFAULT_SHARED);
  return QDir(dir).filePath(relative);
}

inline QString storiesModel() {
  return sharedFile(QStringLiteral("models/stories260K.gguf"));
}

}  // namespace kvscope::ui::test

// Skips the current test function when a shared fixture is absent.
#define KVS_REQUIRE_UI_FIXTURE(path)                                                  \
  do {                                                                                \
    if (!QFileInfo::exists(path))                                                     \
      QSKIP(qPrintable(QStringLiteral("fixture not found: %1 (set KVSCOPE_SHARED to " \
                                      "the shared/ folder)")                          \
                           .arg(path)));                                              \
  } while (0)
