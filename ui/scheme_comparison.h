#pragma once
// SchemeComparison: "Compare schemes on this conversation". Runs
// runtime::evaluateKvPolicies over a conversation's tokens for a list of KV policies on a
// thread of its own, so the chat (on the engine worker) stays usable: one f16 run, then
// each policy's, compared step by step (KLD against f16, top-1 agreement, bits per value
// from the cache's own accounting). It loads its own copy of the model and runs the CPU
// backend with half the cores: the measures are properties of the cache codecs, which
// both backends share, and a second copy of the weights on the GPU is what the chat can
// least afford. progress() and finished()/failed() arrive on the owner's thread;
// cancel() stops at the next step; destroying it cancels and waits.

#include <atomic>
#include <thread>

#include <QList>
#include <QObject>
#include <QString>
#include <QStringList>

namespace kvscope::ui {

struct ComparisonPoint {
  QString policy;             // as asked ("auto", "k=q8_0,v=turbo4b")
  QString used;               // the explicit policy that ran (what auto chose)
  double bitsPerValue = 0.0;  // K and V averaged
  double kld = 0.0;           // mean KL(P_f16 || P) in nats
  double top1 = 0.0;          // share of steps whose argmax agrees with f16
};

class SchemeComparison : public QObject {
  Q_OBJECT

 public:
  explicit SchemeComparison(QObject* parent = nullptr);
  ~SchemeComparison() override;

  // Starts a run; false (and nothing started) while one runs.
  bool start(const QString& modelPath, const QList<qint32>& tokens, const QStringList& policies);
  void cancel();
  bool running() const { return m_running; }

 signals:
  void progress(quint64 done, quint64 total);
  void finished(const QList<kvscope::ui::ComparisonPoint>& points);
  void failed(const QString& message);

 private:
  void join();

  std::thread m_thread;
  std::atomic<bool> m_cancel{false};
  bool m_running = false;
};

}  // namespace kvscope::ui
