#include "ui/settings_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <limits>

namespace kvscope::ui {
namespace {

// The Thinking picker's item data (SamplingSettings::thinking: unset, true, false).
constexpr int kThinkingDefault = -1;
constexpr int kThinkingOff = 0;
constexpr int kThinkingOn = 1;

QDoubleSpinBox* decimal(double min, double max, double step, int decimals) {
  auto* box = new QDoubleSpinBox;
  box->setRange(min, max);
  box->setSingleStep(step);
  box->setDecimals(decimals);
  return box;
}

QSpinBox* integer(int min, int max) {
  auto* box = new QSpinBox;
  box->setRange(min, max);
  return box;
}

QLabel* section(const QString& text) {
  auto* label = new QLabel(text.toUpper());
  label->setProperty("role", "section");
  return label;
}

}  // namespace

SettingsDialog::SettingsDialog(const QString& modelName, const QString& systemPrompt,
                               const SamplingSettings& sampling, const TemplateChoices& choices,
                               QWidget* parent)
    : QDialog(parent),
      m_original(sampling),
      m_systemPrompt(new QPlainTextEdit(systemPrompt)),
      m_temperature(decimal(0, 2, 0.05, 2)),
      m_topK(integer(0, 1000)),
      m_topP(decimal(0, 1, 0.01, 2)),
      m_minP(decimal(0, 1, 0.01, 2)),
      m_repeatPenalty(decimal(1, 2, 0.01, 2)),
      m_repeatLastN(integer(0, 4096)),
      m_maxTokens(integer(0, 1 << 20)),
      m_seed(integer(-1, std::numeric_limits<int>::max())),
      m_renderer(new QComboBox),
      m_thinking(new QComboBox),
      m_overflow(new QComboBox) {
  setObjectName(QStringLiteral("settingsDialog"));
  setWindowTitle(tr("Chat Settings"));
  resize(520, 600);

  m_systemPrompt->setObjectName(QStringLiteral("systemPromptEdit"));
  m_systemPrompt->setPlaceholderText(tr("e.g. You are a concise assistant. Answer in English."));
  m_systemPrompt->setMinimumHeight(100);
  m_temperature->setObjectName(QStringLiteral("temperature"));
  m_temperature->setToolTip(tr("Higher is more varied, 0 always picks the likeliest token"));
  m_topK->setObjectName(QStringLiteral("topK"));
  m_topK->setSpecialValueText(tr("off"));
  m_topP->setObjectName(QStringLiteral("topP"));
  m_minP->setObjectName(QStringLiteral("minP"));
  m_repeatPenalty->setObjectName(QStringLiteral("repeatPenalty"));
  m_maxTokens->setObjectName(QStringLiteral("maxTokens"));
  m_maxTokens->setSuffix(tr(" tokens"));
  m_maxTokens->setSpecialValueText(tr("a quarter of the context"));
  m_seed->setObjectName(QStringLiteral("seed"));
  m_seed->setSpecialValueText(tr("random"));

  auto* form = new QFormLayout;
  form->setLabelAlignment(Qt::AlignRight);
  form->setVerticalSpacing(8);
  form->addRow(tr("Temperature"), m_temperature);
  form->addRow(tr("Top-k"), m_topK);
  form->addRow(tr("Top-p"), m_topP);
  form->addRow(tr("Min-p"), m_minP);
  form->addRow(tr("Repetition penalty"), m_repeatPenalty);
  form->addRow(tr("Penalty window"), m_repeatLastN);
  form->addRow(tr("Longest reply"), m_maxTokens);
  form->addRow(tr("Seed"), m_seed);

  m_renderer->setObjectName(QStringLiteral("chatRenderer"));
  m_renderer->addItem(tr("The model's own template"), int(tokenizer::ChatRenderer::kTemplate));
  if (!choices.builtinFormat.isEmpty()) {
    m_renderer->addItem(tr("kvscope's built-in %1 format").arg(choices.builtinFormat),
                        int(tokenizer::ChatRenderer::kBuiltin));
  }
  m_renderer->addItem(tr("Plain completion (no template)"), int(tokenizer::ChatRenderer::kPlain));
  m_renderer->setToolTip(tr("What turns the conversation into the model's prompt"));
  m_thinking->setObjectName(QStringLiteral("thinking"));
  m_thinking->addItem(tr("The template's default"), kThinkingDefault);
  m_thinking->addItem(tr("On"), kThinkingOn);
  m_thinking->addItem(tr("Off"), kThinkingOff);
  m_thinking->setEnabled(choices.readsThinking);
  m_thinking->setToolTip(choices.readsThinking
                             ? tr("enable_thinking: whether the model reasons before answering")
                             : tr("This model's template has no thinking switch"));
  m_overflow->setObjectName(QStringLiteral("contextOverflow"));
  m_overflow->addItem(tr("Stop and say so"), int(runtime::ContextOverflow::kStop));
  m_overflow->addItem(tr("Leave out the middle (keep the first exchange)"),
                      int(runtime::ContextOverflow::kTruncateMiddle));
  m_overflow->addItem(tr("Rolling window (keep the newest)"),
                      int(runtime::ContextOverflow::kRolling));
  m_overflow->setToolTip(
      tr("When the conversation outgrows the context: messages left out stay in the chat, "
         "greyed, and the model no longer sees them"));

  auto* promptNote = new QLabel(tr("Sent before every message of this chat."));
  promptNote->setProperty("role", "caption");
  auto* samplingNote = new QLabel(
      modelName.isEmpty() ? tr("Applies to the next reply.")
                          : tr("Remembered for %1; applies to the next reply.").arg(modelName));
  samplingNote->setProperty("role", "caption");
  samplingNote->setWordWrap(true);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel |
                                       QDialogButtonBox::RestoreDefaults);
  buttons->button(QDialogButtonBox::Ok)->setProperty("role", "primary");
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(buttons->button(QDialogButtonBox::RestoreDefaults), &QPushButton::clicked, this,
          [this] { showSampling(SamplingSettings{}); });

  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(18, 16, 18, 16);
  column->setSpacing(8);
  column->addWidget(section(tr("System prompt")));
  column->addWidget(m_systemPrompt, 1);
  column->addWidget(promptNote);
  column->addSpacing(10);
  // Sampling and the chat's rendering share one form, so their labels line up.
  column->addWidget(section(tr("Sampling")));
  form->addRow(samplingNote);
  auto* gap = new QWidget;
  gap->setFixedHeight(4);
  form->addRow(gap);
  form->addRow(section(tr("Chat")));
  form->addRow(tr("Chat format"), m_renderer);
  form->addRow(tr("Thinking"), m_thinking);
  form->addRow(tr("When the context is full"), m_overflow);
  column->addLayout(form);
  column->addSpacing(6);
  column->addWidget(buttons);
  showSampling(sampling);
}

