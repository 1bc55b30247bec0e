#include "ui/model_discovery.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSet>
#include <QThread>
#include <map>

#include "gguf/gguf_file.h"

namespace kvscope::ui {
namespace {

constexpr int kMaxDepth = 4;  // folders below a place that are searched

bool isGguf(const QFileInfo& info) {
  return info.isFile() && info.suffix().compare(QLatin1String("gguf"), Qt::CaseInsensitive) == 0;
}

// "model-00002-of-00003.gguf" is a later part of a split file.
bool isLaterSplitPart(const QString& fileName) {
  static const QRegularExpression split(QStringLiteral("-(\\d{5})-of-\\d{5}\\.gguf$"),
                                        QRegularExpression::CaseInsensitiveOption);
  const auto match = split.match(fileName);
  return match.hasMatch() && match.captured(1).toInt() != 1;
}

QFileInfoList safetensorsIn(const QDir& dir) {
  return dir.entryInfoList({QStringLiteral("*.safetensors")}, QDir::Files);
}

bool isHfFolder(const QDir& dir) {
  return dir.exists(QStringLiteral("config.json")) && !safetensorsIn(dir).isEmpty();
}

QString ggufString(const gguf::GgufFile& file, const std::string& key) {
  const auto s = file.getString(key);
  return s ? QString::fromUtf8(s->data(), static_cast<qsizetype>(s->size())) : QString();
}

void describeGguf(const QString& path, ModelEntry& e) {
  auto opened = gguf::GgufFile::open(path.toStdString());
  if (!opened.ok()) return;
  const gguf::GgufFile& file = **opened;
  e.architecture = ggufString(file, "general.architecture");
  const QString name = ggufString(file, "general.name");
  if (!name.isEmpty()) e.name = name;
  if (const auto ctx = file.getUint(e.architecture.toStdString() + ".context_length"))
    e.contextLength = static_cast<quint32>(*ctx);
  std::map<std::string_view, uint64_t> bytesByType;
  for (const gguf::TensorInfo& t : file.tensors()) {
    e.parameterCount += t.elements();
    bytesByType[gguf::traits(t.type).name] += t.bytes;
  }
  uint64_t most = 0;
  for (const auto& [type, bytes] : bytesByType) {
    if (bytes > most) {
      most = bytes;
      e.quantization = QString::fromLatin1(type.data(), static_cast<qsizetype>(type.size()));
    }
  }
}

void describeHfFolder(const QDir& dir, ModelEntry& e) {
  for (const QFileInfo& shard : safetensorsIn(dir)) e.sizeBytes += shard.size();
  QFile config(dir.filePath(QStringLiteral("config.json")));
  if (!config.open(QIODevice::ReadOnly)) return;
  const QJsonObject o = QJsonDocument::fromJson(config.readAll()).object();
  e.architecture = o.value("model_type").toString();
  e.contextLength = static_cast<quint32>(o.value("max_position_embeddings").toInteger());
  e.quantization = o.value("torch_dtype").toString().toUpper();
}

// "models--Qwen--Qwen2.5-0.5B-Instruct" -> "Qwen/Qwen2.5-0.5B-Instruct".
QString repoName(const QString& cacheFolder) {
  return cacheFolder.mid(int(sizeof("models--")) - 1)
      .replace(QStringLiteral("--"), QStringLiteral("/"));
}

class Scan {
 public:
  QList<ModelEntry> result;

  void add(const QString& path, ModelSource source, const QString& name = {}) {
    const QString key = QFileInfo(path).canonicalFilePath();
    if (key.isEmpty() || m_seen.contains(key)) return;
    m_seen.insert(key);
    ModelEntry e = describeModel(path, source);
    if (!name.isEmpty() && e.isFolder) e.name = name;
    result.append(e);
  }

  // *.gguf files and Hugging Face folders under `root`, `depth` folders deep at most.
  void walk(const QString& root, ModelSource source, int depth = kMaxDepth) {
    const QDir dir(root);
    if (!dir.exists()) return;
    if (isHfFolder(dir)) add(dir.absolutePath(), source);
    for (const QFileInfo& f :
         dir.entryInfoList({QStringLiteral("*.gguf")}, QDir::Files, QDir::Name))
      if (isGguf(f) && !isLaterSplitPart(f.fileName())) add(f.absoluteFilePath(), source);
    if (depth == 0) return;
    // Linked folders are not followed: a link back up would never end.
    for (const QFileInfo& sub :
         dir.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot | QDir::NoSymLinks, QDir::Name))
      walk(sub.absoluteFilePath(), source, depth - 1);
  }

