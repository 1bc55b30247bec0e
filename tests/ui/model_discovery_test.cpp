// Model discovery over a fake home folder laid out like a machine with Hugging Face,
// LM Studio and GPT4All models, and the per-model settings kept in QSettings.
#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QThread>
#include <QtTest>

#include "ui/model_discovery.h"
#include "ui/model_settings.h"
#include "ui_fixtures.h"

using kvscope::ui::DiscoveryPlaces;
using kvscope::ui::ModelDiscovery;
using kvscope::ui::ModelEntry;
using kvscope::ui::ModelSettings;
using kvscope::ui::ModelSource;

namespace {

void writeFile(const QString& path, const QByteArray& bytes) {
  QDir().mkpath(QFileInfo(path).absolutePath());
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(bytes);
}

const ModelEntry* findEntry(const QList<ModelEntry>& models, const QString& path) {
  for (const ModelEntry& e : models)
    if (e.path == QFileInfo(path).absoluteFilePath()) return &e;
  return nullptr;
}

}  // namespace

class ModelDiscoveryTest : public QObject {
  Q_OBJECT

  QTemporaryDir m_home;
  DiscoveryPlaces m_places;
  QString m_hfSnapshot, m_hfGguf, m_lmStudio, m_gpt4all, m_models, m_split1, m_split2, m_user,
      m_recent;

 private slots:
  void initTestCase() {
    KVS_REQUIRE_UI_FIXTURE(kvscope::ui::test::storiesModel());
    QDir home(m_home.path());
    const QString hub = home.filePath(QStringLiteral(".cache/huggingface/hub"));
    // A Hugging Face folder model: config.json + safetensors (files are links in a real
    // cache; the scan reads through them).
    m_hfSnapshot = hub + QStringLiteral("/models--Org--Tiny-Llama/snapshots/abc123");
    writeFile(
        m_hfSnapshot + QStringLiteral("/config.json"),
        R"({"model_type": "llama", "max_position_embeddings": 2048, "torch_dtype": "bfloat16"})");
    writeFile(m_hfSnapshot + QStringLiteral("/model.safetensors"), QByteArray(1000, 'x'));
    // A GGUF repository: the real stories260K linked in, as the hub cache links blobs.
    const QString ggufSnapshot =
        hub + QStringLiteral("/models--Org--Stories-GGUF/snapshots/def456");
    QDir().mkpath(ggufSnapshot);
    m_hfGguf = ggufSnapshot + QStringLiteral("/stories260K.gguf");
    QVERIFY(QFile::link(kvscope::ui::test::storiesModel(), m_hfGguf));

    m_lmStudio = home.filePath(QStringLiteral(".lmstudio/models/pub/repo/model-Q4_K_M.gguf"));
    writeFile(m_lmStudio, "not really a gguf");
    m_gpt4all = home.filePath(QStringLiteral(".local/share/nomic.ai/GPT4All/chat.gguf"));
    writeFile(m_gpt4all, "GGUF");
    m_models = home.filePath(QStringLiteral("models/a/b/deep.gguf"));
    writeFile(m_models, "x");
    m_split1 = home.filePath(QStringLiteral("models/big-00001-of-00002.gguf"));
    m_split2 = home.filePath(QStringLiteral("models/big-00002-of-00002.gguf"));
    writeFile(m_split1, "x");
    writeFile(m_split2, "x");
    writeFile(home.filePath(QStringLiteral("models/readme.txt")), "not a model");

    m_user = home.filePath(QStringLiteral("elsewhere/mine.gguf"));
    writeFile(m_user, "x");
    m_recent = home.filePath(QStringLiteral("downloads/recent.gguf"));
    writeFile(m_recent, "x");

    m_places.home = home.path();
    m_places.hfHubCache = hub;
    m_places.userFolders = {home.filePath(QStringLiteral("elsewhere"))};
    m_places.recentModels = {m_recent, home.filePath(QStringLiteral("deleted.gguf")), m_models};
  }

