#pragma once
// SchemePanel is the inspector's view of the KV policy: the K and V codec of every layer
// with the bits per value each stores and the codec error the engine measured, from
// KvReport. Above the grid, pickers choose a policy (a preset, or K and V schemes, plus
// the number of f16 boundary layers at each end); Apply emits policyRequested() with a
// policy string ("k=q8_0,v=turbo3,boundary=2"), which the window hands to the engine to
// re-encode the cache, and showProgress() follows that re-encode. The pickers list
// setAvailableSchemes(); the Auto preset requests "auto", which measures the first prompt
// and chooses each layer's codecs (engine kv/auto_policy.h): the panel then shows what
// it chose, and for each promoted layer why. Below them, the sparse-attention pickers (indexer
// top-k, sparse V threshold) change how attention reads the cache, not what it holds: a change
// requests the active policy with that one item replaced at once, and the engine applies
// it without re-encoding.

#include <QStringList>

#include "ui/engine_types.h"
#include "ui/inspector_panel.h"

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace kvscope::ui {

struct PolicyPreset {
  QString name;    // "6.1 bits · 8-bit K, turbo4 V"
  QString policy;  // "k=q8_0,v=turbo4"
};

// The presets whose schemes are all in `available`, named by their bits per value
// (K and V averaged, at head_dim `headDim`; auto by its budget) and ordered from the
// largest (f16) to the smallest.
QList<PolicyPreset> policyPresets(const QStringList& available, uint32_t headDim = 128);

class SchemePanel : public InspectorPanel {
  Q_OBJECT

 public:
  explicit SchemePanel(QWidget* parent = nullptr);

  void setAvailableSchemes(const QStringList& schemes);
  // The active policy string ("" or "k=f16,v=f16" for f16) and whether it may change now
  // (a model is loaded and nothing is generating).
  void setPolicy(const QString& policy);
  void setEditable(bool editable);
  // The model's layer count bounds the boundary picker (N first and N last layers).
  void setLayerCount(quint32 layers);
  // Re-encode progress: `done` of `total` history tokens; hidden again by
  // hideProgress() (the switch ended either way).
  void showProgress(quint32 done, quint32 total);
  void hideProgress();
  void showReport(const kvscope::ui::KvReport& report);
  void clear();

  // What Apply would request.
  QString chosenPolicy() const;
  // The sparse-attention items the pickers choose (",indexer=512,sparse_v=0.001"; "" for
  // none), appended to a policy.
  QString attentionItems() const;

 signals:
  void policyRequested(const QString& policy);
  // "Compare on this conversation…": open the FidelityLab.
  void compareRequested();

 private:
  void presetChosen(int index);
  void updateApply();

  QLabel* m_policy;
  QLabel* m_autoStatus;  // what the auto policy did; hidden when it is not in use
  QLabel* m_promotions;  // under auto: why each promoted layer got its codec
  QComboBox* m_preset;
  QComboBox* m_keys;
  QComboBox* m_values;
  QSpinBox* m_boundary;
  QComboBox* m_indexer;  // data: the indexer= value ("" for off)
  QComboBox* m_sparseV;  // data: the sparse_v= value ("" for off)
  QPushButton* m_apply;
  QPushButton* m_compare;
  QProgressBar* m_progress;
  QTableWidget* m_table;
  QString m_activeChoice;  // the active policy as chosenPolicy() would write it
  QString m_activePolicy;  // the active policy as given to setPolicy()
  bool m_editable = false;
  // "auto" or "auto:BITS" while an Auto preset is picked (K and V are chosen
  // by measurement), else empty.
  QString m_auto;
};

}  // namespace kvscope::ui