  void huggingFace(const QString& hub) {
    const QDir dir(hub);
    for (const QFileInfo& repo :
         dir.entryInfoList({QStringLiteral("models--*")}, QDir::Dirs | QDir::NoDotAndDotDot)) {
      const QDir snapshots(QDir(repo.absoluteFilePath()).filePath(QStringLiteral("snapshots")));
      const QFileInfoList revisions =
          snapshots.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Time);
      if (revisions.isEmpty()) continue;
      const QString snapshot = revisions.first().absoluteFilePath();
      // Snapshot files are links into blobs/; the folder itself is a real one.
      if (isHfFolder(QDir(snapshot)))
        add(snapshot, ModelSource::kHuggingFace, repoName(repo.fileName()));
      walk(snapshot, ModelSource::kHuggingFace, 1);
    }
  }

 private:
  QSet<QString> m_seen;
};

}  // namespace

DiscoveryPlaces defaultPlaces(const QStringList& userFolders, const QStringList& recentModels) {
  DiscoveryPlaces p;
  p.home = QDir::homePath();
  p.hfHubCache = qEnvironmentVariable("HF_HUB_CACHE");
  if (p.hfHubCache.isEmpty() && qEnvironmentVariableIsSet("HF_HOME"))
    p.hfHubCache = QDir(qEnvironmentVariable("HF_HOME")).filePath(QStringLiteral("hub"));
  if (p.hfHubCache.isEmpty())
    p.hfHubCache = QDir(p.home).filePath(QStringLiteral(".cache/huggingface/hub"));
  p.userFolders = userFolders;
  p.recentModels = recentModels;
  return p;
}

ModelEntry describeModel(const QString& path, ModelSource source) {
  const QFileInfo info(path);
  ModelEntry e;
  e.path = info.absoluteFilePath();
  e.source = source;
  e.isFolder = info.isDir();
  e.modified = info.lastModified();
  if (e.isFolder) {
    e.name = info.fileName();
    describeHfFolder(QDir(path), e);
  } else {
    e.name = info.completeBaseName();
    e.sizeBytes = static_cast<quint64>(info.size());
    describeGguf(path, e);
  }
  return e;
}

QList<ModelEntry> discoverModels(const DiscoveryPlaces& places) {
  Scan scan;
  for (const QString& path : places.recentModels)
    if (QFileInfo::exists(path)) scan.add(path, ModelSource::kRecent);
  const QDir home(places.home);
  if (!places.hfHubCache.isEmpty()) scan.huggingFace(places.hfHubCache);
  scan.walk(home.filePath(QStringLiteral(".lmstudio/models")), ModelSource::kLmStudio);
  scan.walk(home.filePath(QStringLiteral(".cache/lm-studio/models")), ModelSource::kLmStudio);
  scan.walk(home.filePath(QStringLiteral(".local/share/nomic.ai/GPT4All")), ModelSource::kGpt4All,
            0);
  scan.walk(home.filePath(QStringLiteral("models")), ModelSource::kModelsFolder);
  for (const QString& folder : places.userFolders) scan.walk(folder, ModelSource::kUserFolder);
  return scan.result;
}

ModelDiscovery::ModelDiscovery(QObject* parent) : QObject(parent) {
  qRegisterMetaType<DiscoveryPlaces>();
  qRegisterMetaType<QList<ModelEntry>>();
}

ModelDiscovery::~ModelDiscovery() {
  if (!m_thread) return;
  m_thread->wait();
  delete m_thread;
}

void ModelDiscovery::start(const DiscoveryPlaces& places) {
  if (m_thread) return;
  m_thread = QThread::create([this, places] {
    QList<ModelEntry> models = discoverModels(places);
    QMetaObject::invokeMethod(
        this,
        [this, models] {
          m_thread->wait();
          delete m_thread;
          m_thread = nullptr;
          emit finished(models);
        },
        Qt::QueuedConnection);
  });
  m_thread->setObjectName(QStringLiteral("kvscope-discovery"));
  m_thread->start();
}

}  // namespace kvscope::ui
