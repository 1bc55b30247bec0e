#pragma once
// SettingsDialog: the conversation's system prompt and the loaded model's sampling
// settings (temperature, top-k, top-p, min-p, repetition penalty, reply length, seed),
// and how its chats render: the model's own template, the built-in format of its
// family or plain completion, and Thinking (enable_thinking) for templates that read it.
// The system prompt belongs to this chat; sampling is remembered per model. Defaults
// restores llama.cpp's values. Read the result with systemPrompt() and sampling() after
// exec() returns Accepted.

#include <QDialog>

#include "ui/engine_types.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QSpinBox;

namespace kvscope::ui {

// What the model's template offers the chat-format choices.
struct TemplateChoices {
  QString builtinFormat;       // the built-in format's family; empty: none
  bool readsThinking = false;  // Thinking applies
};

class SettingsDialog : public QDialog {
  Q_OBJECT

 public:
  SettingsDialog(const QString& modelName, const QString& systemPrompt,
                 const SamplingSettings& sampling, const TemplateChoices& choices = {},
                 QWidget* parent = nullptr);

  QString systemPrompt() const;
  SamplingSettings sampling() const;

 private:
  void showSampling(const SamplingSettings& sampling);

  SamplingSettings m_original;  // fields the dialog does not edit pass through
  QPlainTextEdit* m_systemPrompt;
  QDoubleSpinBox* m_temperature;
  QSpinBox* m_topK;
  QDoubleSpinBox* m_topP;
  QDoubleSpinBox* m_minP;
  QDoubleSpinBox* m_repeatPenalty;
  QSpinBox* m_repeatLastN;
  QSpinBox* m_maxTokens;
  QSpinBox* m_seed;
  QComboBox* m_renderer;
  QComboBox* m_thinking;
  QComboBox* m_overflow;
};

}  // namespace kvscope::ui
