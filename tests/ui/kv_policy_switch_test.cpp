// Switching the KV cache policy mid-conversation through ChatController and EngineWorker,
// on the real engine (stories260K, CPU backend): the conversation stays, the history is
// re-encoded with progress, the KV report names the new schemes with fewer bytes and a
// measured codec error, and the next reply equals the engine's own reply under the new
// policy. Bad policies and switches during a reply change nothing. The same switch
// driven from the MainWindow's Scheme panel reaches the chat view and both panels.
#include <QComboBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "fake_devices.h"
#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "runtime/session.h"
#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/engine_thread.h"
#include "ui/engine_worker.h"
#include "ui/inspector_dock.h"
#include "ui/kv_memory_panel.h"
#include "ui/main_window.h"
#include "ui/message_widget.h"
#include "ui/scheme_panel.h"
#include "ui_fixtures.h"

using namespace kvscope;
using kvscope::ui::ChatController;
using kvscope::ui::EngineThread;
using kvscope::ui::KvReport;
using kvscope::ui::ReplyStats;

namespace {

constexpr int kWaitMs = 60000;
constexpr int kMaxTokens = 24;
const QString kCompact = QStringLiteral("k=q8_0r,v=turbo6b");

ui::SamplingSettings greedy() {
  ui::SamplingSettings s;
  s.temperature = 0.0;
  s.maxTokens = kMaxTokens;
  s.seed = 1;
  return s;
}

// The engine's reply to `asked` from a session that answered `turns` (each
// the conversation as sent) with the f16 cache and then switched to `policy`
// (Session::setKvPolicy: from f16 it re-encodes the stored rows).
std::string replyAfterSwitch(const std::vector<QList<ui::ChatMessage>>& turns,
                             const QList<ui::ChatMessage>& asked, const QString& policy) {
  auto file = model::ModelFile::open(ui::test::storiesModel().toStdString());
  std::shared_ptr<const model::ModelFile> model(std::move(*file));
  auto tokenizer = model::loadTokenizer(*model);
  const runtime::BackendChoice choice{.kind = "cpu"};
  auto backend = runtime::makeBackend(model, choice);
  auto parsed = kv::KvPolicy::parse(policy.toStdString());
  if (!backend.ok() || !parsed.ok()) return "<engine error>";
  runtime::Session session(model, std::move(*backend), std::move(*tokenizer),
                           runtime::makeBackendFactory(model, choice));
  runtime::GenerateOptions options;
  options.maxTokens = kMaxTokens;
  options.sampler.temperature = 0.0f;
  const auto reply = [&](const QList<ui::ChatMessage>& messages) -> Expected<std::string> {
    std::vector<tokenizer::ChatMessage> chat;
    for (const ui::ChatMessage& m : messages)
      chat.push_back({m.role.toStdString(), m.text.toStdString()});
    KVS_ASSIGN_OR_RETURN(auto prompt, session.renderChat(chat));
    KVS_ASSIGN_OR_RETURN(auto result, session.generate(session.tokenizeChat(prompt), options));
    return result.text;
  };
  for (const auto& turn : turns) {
    if (!reply(turn).ok()) return "<engine error>";
  }
  if (!session.setKvPolicy(*parsed).ok()) return "<engine error>";
  auto last = reply(asked);
  return last.ok() ? *last : std::string("<engine error>");
}

}  // namespace

class KvPolicySwitchTest : public QObject {
  Q_OBJECT

  QTemporaryDir m_home;

  bool load(ChatController& chat) {
    chat.setBackendSettings({QStringLiteral("cpu"), -1, 0, {}});
    QSignalSpy loaded(&chat, &ChatController::modelLoaded);
    chat.loadModel(ui::test::storiesModel());
    if (!loaded.wait(kWaitMs)) return false;
    chat.setSampling(greedy());
    return chat.hasModel();
  }

  ReplyStats sendAndWait(ChatController& chat, const QString& text) {
    QSignalSpy finished(&chat, &ChatController::replyFinished);
    chat.send(text);
    if (!finished.wait(kWaitMs)) return {};
    return finished.first().at(1).value<ReplyStats>();
  }

 private slots:
  void initTestCase() {
    KVS_REQUIRE_UI_FIXTURE(ui::test::storiesModel());
    qunsetenv("KVSCOPE_DEVICE");
    // The window's settings and conversations go to a throwaway folder.
    QVERIFY(m_home.isValid());
    qputenv("XDG_DATA_HOME", m_home.filePath(QStringLiteral("data")).toUtf8());
    qputenv("XDG_CONFIG_HOME", m_home.filePath(QStringLiteral("config")).toUtf8());
  }