  void findsEveryPlace() {
    const QList<ModelEntry> models = kvscope::ui::discoverModels(m_places);

    const ModelEntry* hf = findEntry(models, m_hfSnapshot);
    QVERIFY(hf);
    QVERIFY(hf->isFolder);
    QCOMPARE(hf->source, ModelSource::kHuggingFace);
    QCOMPARE(hf->name, QStringLiteral("Org/Tiny-Llama"));
    QCOMPARE(hf->architecture, QStringLiteral("llama"));
    QCOMPARE(hf->contextLength, 2048u);
    QCOMPARE(hf->quantization, QStringLiteral("BFLOAT16"));
    QCOMPARE(hf->sizeBytes, 1000u);

    // The real GGUF: header fields as FIXTURES.md states them for stories260K.
    const ModelEntry* stories = findEntry(models, m_hfGguf);
    QVERIFY(stories);
    QVERIFY(!stories->isFolder);
    QCOMPARE(stories->source, ModelSource::kHuggingFace);
    QCOMPARE(stories->architecture, QStringLiteral("llama"));
    QCOMPARE(stories->quantization, QStringLiteral("F32"));
    QCOMPARE(stories->sizeBytes, quint64(QFileInfo(kvscope::ui::test::storiesModel()).size()));
    QVERIFY(stories->parameterCount > 200000 && stories->parameterCount < 300000);
    QVERIFY(stories->contextLength > 0);

    QCOMPARE(findEntry(models, m_lmStudio)->source, ModelSource::kLmStudio);
    QVERIFY(findEntry(models, m_lmStudio)->architecture.isEmpty());  // unreadable header
    QCOMPARE(findEntry(models, m_lmStudio)->name, QStringLiteral("model-Q4_K_M"));
    QCOMPARE(findEntry(models, m_gpt4all)->source, ModelSource::kGpt4All);
    QCOMPARE(findEntry(models, m_user)->source, ModelSource::kUserFolder);
    QVERIFY(findEntry(models, m_split1));
    QVERIFY(!findEntry(models, m_split2));  // later parts of a split file are not models

    // Recent models first, in order, missing ones dropped, each model listed once.
    QCOMPARE(models[0].path, m_recent);
    QCOMPARE(models[0].source, ModelSource::kRecent);
    QCOMPARE(models[1].path, m_models);
    QCOMPARE(models[1].source, ModelSource::kRecent);
    QCOMPARE(models.size(), 8);
  }

  void scanRunsOffTheCallingThread() {
    ModelDiscovery discovery;
    QSignalSpy finished(&discovery, &ModelDiscovery::finished);
    discovery.start(m_places);
    QVERIFY(discovery.isRunning());
    QVERIFY(finished.wait(30000));
    QVERIFY(!discovery.isRunning());
    const auto models = finished.first().at(0).value<QList<ModelEntry>>();
    const QList<ModelEntry> direct = kvscope::ui::discoverModels(m_places);
    QCOMPARE(models.size(), direct.size());
    for (qsizetype i = 0; i < models.size(); ++i) QCOMPARE(models[i].path, direct[i].path);
  }

  void defaultPlacesFollowTheEnvironment() {
    qputenv("HF_HUB_CACHE", "/hub/cache");
    QCOMPARE(kvscope::ui::defaultPlaces({}, {}).hfHubCache, QStringLiteral("/hub/cache"));
    qunsetenv("HF_HUB_CACHE");
    qputenv("HF_HOME", "/hf/home");
    QCOMPARE(kvscope::ui::defaultPlaces({}, {}).hfHubCache, QStringLiteral("/hf/home/hub"));
    qunsetenv("HF_HOME");
    QCOMPARE(kvscope::ui::defaultPlaces({}, {}).hfHubCache,
             QDir::home().filePath(QStringLiteral(".cache/huggingface/hub")));
  }

