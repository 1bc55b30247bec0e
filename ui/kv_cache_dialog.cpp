#include "ui/kv_cache_dialog.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "runtime/kv_cache_folder.h"
#include "ui/theme.h"

namespace kvscope::ui {
namespace {

constexpr quint64 kMiB = quint64{1} << 20;

QSpinBox* mibBox(quint64 bytes, int minimum, int maximum) {
  auto* box = new QSpinBox;
  box->setRange(minimum, maximum);
  box->setSuffix(QStringLiteral(" MiB"));
  box->setSingleStep(64);
  box->setValue(static_cast<int>(std::min<quint64>(bytes / kMiB, static_cast<quint64>(maximum))));
  return box;
}

}  // namespace

KvCacheDialog::KvCacheDialog(const QString& folder, const ModelSettings::KvCacheLimits& limits,
                             QWidget* parent)
    : QDialog(parent), m_folder(folder) {
  setWindowTitle(tr("Saved KV Caches"));
  setMinimumWidth(440);
  auto* intro = new QLabel(
      tr("When you leave a chat or quit, its compressed KV cache is saved beside it, so "
         "reopening it continues without re-reading the conversation. A cache made for "
         "another model or KV policy is not used (and kept for them); a damaged one is "
         "removed. Either way the chat is re-read."));
  intro->setWordWrap(true);
  m_perChat = mibBox(limits.maxFileBytes, 1, 1 << 20);
  m_perChat->setObjectName(QStringLiteral("kvCachePerChat"));
  m_perChat->setToolTip(tr("A chat whose cache is larger is re-read when reopened"));
  m_folderMax = mibBox(limits.maxFolderBytes, 1, 1 << 22);
  m_folderMax->setObjectName(QStringLiteral("kvCacheFolder"));
  m_folderMax->setToolTip(tr("When the saved caches take more, the least recently saved go"));
  m_usage = new QLabel;
  m_usage->setObjectName(QStringLiteral("kvCacheUsage"));
  auto* clear = new QPushButton(tr("Remove All Saved Caches"));
  clear->setEnabled(!m_folder.isEmpty());
  connect(clear, &QPushButton::clicked, this, [this] {
    runtime::evictKvCaches(m_folder.toStdString(), 0);
    showUsage();
  });

  auto* form = new QFormLayout;
  form->addRow(tr("Largest cache per chat:"), m_perChat);
  form->addRow(tr("All saved caches at most:"), m_folderMax);
  form->addRow(tr("Saved now:"), m_usage);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(intro);
  layout->addLayout(form);
  layout->addWidget(clear, 0, Qt::AlignLeft);
  layout->addWidget(buttons);
  showUsage();
}

void KvCacheDialog::showUsage() {
  m_usage->setText(m_folder.isEmpty()
                       ? tr("no folder")
                       : formatBytes(runtime::kvCacheFolderBytes(m_folder.toStdString())));
}

ModelSettings::KvCacheLimits KvCacheDialog::limits() const {
  return {static_cast<quint64>(m_perChat->value()) * kMiB,
          static_cast<quint64>(m_folderMax->value()) * kMiB};
}

}  // namespace kvscope::ui
