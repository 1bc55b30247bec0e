// ChatController + EngineWorker driving the real engine on stories260K (CPU backend; one
// test on Vulkan): streaming, stop, edit with prefix reuse, regenerate, failures that
// keep the conversation, and model load errors. Replies are greedy, so the engine run
// directly through runtime::Session is the reference for the text the UI shows.
#include <QSemaphore>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "fake_devices.h"
#include "gpu/pipeline.h"
#include "support/hf_model_folder.h"
#include "ui/chat_controller.h"
#include "ui/conversation_store.h"
#include "ui/engine_thread.h"
#include "ui/engine_worker.h"
#include "ui/model_settings.h"
#include "ui_fixtures.h"

using namespace kvscope;
using kvscope::ui::ChatController;
using kvscope::ui::EngineThread;
using kvscope::ui::EngineWorker;
using kvscope::ui::ReplyStats;
using kvscope::ui::StopReason;

namespace {

constexpr int kWaitMs = 60000;

ui::SamplingSettings greedy(int maxTokens) {
  ui::SamplingSettings s;
  s.temperature = 0.0;
  s.maxTokens = maxTokens;
  s.seed = 1;
  return s;
}

}  // namespace

class ChatControllerTest : public QObject {
  Q_OBJECT

  // Loads stories260K and waits for it; `contextLimit` 0 keeps the trained context.
  bool load(ChatController& chat, const QString& kind = QStringLiteral("cpu"),
            quint32 contextLimit = 0) {
    chat.setBackendSettings({kind, -1, contextLimit, {}});
    QSignalSpy loaded(&chat, &ChatController::modelLoaded);
    QSignalSpy failed(&chat, &ChatController::modelLoadFailed);
    chat.loadModel(ui::test::storiesModel());
    if (!loaded.wait(kWaitMs)) {
      qWarning() << "load failed:"
                 << (failed.isEmpty() ? QString() : failed.first().at(1).toString());
      return false;
    }
    return chat.hasModel();
  }