  void switchingMidConversationReEncodesAndKeepsTheConversation() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QVERIFY(load(chat));
    QSignalSpy kv(&chat, &ChatController::kvReported);
    QVERIFY(sendAndWait(chat, QStringLiteral("Once upon a time there was a dog")).valid());
    const ReplyStats second = sendAndWait(chat, QStringLiteral("The dog liked to play"));
    QVERIFY(second.valid());
    const runtime::KvSnapshot before = kv.last().at(0).value<KvReport>().kv;
    QCOMPARE(QString::fromStdString(before.layers[0].valueScheme), QStringLiteral("f16"));
    const QList<ui::ChatMessage> messages = chat.conversation().messages;
    QCOMPARE(messages.size(), 4);

    QSignalSpy changing(&chat, &ChatController::policyChanging);
    QSignalSpy progress(&chat, &ChatController::policyProgress);
    QSignalSpy changed(&chat, &ChatController::policyChanged);
    QSignalSpy failed(&chat, &ChatController::policyFailed);
    QSignalSpy refused(&chat, &ChatController::errorOccurred);
    kv.clear();
    chat.setKvPolicy(kCompact);
    QVERIFY(chat.isChangingPolicy());
    QCOMPARE(changing.size(), 1);
    chat.send(QStringLiteral("Not now"));  // no reply while the cache is re-encoded
    QCOMPARE(refused.size(), 1);
    QVERIFY(changed.wait(kWaitMs));
    QVERIFY(failed.isEmpty());
    QVERIFY(!chat.isChangingPolicy());
    QCOMPARE(changed.first().at(0).toString(), kCompact);

    // The whole history was re-encoded, and nothing in the conversation moved.
    QVERIFY(!progress.isEmpty());
    QCOMPARE(progress.last().at(0).toUInt(), second.cachedTokens);
    QCOMPARE(progress.last().at(1).toUInt(), second.cachedTokens);
    QCOMPARE(chat.conversation().messages.size(), messages.size());
    for (int i = 0; i < messages.size(); ++i) {
      QCOMPARE(chat.conversation().messages[i].role, messages[i].role);
      QCOMPARE(chat.conversation().messages[i].text, messages[i].text);
    }
    QCOMPARE(chat.model().kvPolicy, kCompact);
    QCOMPARE(chat.backendSettings().kvPolicy, kCompact);
    QVERIFY(chat.model().kvBytesPerToken < 5u * 4 * 2 * 8 * 2);

    // The new cache: same rows, the new schemes, fewer bytes, a measured error per layer.
    QVERIFY(!kv.isEmpty());
    const runtime::KvSnapshot after = kv.last().at(0).value<KvReport>().kv;
    QCOMPARE(after.rows, before.rows);
    QCOMPARE(after.f16Bytes(), before.f16Bytes());
    QVERIFY(after.usedBytes() < before.usedBytes());
    QCOMPARE(after.layers.size(), size_t{5});
    for (const runtime::KvLayerSnapshot& layer : after.layers) {
      QCOMPARE(QString::fromStdString(layer.keyScheme), QStringLiteral("q8_0r"));
      QCOMPARE(QString::fromStdString(layer.valueScheme), QStringLiteral("turbo6b"));
      QVERIFY(layer.keyError > 0.0);
      QVERIFY(layer.valueError > layer.keyError);
    }

