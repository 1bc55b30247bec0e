#pragma once
// KvCacheDialog (Chat › Saved KV Caches…): how much disk the conversations'
// saved KV caches may take — the largest cache kept for one conversation and
// the most the folder may hold (the least recently saved go first) — with the
// folder's current size and a button that removes every saved cache. Read
// limits() after exec() returns Accepted.

#include <QDialog>

#include "ui/model_settings.h"

class QLabel;
class QSpinBox;

namespace kvscope::ui {

class KvCacheDialog : public QDialog {
  Q_OBJECT

 public:
  KvCacheDialog(const QString& folder, const ModelSettings::KvCacheLimits& limits,
                QWidget* parent = nullptr);

  ModelSettings::KvCacheLimits limits() const;

 private:
  void showUsage();

  QString m_folder;
  QSpinBox* m_perChat;    // MiB
  QSpinBox* m_folderMax;  // MiB
  QLabel* m_usage;
};

}  // namespace kvscope::ui