  // Sends `text` and waits for the reply to end; returns its stats.
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
  }

  void sendStreamsTheEnginesReplyInOrder() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QVERIFY(load(chat));
    QCOMPARE(chat.model().architecture, QStringLiteral("llama"));
    QCOMPARE(chat.model().kvLayers, 5u);
    chat.setSampling(greedy(60));

    QStringList pieces;
    connect(&chat, &ChatController::replyText, this, [&pieces](int index, const QString& piece) {
      QCOMPARE(index, 1);
      pieces << piece;
    });
    QSignalSpy kv(&chat, &ChatController::kvReported);
    QSignalSpy generating(&chat, &ChatController::generatingChanged);
    const ReplyStats stats = sendAndWait(chat, QStringLiteral("Once upon a time"));

    QVERIFY(stats.valid());
    QVERIFY(!chat.isGenerating());
    QCOMPARE(chat.conversation().messages.size(), 2);
    QCOMPARE(chat.conversation().messages[0].role, QStringLiteral("user"));
    const ui::ChatMessage& reply = chat.conversation().messages[1];
    QCOMPARE(reply.role, QStringLiteral("assistant"));
    QVERIFY(!pieces.isEmpty());
    QCOMPARE(pieces.join(QString()), reply.text);
    QCOMPARE(reply.text.toStdString(),
             ui::test::referenceReply(QStringLiteral("Once upon a time"), 60));
    QVERIFY(stats.generatedTokens > 0 && stats.generatedTokens <= 60);
    QVERIFY(stats.stop == StopReason::kEndOfGeneration || stats.stop == StopReason::kMaxTokens);
    QVERIFY(stats.promptTokens > 0);
    QCOMPARE(stats.reusedTokens, 0u);
    QCOMPARE(stats.contextLimit, chat.model().trainedContext);
    // The cache holds the prompt and every generated token that was fed back:
    // all of them, except the last one when the turn stopped at its limit.
    QCOMPARE(chat.cachedTokens(), stats.promptTokens + stats.generatedTokens -
                                      (stats.stop == StopReason::kMaxTokens ? 1u : 0u));
    QCOMPARE(generating.size(), 2);  // true, then false

    // The last KV report is the cache at the end of the turn: 5 layers, 4 KV heads,
    // K and V rows of 8 f16 values each.
    QVERIFY(!kv.isEmpty());
    const runtime::KvSnapshot last = kv.last().at(0).value<ui::KvReport>().kv;
    QCOMPARE(last.rows, stats.cachedTokens);
    QCOMPARE(last.layers.size(), size_t{5});
    QCOMPARE(QString::fromStdString(last.layers[0].keyScheme), QStringLiteral("f16"));
    QCOMPARE(last.usedBytes(), quint64{last.rows} * 5 * 4 * 2 * 8 * 2);
    QCOMPARE(last.f16Bytes(), last.usedBytes());
  }

  void kvReportsFollowTheLoadedPolicy() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    chat.setBackendSettings({QStringLiteral("cpu"), -1, 0, QStringLiteral("k=q8_0,v=q4_0")});
    QSignalSpy loaded(&chat, &ChatController::modelLoaded);
    chat.loadModel(ui::test::storiesModel());
    QVERIFY(loaded.wait(kWaitMs));
    QCOMPARE(chat.model().kvPolicy, QStringLiteral("k=q8_0,v=q4_0"));
    // Rows of 8 values: q8_0 2 + 8 -> 12 bytes, q4_0 2 + 4 -> 8 bytes (padded to 4).
    QCOMPARE(chat.model().kvBytesPerToken, quint64{5 * 4 * (12 + 8)});
    chat.setSampling(greedy(10));
    QSignalSpy kv(&chat, &ChatController::kvReported);
    const ReplyStats stats = sendAndWait(chat, QStringLiteral("Once upon a time"));
    QVERIFY(stats.valid());
    const runtime::KvSnapshot last = kv.last().at(0).value<ui::KvReport>().kv;
    QCOMPARE(last.rows, stats.cachedTokens);
    QCOMPARE(QString::fromStdString(last.layers[0].keyScheme), QStringLiteral("q8_0"));
    QCOMPARE(QString::fromStdString(last.layers[0].valueScheme), QStringLiteral("q4_0"));
    QCOMPARE(last.usedBytes(), quint64{last.rows} * 5 * 4 * (12 + 8));
    QCOMPARE(last.f16Bytes(), quint64{last.rows} * 5 * 4 * 2 * 8 * 2);
    QVERIFY(double(last.f16Bytes()) > 1.5 * double(last.usedBytes()));
  }

  void stopKeepsThePartialReply() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QVERIFY(load(chat));
    chat.setSampling(greedy(400));

    // Hold the engine after its first piece until the GUI thread has asked to stop, so
    // the stop lands mid-reply however fast the model runs.
    QSemaphore firstPiece, resume;
    std::atomic<bool> held = false;
    connect(
        engine.worker(), &EngineWorker::replyText, engine.worker(),
        [&](quint64, const QString&) {
          if (held.exchange(true)) return;
          firstPiece.release();
          resume.acquire();
        },
        Qt::DirectConnection);
    QSignalSpy finished(&chat, &ChatController::replyFinished);
    chat.send(QStringLiteral("Once upon a time"));
    QVERIFY(firstPiece.tryAcquire(1, kWaitMs));
    QVERIFY(chat.isGenerating());
    chat.stop();
    resume.release();
    QVERIFY(finished.wait(kWaitMs));

    const auto stats = finished.first().at(1).value<ReplyStats>();
    QCOMPARE(stats.stop, StopReason::kStopRequested);
    QCOMPARE(stats.generatedTokens, 1u);
    const ui::ChatMessage& reply = chat.conversation().messages[1];
    QVERIFY(!reply.text.isEmpty());
    QCOMPARE(reply.stats.stop, StopReason::kStopRequested);
    QVERIFY(reply.error.isEmpty());
  }

  void editReusesTheCachedPrefix() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QVERIFY(load(chat));
    chat.setSampling(greedy(20));
    QVERIFY(sendAndWait(chat, QStringLiteral("Once upon a time there was a dog")).valid());
    QVERIFY(sendAndWait(chat, QStringLiteral("The dog liked to play")).valid());
    QCOMPARE(chat.conversation().messages.size(), 4);

    QSignalSpy progress(&chat, &ChatController::promptProgress);
    QSignalSpy reset(&chat, &ChatController::conversationReset);
    QSignalSpy finished(&chat, &ChatController::replyFinished);
    chat.editMessage(0, QStringLiteral("Once upon a time there was a cat"));
    QVERIFY(finished.wait(kWaitMs));
    const auto stats = finished.first().at(1).value<ReplyStats>();

    QCOMPARE(reset.size(), 1);
    QCOMPARE(chat.conversation().messages.size(), 2);
    QCOMPARE(chat.conversation().messages[0].text,
             QStringLiteral("Once upon a time there was a cat"));
    // BOS and "Once upon a time there was a" stay cached; only the rest is run again.
    QVERIFY(stats.reusedTokens > 1);
    QVERIFY(stats.reusedTokens < stats.promptTokens);
    QVERIFY(!progress.isEmpty());
    QCOMPARE(progress.last().at(1).toUInt(), stats.promptTokens - stats.reusedTokens);
    QCOMPARE(chat.conversation().messages[1].text.toStdString(),
             ui::test::referenceReply(QStringLiteral("Once upon a time there was a cat"), 20));
  }

  void regenerateReplacesTheLastReply() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QVERIFY(load(chat));
    chat.setSampling(greedy(30));
    const ReplyStats first = sendAndWait(chat, QStringLiteral("Lily had a red ball"));
    QVERIFY(first.valid());
    const QString firstText = chat.conversation().messages[1].text;

    QSignalSpy finished(&chat, &ChatController::replyFinished);
    chat.regenerate();
    QVERIFY(chat.isGenerating());
    QCOMPARE(chat.conversation().messages.size(), 2);
    QVERIFY(chat.conversation().messages[1].text.isEmpty());
    QVERIFY(finished.wait(kWaitMs));
    const auto stats = finished.first().at(1).value<ReplyStats>();
    // The whole prompt is cached; only its last token runs again, for the logits.
    QCOMPARE(stats.promptTokens, first.promptTokens);
    QCOMPARE(stats.reusedTokens, stats.promptTokens - 1);
    QCOMPARE(chat.conversation().messages.size(), 2);
    QCOMPARE(chat.conversation().messages[1].text, firstText);  // greedy: the same reply
  }

  void failedTurnKeepsTheConversation() {
    QTemporaryDir dir;
    ui::ConversationStore store(dir.path());
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker(), &store);
    QVERIFY(load(chat, QStringLiteral("cpu"), 16));
    QCOMPARE(chat.contextLimit(), 16u);

    QSignalSpy failed(&chat, &ChatController::replyFailed);
    const QString longPrompt = QStringLiteral(
        "Once upon a time there was a little girl named Lily who "
        "liked to play in the park with her dog");
    chat.send(longPrompt);
    QVERIFY(failed.wait(kWaitMs));
    const QString message = failed.first().at(1).toString();
    QVERIFY2(message.contains(QStringLiteral("context")), qPrintable(message));
    QVERIFY(!chat.isGenerating());

    const auto& messages = chat.conversation().messages;
    QCOMPARE(messages.size(), 2);
    QCOMPARE(messages[0].text, longPrompt);
    QCOMPARE(messages[1].error, message);
    QCOMPARE(messages[1].stats.stop, StopReason::kError);
    // Saved with the error, so a restart shows the same thing.
    ui::ConversationStore reread(dir.path());
    reread.load();
    QCOMPARE(reread.conversations().size(), 1);
    QCOMPARE(reread.conversations()[0].messages[1].error, message);

    // A short message still works in the same conversation afterwards.
    chat.setSampling(greedy(4));
    QSignalSpy finished(&chat, &ChatController::replyFinished);
    chat.regenerate();
    QVERIFY(failed.wait(kWaitMs));  // the same long prompt fails again, cleanly
    chat.editMessage(0, QStringLiteral("Lily"));
    QVERIFY(finished.wait(kWaitMs));
    QCOMPARE(chat.conversation().messages.size(), 2);
    QVERIFY(chat.conversation().messages[1].error.isEmpty());
  }

  void sendWithoutModelIsRefused() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QSignalSpy error(&chat, &ChatController::errorOccurred);
    chat.send(QStringLiteral("hello"));
    QCOMPARE(error.size(), 1);
    QVERIFY(chat.conversation().messages.isEmpty());
  }

  void missingFileIsALoadError() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QSignalSpy failed(&chat, &ChatController::modelLoadFailed);
    chat.loadModel(QStringLiteral("/nonexistent/model.gguf"));
    QVERIFY(failed.wait(kWaitMs));
    QCOMPARE(failed.first().at(0).toString(), QStringLiteral("/nonexistent/model.gguf"));
    QVERIFY2(failed.first().at(1).toString().contains(QStringLiteral("model.gguf")),
             qPrintable(failed.first().at(1).toString()));
    QVERIFY(!chat.hasModel());
    QVERIFY(!chat.isLoading());
  }

  void truncatedFileKeepsTheLoadedModel() {
    QTemporaryDir dir;
    QFile source(ui::test::storiesModel());
    QVERIFY(source.open(QIODevice::ReadOnly));
    const QString truncated = dir.filePath(QStringLiteral("truncated.gguf"));
    QFile out(truncated);
    QVERIFY(out.open(QIODevice::WriteOnly));
    out.write(source.read(source.size() / 2));
    out.close();

    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QVERIFY(load(chat));
    QSignalSpy failed(&chat, &ChatController::modelLoadFailed);
    QSignalSpy unloaded(&chat, &ChatController::modelUnloaded);
    chat.loadModel(truncated);
    QVERIFY(failed.wait(kWaitMs));
    const QString message = failed.first().at(1).toString();
    QVERIFY2(message.startsWith(QStringLiteral("Could not load truncated.gguf: ")),
             qPrintable(message));
    QVERIFY(unloaded.isEmpty());
    // The file was refused before the old model was released: it still answers.
    QVERIFY(chat.hasModel());
    chat.setSampling(greedy(5));
    QVERIFY(sendAndWait(chat, QStringLiteral("Once")).valid());
  }

  // A Vulkan context longer than the device can hold is refused with the longest that
  // fits, before the loaded model is released: it keeps answering, with its settings.
  void contextBeyondTheDeviceKeepsTheLoadedModel() {
    EngineThread engine;
    ChatController chat(engine.worker());
    QVERIFY(load(chat));
    const ui::BackendSettings loaded = chat.backendSettings();
    QSignalSpy failed(&chat, &ChatController::modelLoadFailed);
    QSignalSpy unloaded(&chat, &ChatController::modelUnloaded);
    chat.loadModelWith(ui::test::storiesModel(),
                       {QStringLiteral("vulkan"), -1, 1'000'000'000u, {}});
    QVERIFY(failed.wait(kWaitMs));
    const QString message = failed.first().at(1).toString();
    if (message.contains(QStringLiteral("Vulkan")) && !message.contains(QStringLiteral("fits")))
      QSKIP(qPrintable(QStringLiteral("no usable Vulkan device: %1").arg(message)));
    QVERIFY2(message.contains(QStringLiteral("the longest context that fits is")),
             qPrintable(message));
    QVERIFY(unloaded.isEmpty());
    QVERIFY(chat.hasModel());
    QVERIFY(chat.backendSettings() == loaded);
    chat.setSampling(greedy(5));
    QVERIFY(sendAndWait(chat, QStringLiteral("Once")).valid());
  }

  // Leaving a chat saves its KV cache beside it; reopening it restores the
  // cache, so the next reply reuses the whole conversation. A damaged cache is
  // reported, removed, and the chat is re-read with nothing lost; one made
  // under another policy is reported and kept.
  void savedKvCacheRestoresAReopenedChat() {
    QTemporaryDir dir;
    ui::ConversationStore store(dir.path());
    ui::ModelSettings settings(dir.filePath(QStringLiteral("settings.ini")));
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker(), &store, &settings);
    QVERIFY(load(chat));
    chat.setSampling(greedy(8));
    const ReplyStats first = sendAndWait(chat, QStringLiteral("Once upon a time"));
    QVERIFY(first.promptTokens > 0);
    const QString id = chat.conversation().id;
    const QString cache = store.kvCachePath(id);

    // Leaving saves the chat's cache; the worker does that before it runs the
    // next chat's turn, which takes the engine's cache.
    chat.newChat();
    sendAndWait(chat, QStringLiteral("Lily and Ben went to the park"));
    QVERIFY(QFile::exists(cache));

    QSignalSpy restored(&chat, &ChatController::kvCacheRestored);
    chat.openConversation(id);
    QVERIFY(restored.wait(kWaitMs));
    QVERIFY(restored.first().at(0).toUInt() >= first.promptTokens);
    QCOMPARE(chat.cachedTokens(), restored.first().at(0).toUInt());
    const ReplyStats next = sendAndWait(chat, QStringLiteral("The dog ran"));
    QVERIFY2(next.reusedTokens >= first.promptTokens,
             qPrintable(QStringLiteral("%1 reused").arg(next.reusedTokens)));

    // Damaged on disk: the chat opens, says why, and re-reads.
    chat.newChat();
    sendAndWait(chat, QStringLiteral("Lily and Ben went to the park"));
    QFile file(cache);
    QVERIFY(file.open(QIODevice::ReadWrite));
    QByteArray bytes = file.readAll();
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
    file.seek(0);
    file.write(bytes);
    file.close();
    QSignalSpy notice(&chat, &ChatController::kvCacheNotice);
    chat.openConversation(id);
    QVERIFY(notice.wait(kWaitMs));
    QVERIFY2(notice.first().at(0).toString().contains(QStringLiteral("was not used")),
             qPrintable(notice.first().at(0).toString()));
    QVERIFY(!QFile::exists(cache));
    QCOMPARE(chat.conversation().messages.size(), 4);
    const ReplyStats reread = sendAndWait(chat, QStringLiteral("The cat sat"));
    QVERIFY(reread.promptTokens > 0);
    QVERIFY(reread.reusedTokens < first.promptTokens);
    QCOMPARE(chat.conversation().messages.size(), 6);

    // Under another KV policy the cache is not used but kept for the old one.
    chat.newChat();
    chat.openConversation(id);  // the engine still holds this chat: nothing to restore
    QSignalSpy notice2(&chat, &ChatController::kvCacheNotice);
    QSignalSpy reloaded(&chat, &ChatController::modelLoaded);
    chat.setBackendSettings({QStringLiteral("cpu"), -1, 0, QStringLiteral("k=q4_0,v=q4_0")});
    chat.loadModel(ui::test::storiesModel());  // saves this chat's cache first
    QVERIFY(reloaded.wait(kWaitMs));
    QVERIFY(notice2.wait(kWaitMs));
    QVERIFY2(notice2.last().at(0).toString().contains(QStringLiteral("k=q4_0,v=q4_0")),
             qPrintable(notice2.last().at(0).toString()));
    QVERIFY(QFile::exists(cache));
  }

  // A conversation longer than the context: under rolling the oldest messages are left
  // out (flagged, announced) and the reply comes; under stop the turn fails saying how
  // to go on in the app's terms, and the conversation is kept.
  void contextOverflowLeavesOutOldMessages() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QVERIFY(load(chat, QStringLiteral("cpu"), 96));
    ui::SamplingSettings sampling = greedy(8);
    sampling.contextOverflow = runtime::ContextOverflow::kRolling;
    chat.setSampling(sampling);
    QSignalSpy leftOut(&chat, &ChatController::messagesLeftOut);
    QSignalSpy tooLong(&chat, &ChatController::conversationTooLong);
    for (int i = 0; i < 6 && leftOut.isEmpty(); ++i)
      QVERIFY(sendAndWait(chat, QStringLiteral("Once upon a time there was a little dog")).valid());
    QVERIFY2(!leftOut.isEmpty(), "the conversation never outgrew 96 tokens");
    const auto indices = leftOut.last().at(0).value<QList<int>>();
    QVERIFY(indices.contains(0));  // the oldest message first
    const QList<ui::ChatMessage>& messages = chat.conversation().messages;
    for (int i = 0; i < messages.size(); ++i) QCOMPARE(messages[i].leftOut, indices.contains(i));
    QVERIFY(!messages[messages.size() - 2].leftOut);  // the message being answered
    QVERIFY(tooLong.isEmpty());

    sampling.contextOverflow = runtime::ContextOverflow::kStop;
    chat.setSampling(sampling);
    QSignalSpy failed(&chat, &ChatController::replyFailed);
    const qsizetype before = messages.size();
    chat.send(QStringLiteral("Once upon a time there was a little dog"));
    QVERIFY(failed.wait(kWaitMs));
    // Said with the app's own controls, not the CLI's options.
    const QString message = failed.first().at(1).toString();
    QVERIFY2(message.contains(QStringLiteral("start a new chat")) &&
                 message.contains(QStringLiteral("When the context is full")) &&
                 !message.contains(QStringLiteral("truncate-middle")),
             qPrintable(message));
    QCOMPARE(chat.conversation().messages.size(), before + 2);  // kept, with the error
    // The window offers its actions, with the message left unanswered.
    QCOMPARE(tooLong.count(), 1);
    QCOMPARE(tooLong.first().at(0).toString(),
             QStringLiteral("Once upon a time there was a little dog"));

    // A message too long on its own: leaving out old turns would not help, so
    // the error says what would and no actions are offered.
    chat.newChat();
    chat.send(QStringLiteral("Once upon a time there was a little dog. ").repeated(20));
    QVERIFY(failed.wait(kWaitMs));
    const QString alone = failed.last().at(1).toString();
    QVERIFY2(alone.contains(QStringLiteral("shorten the message")), qPrintable(alone));
    QCOMPARE(tooLong.count(), 1);
  }

  void vulkanBackendStreamsAReply() {
    EngineThread engine;
    ChatController chat(engine.worker());
    QVERIFY(load(chat, QStringLiteral("vulkan"), 128));
    QCOMPARE(chat.model().backend, QStringLiteral("vulkan"));
    chat.setSampling(greedy(8));
    QSignalSpy kv(&chat, &ChatController::kvReported);
    const ReplyStats stats = sendAndWait(chat, QStringLiteral("Once upon a time"));
    QVERIFY(stats.valid());
    QVERIFY(stats.generatedTokens > 0);
    QVERIFY(!chat.conversation().messages[1].text.isEmpty());
    QVERIFY(!kv.isEmpty());
    const runtime::KvSnapshot last = kv.last().at(0).value<ui::KvReport>().kv;
    QCOMPARE(last.rows, stats.cachedTokens);
    QCOMPARE(last.usedBytes(), quint64{last.rows} * 5 * 4 * 2 * 8 * 2);
  }

  // A Vulkan device that computes wrong (the F16 weight kernels stand in for
  // the F32 ones the model uses) fails the vetting of the model's spec: the
  // model opens on the CPU backend, the user is told why, and chat works.
  void aDeviceThatFailsVettingLeavesTheModelOnTheCpuWithANotice() {
    const gpu::KernelSubstitution wrong("weight_matvec_f32_", "weight_matvec_f16_");
    EngineThread engine;
    ChatController chat(engine.worker());
    QVERIFY(load(chat, QStringLiteral("vulkan"), 128));
    QCOMPARE(chat.model().backend, QStringLiteral("cpu"));
    const QString notice = chat.model().backendNotice;
    QVERIFY2(notice.contains(QStringLiteral("differ from the CPU backend")), qPrintable(notice));
    QVERIFY2(notice.contains(QStringLiteral("F32 weights")), qPrintable(notice));
    QVERIFY2(notice.contains(QStringLiteral("uses the CPU backend instead")), qPrintable(notice));
    chat.setSampling(greedy(4));
    QVERIFY(sendAndWait(chat, QStringLiteral("Once")).valid());
  }

  // Today's Hugging Face folders (Llama 3 and Qwen3 tokenizers, whose tokenizer.json
  // pre-tokenizes with a Split regex, around tiny random weights) load in the app and
  // chat through their own Jinja template: the reply's prompt is the one the engine
  // renders and tokenizes for the same message.
  void huggingFaceFoldersOfTodaysModelsLoadAndChat_data() {
    QTest::addColumn<QString>("tokenizer");
    QTest::addColumn<uint>("vocab");
    QTest::newRow("llama3") << QStringLiteral("tokenizer/hf-llama3") << 128256u;
    QTest::newRow("qwen3") << QStringLiteral("tokenizer/hf-qwen3") << 151936u;
  }
  void huggingFaceFoldersOfTodaysModelsLoadAndChat() {
    QFETCH(QString, tokenizer);
    QFETCH(uint, vocab);
    const QString tokenizerDir = ui::test::sharedFile(tokenizer);
    KVS_REQUIRE_UI_FIXTURE(tokenizerDir);
    QTemporaryDir dir;
    test::writeHfLlamaFolder(dir.path().toStdString(), vocab, tokenizerDir.toStdString());

    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    chat.setBackendSettings({QStringLiteral("cpu"), -1, 256, {}});
    QSignalSpy loaded(&chat, &ChatController::modelLoaded);
    chat.loadModel(dir.path());
    QVERIFY(loaded.wait(kWaitMs));
    QVERIFY(chat.model().chatTemplate.startsWith(QStringLiteral("Jinja")));
    QVERIFY(chat.model().templateWarning.isEmpty());
    chat.setSampling(greedy(3));
    const ReplyStats stats = sendAndWait(chat, QStringLiteral("Hi there"));
    QCOMPARE(stats.generatedTokens, 3u);

    auto file = model::ModelFile::open(dir.path().toStdString());
    QVERIFY(file.ok());
    auto tok = model::loadTokenizer(**file);
    QVERIFY(tok.ok());
    std::shared_ptr<const model::ModelFile> model(std::move(*file));
    auto backend = runtime::makeBackend(model, {.kind = "cpu", .contextLimit = 256});
    QVERIFY(backend.ok());
    runtime::Session session(model, std::move(*backend), std::move(*tok));
    const std::vector<tokenizer::ChatMessage> messages{{"user", "Hi there"}};
    const auto prompt = session.renderChat(messages);
    QVERIFY(prompt.ok());
    QCOMPARE(stats.promptTokens, quint32(session.tokenizeChat(*prompt).size()));
  }
};

QTEST_MAIN(ChatControllerTest)
#include "chat_controller_test.moc"