void SettingsDialog::showSampling(const SamplingSettings& sampling) {
  m_temperature->setValue(sampling.temperature);
  m_topK->setValue(sampling.topK);
  m_topP->setValue(sampling.topP);
  m_minP->setValue(sampling.minP);
  m_repeatPenalty->setValue(sampling.repeatPenalty);
  m_repeatLastN->setValue(sampling.repeatLastN);
  m_maxTokens->setValue(sampling.maxTokens);
  m_seed->setValue(static_cast<int>(qBound(qint64{-1}, sampling.seed, qint64{m_seed->maximum()})));
  // A choice the model no longer offers (no built-in format) shows the default.
  m_renderer->setCurrentIndex(qMax(0, m_renderer->findData(int(sampling.chatRenderer))));
  const int thinking = !sampling.thinking   ? kThinkingDefault
                       : *sampling.thinking ? kThinkingOn
                                            : kThinkingOff;
  m_thinking->setCurrentIndex(qMax(0, m_thinking->findData(thinking)));
  m_overflow->setCurrentIndex(qMax(0, m_overflow->findData(int(sampling.contextOverflow))));
}

QString SettingsDialog::systemPrompt() const {
  return m_systemPrompt->toPlainText().trimmed();
}

SamplingSettings SettingsDialog::sampling() const {
  SamplingSettings s = m_original;
  s.temperature = m_temperature->value();
  s.topK = m_topK->value();
  s.topP = m_topP->value();
  s.minP = m_minP->value();
  s.repeatPenalty = m_repeatPenalty->value();
  s.repeatLastN = m_repeatLastN->value();
  s.maxTokens = m_maxTokens->value();
  s.seed = m_seed->value();
  s.chatRenderer = static_cast<tokenizer::ChatRenderer>(m_renderer->currentData().toInt());
  const int thinking = m_thinking->currentData().toInt();
  s.thinking = thinking == kThinkingDefault ? std::nullopt : std::optional(thinking == kThinkingOn);
  s.contextOverflow = static_cast<runtime::ContextOverflow>(m_overflow->currentData().toInt());
  return s;
}

}  // namespace kvscope::ui
