// "Serve on localhost": LocalServer + EngineWorker serving stories260K (CPU backend) to an
// HTTP client on a free loopback port. A served reply is the engine's own greedy reply
// (runtime::Session without any UI or server in between); served requests run in slots
// of their own and leave the open chat's cache, gauge and inspector feeds alone; serving
// pauses while the model changes and resumes for the next one; a port in use
// turns serving off with a message.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QSignalSpy>
#include <QtTest>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "fake_devices.h"
#include "ui/chat_controller.h"
#include "ui/engine_thread.h"
#include "ui/engine_worker.h"
#include "ui/local_server.h"
#include "ui_fixtures.h"

using namespace kvscope;
using kvscope::ui::ChatController;
using kvscope::ui::EngineThread;
using kvscope::ui::EngineWorker;
using kvscope::ui::LocalServer;
using State = kvscope::ui::LocalServer::State;

namespace {

constexpr int kWaitMs = 60000;

int portOf(const QString& url) {
  return QUrl(url).port();
}

nlohmann::json chatBody(const std::string& text, int maxTokens) {
  return {{"messages", {{{"role", "user"}, {"content", text}}}},
          {"max_tokens", maxTokens},
          {"temperature", 0}};
}

// A listening socket on a free loopback port, so a server asked for that port cannot
// bind it.
class PortHolder {
 public:
  PortHolder() {
    m_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof addr;
    if (m_fd < 0 || ::bind(m_fd, reinterpret_cast<sockaddr*>(&addr), size) != 0 ||
        ::listen(m_fd, 1) != 0 || ::getsockname(m_fd, reinterpret_cast<sockaddr*>(&addr), &size))
      return;
    m_port = ntohs(addr.sin_port);
  }
  ~PortHolder() {
    if (m_fd >= 0) ::close(m_fd);
  }
  quint16 port() const { return m_port; }

 private:
  int m_fd = -1;
  quint16 m_port = 0;
};

}  // namespace

class LocalServerTest : public QObject {
  Q_OBJECT

  bool load(ChatController& chat) {
    chat.setBackendSettings({QStringLiteral("cpu"), -1, 0, {}});
    QSignalSpy loaded(&chat, &ChatController::modelLoaded);
    chat.loadModel(ui::test::storiesModel());
    return loaded.wait(kWaitMs) && chat.hasModel();
  }

 private slots:
  void initTestCase() {
    KVS_REQUIRE_UI_FIXTURE(ui::test::storiesModel());
    qunsetenv("KVSCOPE_DEVICE");
  }

  void servesTheLoadedModelAndLeavesTheChatAlone() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QVERIFY(load(chat));
    ui::SamplingSettings sampling = chat.sampling();
    sampling.temperature = 0.0;
    sampling.maxTokens = 12;
    chat.setSampling(sampling);
    // The chat holds a conversation first: its cache and gauge must survive the requests.
    QSignalSpy replies(&chat, &ChatController::replyFinished);
    chat.send(QStringLiteral("Once upon a time"));
    QVERIFY(replies.wait(kWaitMs));
    const quint32 chatCached = chat.cachedTokens();
    QVERIFY(chatCached > 0);

    LocalServer server(engine.worker(), &chat, 0);
    QSignalSpy steps(&chat, &ChatController::stepReported);
    QSignalSpy kv(&chat, &ChatController::kvReported);
    QSignalSpy gauge(&chat, &ChatController::contextUsageChanged);
    server.setOn(true);
    QTRY_COMPARE_WITH_TIMEOUT(server.state(), State::kServing, kWaitMs);
    QVERIFY(server.url().startsWith(QStringLiteral("http://127.0.0.1:")));
    QCOMPARE(server.modelId(), QStringLiteral("stories260K.gguf"));
    QVERIFY(server.statusText().contains(server.url()));

    httplib::Client client("127.0.0.1", portOf(server.url()));
    client.set_read_timeout(60, 0);
    auto models = client.Get("/v1/models");
    QVERIFY(models && models->status == 200);
    QCOMPARE(nlohmann::json::parse(models->body)["data"][0]["id"].get<std::string>(),
             "stories260K.gguf");
    for (int i = 0; i < 2; ++i) {
      auto r = client.Post("/v1/chat/completions", chatBody("Once upon a time", 30).dump(),
                           "application/json");
      QVERIFY(r);
      QCOMPARE(r->status, 200);
      const auto reply = nlohmann::json::parse(r->body);
      QCOMPARE(reply["choices"][0]["message"]["content"].get<std::string>(),
               ui::test::referenceReply(QStringLiteral("Once upon a time"), 30));
      // The second request finds the first one's tokens in its slot.
      if (i == 1) QVERIFY(reply["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() > 0);
      QTRY_COMPARE_WITH_TIMEOUT(server.servedRequests(), quint64(i + 1), kWaitMs);
    }
    QTRY_COMPARE(server.activeRequests(), quint32{0});
    const ui::ServedReport& last = server.lastServed();
    QVERIFY(EngineWorker::isServedTurn(last.turnId));
    QVERIFY(last.chat);
    QVERIFY(!last.cancelled);

    // Nothing of the requests reached the chat's gauge or the inspector's feeds.
    QCOMPARE(steps.count(), 0);
    QCOMPARE(kv.count(), 0);
    QCOMPARE(gauge.count(), 0);
    QCOMPARE(chat.cachedTokens(), chatCached);
    // The chat's next turn reuses its whole conversation: its cache was not touched.
    chat.send(QStringLiteral("The end"));
    QVERIFY(replies.wait(kWaitMs));
    const auto stats = replies.last().at(1).value<ui::ReplyStats>();
    QCOMPARE(stats.reusedTokens, chatCached);

    server.setOn(false);
    QCOMPARE(server.state(), State::kOff);
    QVERIFY(server.statusText().isEmpty());
    QTRY_VERIFY_WITH_TIMEOUT(!client.Get("/health"), kWaitMs);
  }

  void pausesWhileTheModelChangesAndServesTheNextOne() {
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QList<State> states;
    LocalServer server(engine.worker(), &chat, 0);
    connect(&server, &LocalServer::changed, this, [&] { states.append(server.state()); });
    // On before a model is there: it waits for one.
    server.setOn(true);
    QCOMPARE(server.state(), State::kWaitingForModel);
    QVERIFY(load(chat));
    QTRY_COMPARE_WITH_TIMEOUT(server.state(), State::kServing, kWaitMs);

    states.clear();
    QVERIFY(load(chat));  // the same file again: the model is replaced
    QTRY_COMPARE_WITH_TIMEOUT(server.state(), State::kServing, kWaitMs);
    QCOMPARE(states, (QList<State>{State::kWaitingForModel, State::kStarting, State::kServing}));
    httplib::Client client("127.0.0.1", portOf(server.url()));
    auto health = client.Get("/health");
    QVERIFY(health && health->status == 200);
  }

  void portInUseTurnsServingOffWithAMessage() {
    PortHolder taken;
    QVERIFY(taken.port() != 0);
    EngineThread engine(ui::test::fakeDevices);
    ChatController chat(engine.worker());
    QVERIFY(load(chat));
    LocalServer server(engine.worker(), &chat, taken.port());
    QSignalSpy failed(&server, &LocalServer::failed);
    server.setOn(true);
    QVERIFY(failed.wait(kWaitMs));
    QCOMPARE(server.state(), State::kOff);
    const QString message = failed.first().at(0).toString();
    QVERIFY2(message.contains(QString::number(taken.port())), qPrintable(message));
  }
};

QTEST_MAIN(LocalServerTest)
#include "local_server_test.moc"
