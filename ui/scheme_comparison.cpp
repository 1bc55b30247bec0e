#include "ui/scheme_comparison.h"

#include <algorithm>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include <QMetaObject>
#include <QPointer>

#include "model/model_file.h"
#include "runtime/eval.h"

namespace kvscope::ui {

SchemeComparison::SchemeComparison(QObject* parent) : QObject(parent) {}

SchemeComparison::~SchemeComparison() {
  cancel();
  join();
}

void SchemeComparison::join() {
  if (m_thread.joinable()) m_thread.join();
}

void SchemeComparison::cancel() {
  m_cancel.store(true);
}

bool SchemeComparison::start(const QString& modelPath, const QList<qint32>& tokens,
                             const QStringList& policies) {
  if (m_running) return false;
  join();
  m_cancel.store(false);
  m_running = true;
  // The presets are policy texts; each is parsed here, once.
  std::vector<kv::KvPolicy> parsed;
  for (const QString& p : policies) {
    auto policy = kv::KvPolicy::parse(p.toStdString());
    if (!policy.ok()) {  // ends at once, answered like a run that failed
      QMetaObject::invokeMethod(
          this,
          [this, m = QString::fromStdString(policy.error().message)] {
            m_running = false;
            emit failed(m);
          },
          Qt::QueuedConnection);
      return true;
    }
    parsed.push_back(std::move(policy).value());
  }
  std::vector<int32_t> ids(tokens.begin(), tokens.end());
  m_thread = std::thread([this, path = modelPath.toStdString(), ids = std::move(ids),
                          parsed = std::move(parsed), policies] {
    // Answers go to this object's thread; the object outlives the run (join()).
    auto post = [this](auto call) { QMetaObject::invokeMethod(this, call, Qt::QueuedConnection); };
    auto fail = [&](const std::string& message) {
      post([this, m = QString::fromStdString(message)] {
        m_running = false;
        emit failed(m);
      });
    };
    auto file = model::ModelFile::open(path);
    if (!file.ok()) return fail(file.error().message);
    std::shared_ptr<const model::ModelFile> model(std::move(file).value());
    runtime::BackendChoice choice;
    choice.kind = "cpu";
    choice.threads = std::max(1u, std::thread::hardware_concurrency() / 2);
    choice.contextLimit = static_cast<uint32_t>(ids.size());
    choice.timing = false;
    choice.vetDevice = false;
    runtime::EvalOptions options;
    options.cancel = &m_cancel;
    options.progress = [&](uint64_t done, uint64_t total) {
      post([this, done, total] { emit progress(done, total); });
    };
    Expected<std::vector<runtime::EvalResult>> results = makeError(ErrorCode::kInternal, "");
    try {
      results = runtime::evaluateKvPolicies(model, ids, choice, parsed, options);
    } catch (const std::bad_alloc&) {
      results = makeError(ErrorCode::kOutOfMemory,
                          "out of memory: the comparison needs a second copy of the model and "
                          "the logits of every step of the conversation");
    } catch (const std::exception& e) {
      results = makeError(ErrorCode::kInternal, "the comparison failed: {}", e.what());
    }
    if (!results.ok()) return fail(results.error().message);
    QList<ComparisonPoint> points;
    for (size_t i = 0; i < results->size(); ++i) {
      const runtime::EvalResult& r = (*results)[i];
      points.append({.policy = policies.at(static_cast<int>(i)),
                     .used = QString::fromStdString(r.policy),
                     .bitsPerValue = (r.bitsPerValueK + r.bitsPerValueV) / 2.0,
                     .kld = r.kldMean,
                     .top1 = r.top1});
    }
    post([this, points] {
      m_running = false;
      emit finished(points);
    });
  });
  return true;
}

}  // namespace kvscope::ui