  void settingsArePerModelAndPersist() {
    QTemporaryDir dir;
    const QString file = QDir(dir.path()).filePath(QStringLiteral("settings.ini"));
    kvscope::ui::SamplingSettings custom;
    custom.temperature = 0.25;
    custom.topK = 7;
    custom.maxTokens = 99;
    custom.seed = 1234567890123;
    custom.systemPrompt = QStringLiteral("Be brief.");
    custom.chatRenderer = kvscope::tokenizer::ChatRenderer::kPlain;
    custom.thinking = true;
    custom.contextOverflow = kvscope::runtime::ContextOverflow::kRolling;
    {
      ModelSettings settings(file);
      settings.setSampling(QStringLiteral("/a/model.gguf"), custom);
      for (int i = 0; i < ModelSettings::kMaxRecent + 2; ++i)
        settings.addRecentModel(QStringLiteral("/m/%1.gguf").arg(i));
      settings.addRecentModel(QStringLiteral("/m/3.gguf"));
      settings.addUserFolder(QStringLiteral("/my/models"));
      settings.addUserFolder(QStringLiteral("/my/models"));
      settings.setBackendSettings(
          {QStringLiteral("cpu"), 2, 4096, QStringLiteral("k=q8_0,v=q4_0")});
    }
    ModelSettings settings(file);
    QCOMPARE(settings.sampling(QStringLiteral("/a/model.gguf")), custom);
    QCOMPARE(settings.sampling(QStringLiteral("/another.gguf")), kvscope::ui::SamplingSettings{});
    const QStringList recent = settings.recentModels();
    QCOMPARE(recent.size(), ModelSettings::kMaxRecent);
    QCOMPARE(recent[0], QStringLiteral("/m/3.gguf"));
    QCOMPARE(recent[1], QStringLiteral("/m/11.gguf"));
    QCOMPARE(settings.userFolders(), QStringList{QStringLiteral("/my/models")});
    const auto backend = settings.backendSettings();
    QCOMPARE(backend.kind, QStringLiteral("cpu"));
    QCOMPARE(backend.device, 2);
    QCOMPARE(backend.contextLimit, 4096u);
    QCOMPARE(backend.kvPolicy, QStringLiteral("k=q8_0,v=q4_0"));
  }

  // The chat format, Thinking and overflow settings are stored by name, as
  // earlier versions wrote them; a name this version does not know reads as
  // the default.
  void chatSettingsAreStoredByName() {
    QTemporaryDir dir;
    const QString file = QDir(dir.path()).filePath(QStringLiteral("settings.ini"));
    const QString model = QStringLiteral("/a/model.gguf");
    {
      ModelSettings settings(file);
      settings.setSampling(model, {});
    }
    const QString group =
        QStringLiteral("models/") +
        QString::fromLatin1(
            QCryptographicHash::hash(model.toUtf8(), QCryptographicHash::Sha1).toHex());
    {
      QSettings raw(file, QSettings::IniFormat);
      QCOMPARE(raw.value(group + QStringLiteral("/contextOverflow")).toString(),
               QStringLiteral("truncate-middle"));
      QCOMPARE(raw.value(group + QStringLiteral("/thinking")).toString(),
               QStringLiteral("default"));
      raw.setValue(group + QStringLiteral("/chatRenderer"), QStringLiteral("builtin"));
      raw.setValue(group + QStringLiteral("/thinking"), QStringLiteral("off"));
      raw.setValue(group + QStringLiteral("/contextOverflow"), QStringLiteral("stop"));
    }
    kvscope::ui::SamplingSettings read = ModelSettings(file).sampling(model);
    QCOMPARE(read.chatRenderer, kvscope::tokenizer::ChatRenderer::kBuiltin);
    QCOMPARE(read.thinking, std::optional<bool>(false));
    QCOMPARE(read.contextOverflow, kvscope::runtime::ContextOverflow::kStop);
    {
      QSettings raw(file, QSettings::IniFormat);
      raw.setValue(group + QStringLiteral("/chatRenderer"), QStringLiteral("fancy"));
      raw.setValue(group + QStringLiteral("/contextOverflow"), QStringLiteral("sideways"));
    }
    read = ModelSettings(file).sampling(model);
    QCOMPARE(read.chatRenderer, kvscope::tokenizer::ChatRenderer::kTemplate);
    QCOMPARE(read.contextOverflow, kvscope::runtime::ContextOverflow::kTruncateMiddle);
  }
};

QTEST_MAIN(ModelDiscoveryTest)
#include "model_discovery_test.moc"