    // The next reply reuses the re-encoded cache and is the engine's reply after the same
    // turns and the same switch.
    const ReplyStats third = sendAndWait(chat, QStringLiteral("Then it rained"));
    QVERIFY(third.valid());
    QVERIFY(third.reusedTokens > 0);
    QVERIFY(third.generatedTokens > 0);
    QList<ui::ChatMessage> asked = messages;
    asked.append(chat.conversation().messages[4]);
    const QList<ui::ChatMessage> firstTurn = messages.mid(0, 1), secondTurn = messages.mid(0, 3);
    QCOMPARE(chat.conversation().messages[5].text.toStdString(),
             replyAfterSwitch({firstTurn, secondTurn}, asked, kCompact));
  }

  void badPolicyFailsAndKeepsTheCache() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QVERIFY(load(chat));
    const ReplyStats first = sendAndWait(chat, QStringLiteral("Once upon a time"));
    QVERIFY(first.valid());
    QSignalSpy failed(&chat, &ChatController::policyFailed);
    QSignalSpy changed(&chat, &ChatController::policyChanged);
    chat.setKvPolicy(QStringLiteral("k=nonsense"));
    QVERIFY(failed.wait(kWaitMs));
    QVERIFY(changed.isEmpty());
    QVERIFY(failed.first().at(0).toString().contains(QStringLiteral("nonsense")));
    QVERIFY(!chat.isChangingPolicy());
    QCOMPARE(chat.model().kvPolicy, QStringLiteral("k=f16,v=f16"));
    QVERIFY(chat.backendSettings().kvPolicy.isEmpty());
    const ReplyStats next = sendAndWait(chat, QStringLiteral("The end"));
    QVERIFY(next.valid());
    QVERIFY(next.reusedTokens > 0);
  }

  void refusedWhileAReplyRuns() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QVERIFY(load(chat));
    QSignalSpy refused(&chat, &ChatController::errorOccurred);
    QSignalSpy changing(&chat, &ChatController::policyChanging);
    QSignalSpy finished(&chat, &ChatController::replyFinished);
    chat.send(QStringLiteral("Once upon a time"));
    QVERIFY(chat.isGenerating());
    chat.setKvPolicy(kCompact);
    QCOMPARE(refused.size(), 1);
    QVERIFY(changing.isEmpty());
    QVERIFY(!chat.isChangingPolicy());
    QVERIFY(finished.wait(kWaitMs));
    QCOMPARE(chat.model().kvPolicy, QStringLiteral("k=f16,v=f16"));
  }

  // The user's path: pick K, V and a boundary in the Scheme panel, Apply, watch the
  // re-encode, keep chatting.
  void schemePanelSwitchesTheLiveCache() {
    EngineThread engine(ui::test::fakeDevices);
    ui::MainWindow window(engine.worker());
    ChatController& chat = *window.controller();
    QVERIFY(load(chat));
    QVERIFY(sendAndWait(chat, QStringLiteral("Once upon a time there was a cat")).valid());
    window.inspector()->flush();
    const ui::KvSummary before = window.inspector()->kvMemoryPanel()->summary();
    QCOMPARE(before.ratio, 1.0);

    ui::SchemePanel* panel = window.inspector()->schemePanel();
    auto* keys = panel->findChild<QComboBox*>(QStringLiteral("keySchemePicker"));
    auto* values = panel->findChild<QComboBox*>(QStringLiteral("valueSchemePicker"));
    auto* boundary = panel->findChild<QSpinBox*>(QStringLiteral("boundaryLayers"));
    auto* preset = panel->findChild<QComboBox*>(QStringLiteral("policyPreset"));
    auto* apply = panel->findChild<QPushButton*>(QStringLiteral("applyPolicyButton"));
    auto* progress = panel->findChild<QProgressBar*>(QStringLiteral("reencodeProgress"));
    QVERIFY(!apply->isEnabled());
    QCOMPARE(boundary->maximum(), 2);  // 5 layers
    keys->setCurrentText(QStringLiteral("q8_0r"));
    values->setCurrentText(QStringLiteral("turbo6b"));
    QCOMPARE(preset->currentData().toString(), kCompact);  // the preset the pickers match
    boundary->setValue(1);
    QCOMPARE(panel->chosenPolicy(), QStringLiteral("k=q8_0r,v=turbo6b,boundary=1"));
    QVERIFY(apply->isEnabled());

    QSignalSpy changed(&chat, &ChatController::policyChanged);
    QSignalSpy sawProgress(&chat, &ChatController::policyProgress);
    QTest::mouseClick(apply, Qt::LeftButton);
    QVERIFY(chat.isChangingPolicy());
    QVERIFY(!progress->isHidden());
    QVERIFY(changed.wait(kWaitMs));
    QVERIFY(!sawProgress.isEmpty());
    QVERIFY(progress->isHidden());
    window.inspector()->flush();

    QCOMPARE(window.chatView()->messageCount(), 2);
    QCOMPARE(window.chatView()->message(0)->text(),
             QStringLiteral("Once upon a time there was a cat"));
    QCOMPARE(window.chatView()->message(1)->text(), chat.conversation().messages[1].text);
    QVERIFY(!apply->isEnabled());  // the pickers show the active policy
    auto* table = panel->findChild<QTableWidget*>(QStringLiteral("schemeTable"));
    QCOMPARE(table->rowCount(), 5);
    QCOMPARE(table->item(0, 1)->text(), QStringLiteral("f16"));  // boundary layer
    QCOMPARE(table->item(2, 1)->text(), QStringLiteral("q8_0r"));
    QCOMPARE(table->item(2, 3)->text(), QStringLiteral("turbo6b"));
    QVERIFY(table->item(2, 5)->text().endsWith(QLatin1Char('%')));
    const ui::KvSummary after = window.inspector()->kvMemoryPanel()->summary();
    QCOMPARE(after.rows, before.rows);
    QVERIFY(after.bytes < before.bytes);
    QVERIFY(after.ratio > 1.0);
    auto* chart = window.inspector()->kvMemoryPanel()->findChild<ui::KvLayerChart*>();
    QVERIFY(chart->layerErrorText(2).endsWith(QLatin1Char('%')));

    const ReplyStats next = sendAndWait(chat, QStringLiteral("The cat slept"));
    QVERIFY(next.valid());
    QVERIFY(next.reusedTokens > 0);
    QCOMPARE(window.chatView()->messageCount(), 4);
  }
};

QTEST_MAIN(KvPolicySwitchTest)
#include "kv_policy_switch_test.moc"
