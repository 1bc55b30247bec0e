#include "ui/scheme_panel.h"

#include <algorithm>
#include <tuple>

#include <QComboBox>
#include <QFontDatabase>
#include <QGridLayout>
#include <QHash>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include "kv/auto_policy.h"
#include "kv/kv_scheme.h"
#include "ui/theme.h"

namespace kvscope::ui {
namespace {

enum Column { kLayer, kKey, kKeyBits, kValue, kValueBits, kError, kColumns };

const QString kAuto = QStringLiteral("auto");

// The auto item of a policy ("auto" or "auto:BITS"), empty when it has none.
QString autoItem(const QString& policy) {
  for (const QString& item : policy.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    const QString name = item.trimmed();
    if (name == kAuto || name.startsWith(kAuto + QLatin1Char(':'))) return name;
  }
  return {};
}
bool isAuto(const QString& policy) {
  return !autoItem(policy).isEmpty();
}

// A tint per codec family, so layers sharing a codec read as one block in the grid and
// the fewer bits, the warmer the colour. A rotated block format (q8_0r, ...) takes
// its plain format's.
QColor codecTint(const QString& scheme) {
  static const QHash<QString, QColor> kTints{
      {QStringLiteral("q8_0"), QColor("#dbe7fb")},
      {QStringLiteral("fp8"), QColor("#d5f0ec")},
      {QStringLiteral("q4_0"), QColor("#dcf3d9")},
      {QStringLiteral("affine4"), QColor("#e9e0fa")},
      {QStringLiteral("turbo4"), QColor("#fbeccd")},
      {QStringLiteral("turbo3"), QColor("#fbdcc4")},
      {QStringLiteral("turbo2"), QColor("#f9d0cf")},
      {QStringLiteral("turbo6b"), QColor("#e4efbf")},
      {QStringLiteral("turbo5b"), QColor("#eeebb8")},
      {QStringLiteral("turbo4b"), QColor("#f6e6b4")},
      {QStringLiteral("turbo3b"), QColor("#f6d3ae")},
      {QStringLiteral("turbo2b"), QColor("#f3c4c2")},
  };
  if (scheme == QStringLiteral("f16")) return themeColors().sunken;
  const QString plain = scheme.endsWith(QLatin1Char('r')) && kTints.contains(scheme.chopped(1))
                            ? scheme.chopped(1)
                            : scheme;
  const QColor tint = kTints.value(plain, QColor::fromHsv(int(qHash(plain) % 360), 50, 245));
  return themeColors().surface.lightness() < 128 ? tint.darker(330) : tint;
}

QString bitsText(double bits) {
  return QLocale().toString(bits, 'f', bits < 10 ? 2 : 1);
}

QString errorText(double keyError, double valueError) {
  if (keyError < 0 && valueError < 0) return QStringLiteral("–");
  const auto one = [](double e) {
    if (e < 0) return QStringLiteral("–");
    return QLocale().toString(e * 100, 'f', e < 0.01 ? 2 : 1) + QLatin1Char('%');
  };
  return QStringLiteral("%1 / %2").arg(one(keyError), one(valueError));
}

// The K scheme, V scheme and boundary layer count a policy string sets; items the
// pickers cannot show (per-layer overrides, two_phase, seed) are ignored.
struct Choice {
  QString key = QStringLiteral("f16");
  QString value = QStringLiteral("f16");
  int boundary = 0;
  QString indexer;  // indexer= value, "" when off
  QString sparseV;  // sparse_v= value, "" when off
  QString denseHeads;  // indexer_dense_heads= value, "" when absent
};

Choice parseChoice(const QString& policy) {
  Choice c;
  for (const QString& item : policy.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    const QString name = item.section(QLatin1Char('='), 0, 0).trimmed();
    const QString arg = item.section(QLatin1Char('='), 1).trimmed();
    if (name == QLatin1String("k") || name == QLatin1String("kv")) c.key = arg;
    if (name == QLatin1String("v") || name == QLatin1String("kv")) c.value = arg;
    if (name == QLatin1String("boundary")) c.boundary = arg.section(QLatin1Char(':'), 0, 0).toInt();
    if (name == QLatin1String("indexer")) c.indexer = arg.section(QLatin1Char(':'), 0, 0);
    if (c.indexer == QLatin1String("off") || c.indexer == QLatin1String("0")) c.indexer.clear();
    if (name == QLatin1String("sparse_v")) c.sparseV = arg;
    if (name == QLatin1String("indexer_dense_heads")) c.denseHeads = arg;
  }
  return c;
}

QString policyText(const QString& key, const QString& value, int boundary) {
  QString text = QStringLiteral("k=%1,v=%2").arg(key, value);
  if (boundary > 0) text += QStringLiteral(",boundary=%1").arg(boundary);
  return text;
}

// `policy` with its item `name=…` replaced by name=value (removed when value is empty);
// every other item (seed, overrides, two_phase, the indexer's window) is kept as written.
QString withItem(const QString& policy, const QString& name, const QString& value) {
  QStringList items;
  for (const QString& item : policy.split(QLatin1Char(','), Qt::SkipEmptyParts))
    if (item.section(QLatin1Char('='), 0, 0).trimmed() != name) items << item.trimmed();
  if (!value.isEmpty()) items << name + QLatin1Char('=') + value;
  return items.join(QLatin1Char(','));
}

// The dense-heads item that goes with the indexer at `topK` in `policy`: the
// policy's own, else auto (the heads the selection misses, measured on the
// chat's first long prompt: on the recall model the probe then copies as
// dense attention does, docs/RESULTS.md); none with the indexer off.
QString denseHeadsFor(const QString& policy, const QString& topK) {
  if (topK.isEmpty()) return {};
  const QString heads = parseChoice(policy).denseHeads;
  return heads.isEmpty() ? QStringLiteral("auto") : heads;
}

QTableWidgetItem* cell(const QString& text, Qt::Alignment align = Qt::AlignCenter) {
  auto* item = new QTableWidgetItem(text);
  item->setTextAlignment(align | Qt::AlignVCenter);
  item->setFlags(Qt::ItemIsEnabled);
  return item;
}

}  // namespace

QList<PolicyPreset> policyPresets(const QStringList& available, uint32_t headDim) {
  // What each preset is; its name leads with the bits per value it stores. The
  // list is the best policy measured at each budget (docs/RESULTS.md, "KV
  // cache fidelity against llama.cpp"), plus llama.cpp's own 8-bit layout.
  const QString autoSmall = kAuto + QStringLiteral(":4.5");
  const QList<PolicyPreset> kinds{
      {QObject::tr("f16, uncompressed"), QStringLiteral("k=f16,v=f16")},
      {QObject::tr("Auto, chosen per layer"), kAuto},
      {QObject::tr("Auto, chosen per layer"), autoSmall},
      {QObject::tr("8-bit K and V, rotated"), QStringLiteral("k=q8_0r,v=q8_0r")},
      {QObject::tr("8-bit K and V"), QStringLiteral("k=q8_0,v=q8_0")},
      {QObject::tr("8-bit rotated K, 6-bit V"), QStringLiteral("k=q8_0r,v=turbo6b")},
      {QObject::tr("6-bit K and V"), QStringLiteral("k=turbo6b,v=turbo6b")},
      {QObject::tr("5-bit K and V"), QStringLiteral("k=turbo5b,v=turbo5b")},
      {QObject::tr("4-bit K and V"), QStringLiteral("k=turbo4b,v=turbo4b")},
      {QObject::tr("3-bit K and V"), QStringLiteral("k=turbo3b,v=turbo3b")},
  };
  const auto bitsOf = [headDim](const QString& scheme) {
    auto s = kv::makeScheme(scheme.toStdString(), {.dim = headDim});
    return s.ok() ? (*s)->bitsPerValue() : 16.0;
  };
  QStringList autoNeeds;  // auto chooses among these
  for (std::string_view name : kv::autoCandidates())
    autoNeeds << QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
  const bool autoRuns = std::all_of(autoNeeds.begin(), autoNeeds.end(),
                                    [&](const QString& s) { return available.contains(s); });
  QList<std::pair<double, PolicyPreset>> sized;
  for (const PolicyPreset& kind : kinds) {
    double bits = 0.0;
    if (isAuto(kind.policy)) {
      if (!autoRuns) continue;
      bits = kind.policy == kAuto ? kv::kDefaultAutoBits
                                  : kind.policy.section(QLatin1Char(':'), 1).toDouble();
    } else {
      const Choice c = parseChoice(kind.policy);
      if (!available.contains(c.key) || !available.contains(c.value)) continue;
      bits = (bitsOf(c.key) + bitsOf(c.value)) / 2;
    }
    sized.append({bits, {QObject::tr("%1 bits · %2").arg(QLocale().toString(bits, 'f', 1),
                                                          kind.name),
                         kind.policy}});
  }
  std::stable_sort(sized.begin(), sized.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  QList<PolicyPreset> presets;
  for (const auto& [bits, preset] : sized) presets.append(preset);
  return presets;
}

SchemePanel::SchemePanel(QWidget* parent)
    : InspectorPanel(QStringLiteral("schemePanel"), PanelSketch::Kind::kSchemeGrid,
                     tr("No codecs in use yet"),
                     tr("Every layer stores its keys and values with its own codec: f16, q8_0, "
                        "fp8, turbo3 and more. This panel lists them per layer, with bits per "
                        "value and the measured reconstruction error."),
                     parent),
      m_policy(new QLabel),
      m_autoStatus(new QLabel),
      m_promotions(new QLabel),
      m_preset(new QComboBox),
      m_keys(new QComboBox),
      m_values(new QComboBox),
      m_boundary(new QSpinBox),
      m_indexer(new QComboBox),
      m_sparseV(new QComboBox),
      m_apply(new QPushButton(tr("Apply"))),
      m_compare(new QPushButton(tr("Compare on this conversation…"))),
      m_progress(new QProgressBar),
      m_table(new QTableWidget(0, kColumns)) {
  auto* content = new QWidget;
  auto* policyHeading = new QLabel(tr("ACTIVE POLICY"));
  policyHeading->setProperty("role", "section");
  m_policy->setObjectName(QStringLiteral("activePolicy"));
  m_policy->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  m_policy->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_policy->setWordWrap(true);
  m_autoStatus->setObjectName(QStringLiteral("autoStatus"));
  m_autoStatus->setWordWrap(true);
  m_autoStatus->setProperty("role", "muted");
  m_autoStatus->hide();
  m_promotions->setObjectName(QStringLiteral("autoPromotions"));
  m_promotions->setWordWrap(true);
  m_promotions->setTextFormat(Qt::PlainText);
  m_promotions->hide();

  m_preset->setObjectName(QStringLiteral("policyPreset"));
  m_keys->setObjectName(QStringLiteral("keySchemePicker"));
  m_values->setObjectName(QStringLiteral("valueSchemePicker"));
  m_boundary->setObjectName(QStringLiteral("boundaryLayers"));
  m_boundary->setToolTip(
      tr("The first and last N layers keep f16: they are the most sensitive to "
         "cache error."));
  m_boundary->setRange(0, 0);
  m_indexer->setObjectName(QStringLiteral("indexerPicker"));
  m_indexer->addItem(tr("Off · every row"), QString());
  for (int k : {2048, 1024, 512, 256, 128, 64})
    m_indexer->addItem(tr("Top %1 rows").arg(k), QString::number(k));
  m_indexer->setToolTip(
      tr("Sparse attention: each layer attends the first 4 and last 64 rows plus the top-k "
         "rows by the indexer's score; up to top-k rows of context it is exact. The KV heads "
         "the selection would miss are measured on the chat's first long prompt and keep "
         "reading every row (indexer_dense_heads=auto); until then every layer does. Changes "
         "apply at once; the cache is not re-encoded."));
  m_sparseV->setObjectName(QStringLiteral("sparseVPicker"));
  m_sparseV->addItem(tr("Off"), QString());
  for (const char* tau : {"0.0001", "0.001", "0.01"})
    m_sparseV->addItem(tr("below %1").arg(QLatin1String(tau)), QLatin1String(tau));
  m_sparseV->setToolTip(tr("Skips value rows whose attention weight is below the threshold."));
  m_progress->setObjectName(QStringLiteral("reencodeProgress"));
  m_progress->setFormat(tr("Re-encoding %v of %m tokens"));
  m_progress->setTextVisible(true);
  m_progress->hide();
  m_apply->setObjectName(QStringLiteral("applyPolicyButton"));
  m_apply->setProperty("role", "primary");
  m_apply->setToolTip(
      tr("Re-encodes the cache: the conversation is read again under the new "
         "policy."));
  auto* pickers = new QGridLayout;
  pickers->setHorizontalSpacing(8);
  pickers->setVerticalSpacing(6);
  pickers->addWidget(new QLabel(tr("Preset")), 0, 0);
  pickers->addWidget(m_preset, 0, 1, 1, 3);
  pickers->addWidget(new QLabel(tr("Keys")), 1, 0);
  pickers->addWidget(m_keys, 1, 1);
  pickers->addWidget(new QLabel(tr("Values")), 1, 2);
  pickers->addWidget(m_values, 1, 3);
  pickers->addWidget(new QLabel(tr("f16 boundary")), 2, 0);
  pickers->addWidget(m_boundary, 2, 1);
  pickers->addWidget(m_apply, 2, 3);
  pickers->addWidget(new QLabel(tr("Sparse attention")), 3, 0);
  pickers->addWidget(m_indexer, 3, 1);
  pickers->addWidget(new QLabel(tr("Sparse V")), 3, 2);
  pickers->addWidget(m_sparseV, 3, 3);
  pickers->addWidget(m_progress, 4, 0, 1, 4);
  m_compare->setObjectName(QStringLiteral("compareSchemesButton"));
  m_compare->setToolTip(
      tr("Measures chosen policies on the tokens of the open conversation (KLD and top-1 "
         "against the f16 cache, bits per value) and plots them; the chat stays usable."));
  pickers->addWidget(m_compare, 5, 0, 1, 4);
  pickers->setColumnStretch(1, 1);
  pickers->setColumnStretch(3, 1);

  m_table->setObjectName(QStringLiteral("schemeTable"));
  m_table->setHorizontalHeaderLabels(
      {tr("Layer"), tr("K"), tr("bits"), tr("V"), tr("bits"), tr("error K/V")});
  m_table->verticalHeader()->hide();
  m_table->setShowGrid(false);
  m_table->setSelectionMode(QAbstractItemView::NoSelection);
  m_table->setFocusPolicy(Qt::NoFocus);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_table->horizontalHeader()->setSectionResizeMode(kLayer, QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setSectionResizeMode(kError, QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setFont(scaledFont(0.85, true));
  m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 8);
  m_table->setFont(scaledFont(0.9));
  auto* tableHeading = new QLabel(tr("PER LAYER"));
  tableHeading->setProperty("role", "section");

  auto* column = new QVBoxLayout(content);
  column->setContentsMargins(12, 12, 12, 8);
  column->setSpacing(8);
  column->addWidget(policyHeading);
  column->addWidget(m_policy);
  column->addWidget(m_autoStatus);
  column->addLayout(pickers);
  column->addSpacing(4);
  column->addWidget(tableHeading);
  column->addWidget(m_table, 1);
  column->addWidget(m_promotions);
  setContent(content);

  connect(m_preset, &QComboBox::activated, this, &SchemePanel::presetChosen);
  // Picking a codec by hand leaves Auto.
  connect(m_keys, &QComboBox::currentTextChanged, this, [this] {
    m_auto.clear();
    updateApply();
  });
  connect(m_values, &QComboBox::currentTextChanged, this, [this] {
    m_auto.clear();
    updateApply();
  });
  connect(m_boundary, &QSpinBox::valueChanged, this, &SchemePanel::updateApply);
  connect(m_apply, &QPushButton::clicked, this, [this] { emit policyRequested(chosenPolicy()); });
  connect(m_compare, &QPushButton::clicked, this, &SchemePanel::compareRequested);
  // Only the item a picker sets changes; the rest of the active policy is kept.
  connect(m_indexer, &QComboBox::activated, this, [this] {
    const QString k = m_indexer->currentData().toString();
    const QString policy = withItem(m_activePolicy, QStringLiteral("indexer"), k);
    emit policyRequested(
        withItem(policy, QStringLiteral("indexer_dense_heads"), denseHeadsFor(m_activePolicy, k)));
  });
  connect(m_sparseV, &QComboBox::activated, this, [this] {
    emit policyRequested(
        withItem(m_activePolicy, QStringLiteral("sparse_v"), m_sparseV->currentData().toString()));
  });
  setAvailableSchemes({QStringLiteral("f16")});
}

void SchemePanel::setAvailableSchemes(const QStringList& schemes) {
  for (QComboBox* box : {m_keys, m_values}) {
    const QString current = box->currentText();
    box->clear();
    box->addItems(schemes);
    box->setCurrentText(schemes.contains(current) ? current : QStringLiteral("f16"));
  }
  m_preset->clear();
  m_preset->addItem(tr("Custom"), QString());
  for (const PolicyPreset& preset : policyPresets(schemes))
    m_preset->addItem(preset.name, preset.policy);
  updateApply();
}

void SchemePanel::setPolicy(const QString& policy) {
  m_policy->setText(policy.isEmpty() ? QStringLiteral("k=f16,v=f16") : policy);
  m_activePolicy = policy.isEmpty() ? QStringLiteral("k=f16,v=f16") : policy;
  const Choice c = parseChoice(policy);
  m_auto = autoItem(policy);
  m_activeChoice = !m_auto.isEmpty() ? m_auto : policyText(c.key, c.value, c.boundary);
  if (m_auto.isEmpty()) m_autoStatus->hide();
  {
    const QSignalBlocker keys(m_keys), values(m_values), boundary(m_boundary);
    m_keys->setCurrentText(c.key);
    m_values->setCurrentText(c.value);
    m_boundary->setValue(c.boundary);
    if (m_indexer->findData(c.indexer) < 0)
      m_indexer->addItem(tr("Top %1 rows").arg(c.indexer), c.indexer);
    m_indexer->setCurrentIndex(m_indexer->findData(c.indexer));
    if (m_sparseV->findData(c.sparseV) < 0)
      m_sparseV->addItem(tr("below %1").arg(c.sparseV), c.sparseV);
    m_sparseV->setCurrentIndex(m_sparseV->findData(c.sparseV));
  }
  updateApply();
  showContent(true);
}

void SchemePanel::setEditable(bool editable) {
  m_editable = editable;
  updateApply();
}

void SchemePanel::setLayerCount(quint32 layers) {
  m_boundary->setRange(0, static_cast<int>(layers / 2));
}

void SchemePanel::showProgress(quint32 done, quint32 total) {
  m_progress->setRange(0, static_cast<int>(qMax(total, 1u)));
  m_progress->setValue(static_cast<int>(done));
  m_progress->show();
}

void SchemePanel::hideProgress() {
  m_progress->hide();
}

QString SchemePanel::chosenPolicy() const {
  if (!m_auto.isEmpty()) return m_auto + attentionItems();
  return policyText(m_keys->currentText(), m_values->currentText(), m_boundary->value()) +
         attentionItems();
}

QString SchemePanel::attentionItems() const {
  QString items;
  if (const QString k = m_indexer->currentData().toString(); !k.isEmpty()) {
    items += QStringLiteral(",indexer=") + k + QStringLiteral(",indexer_dense_heads=") +
             denseHeadsFor(m_activePolicy, k);
  }
  if (const QString tau = m_sparseV->currentData().toString(); !tau.isEmpty())
    items += QStringLiteral(",sparse_v=") + tau;
  return items;
}

void SchemePanel::presetChosen(int index) {
  const QString policy = m_preset->itemData(index).toString();
  if (policy.isEmpty()) return;
  if (isAuto(policy)) {
    m_auto = autoItem(policy);
    updateApply();
    return;
  }
  m_auto.clear();
  const Choice c = parseChoice(policy);
  {
    const QSignalBlocker keys(m_keys), values(m_values);
    m_keys->setCurrentText(c.key);
    m_values->setCurrentText(c.value);
  }
  updateApply();
}

void SchemePanel::updateApply() {
  // The preset shown is Auto, or the one whose K and V are picked, else Custom.
  const int preset =
      !m_auto.isEmpty()
          ? m_preset->findData(m_auto)
          : m_preset->findData(
                QStringLiteral("k=%1,v=%2").arg(m_keys->currentText(), m_values->currentText()));
  m_preset->setCurrentIndex(qMax(0, preset));
  m_apply->setEnabled(m_editable && chosenPolicy() != m_activeChoice + attentionItems());
  const bool pickable = m_editable && m_keys->count() > 1;
  m_preset->setEnabled(pickable);
  // Auto chooses K, V and every layer itself.
  for (QWidget* picker : std::initializer_list<QWidget*>{m_keys, m_values, m_boundary})
    picker->setEnabled(pickable && m_auto.isEmpty());
  m_indexer->setEnabled(m_editable);
  m_sparseV->setEnabled(m_editable);
  m_compare->setEnabled(m_editable);
}

void SchemePanel::showReport(const KvReport& report) {
  const ThemeColors& c = themeColors();
  const std::vector<runtime::KvLayerSnapshot>& layers = report.kv.layers;
  m_table->setRowCount(static_cast<int>(layers.size()));
  QStringList why;  // one line per promoted part
  for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
    const runtime::KvLayerSnapshot& layer = layers[size_t(i)];
    m_table->setItem(i, kLayer, cell(QString::number(i), Qt::AlignRight));
    const QString keyScheme = QString::fromStdString(layer.keyScheme);
    const QString valueScheme = QString::fromStdString(layer.valueScheme);
    QTableWidgetItem* key = cell(keyScheme);
    key->setBackground(codecTint(keyScheme));
    key->setForeground(c.text);
    QTableWidgetItem* value = cell(valueScheme);
    value->setBackground(codecTint(valueScheme));
    value->setForeground(c.text);
    m_table->setItem(i, kKey, key);
    m_table->setItem(i, kKeyBits, cell(bitsText(layer.keyBitsPerValue)));
    m_table->setItem(i, kValue, value);
    m_table->setItem(i, kValueBits, cell(bitsText(layer.valueBitsPerValue)));
    QTableWidgetItem* error = cell(errorText(layer.keyError, layer.valueError));
    error->setForeground(c.muted);
    error->setToolTip(
        tr("Relative RMS error of the cached rows after decoding; – where the "
           "engine has not measured it."));
    m_table->setItem(i, kError, error);
    // Under auto: a promoted part is marked in its cell, and why listed below.
    for (const auto& [item, reason, part] :
         {std::tuple{key, QString::fromStdString(layer.keyPromotion), QStringLiteral("K")},
          std::tuple{value, QString::fromStdString(layer.valuePromotion), QStringLiteral("V")}}) {
      if (reason.isEmpty()) continue;
      item->setText(item->text() + QStringLiteral(" ▲"));
      item->setToolTip(tr("Promoted by auto: %1").arg(reason));
      why << tr("▲ layer %1 %2 → %3: %4").arg(i).arg(part, item->text().chopped(2), reason);
    }
  }
  // Under auto the (disabled) pickers show the codecs most layers got.
  if (!m_auto.isEmpty() && !layers.empty()) {
    const auto mostCommon = [&](bool key) {
      QHash<QString, int> count;
      QString best;
      for (const runtime::KvLayerSnapshot& l : layers) {
        const QString scheme = QString::fromStdString(key ? l.keyScheme : l.valueScheme);
        if (++count[scheme] > count.value(best)) best = scheme;
      }
      return best;
    };
    const QSignalBlocker keys(m_keys), values(m_values);
    m_keys->setCurrentText(mostCommon(true));
    m_values->setCurrentText(mostCommon(false));
  }
  m_autoStatus->setText(QString::fromStdString(report.kv.autoStatus));
  m_autoStatus->setVisible(!report.kv.autoStatus.empty());
  m_promotions->setText(why.join(QLatin1Char('\n')));
  m_promotions->setVisible(!why.isEmpty());
  showContent(!layers.empty());
}

void SchemePanel::clear() {
  m_table->setRowCount(0);
  showContent(false);
}

}  // namespace kvscope::ui
