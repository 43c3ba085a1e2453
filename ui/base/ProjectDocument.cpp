// ProjectDocument: the open project, its analysis and its undo stack.
#include "ui/base/ProjectDocument.h"

#include <QFileInfo>
#include <QSet>
#include <QStringList>
#include <QUndoStack>
#include <algorithm>
#include <exception>
#include <map>

#include "core/graph/Transfer.h"
#include "core/layers/LayerRegistry.h"
#include "ui/base/RunHistory.h"
#include "ui/base/Templates.h"
#include "ui/base/UndoCommands.h"

namespace strata::ui {

namespace {

// Canvas spacing used by auto-layout, in scene units (a node is about 200 x 75).
constexpr double kLayerSpacing = 110.0;
constexpr double kColumnSpacing = 240.0;

// True when `target` can be reached from `start` along edges, ignoring the edge into `ignored`.
bool reaches(const strata::Graph& g, int start, int target, const strata::PortRef& ignored) {
    std::vector<int> stack{start};
    QSet<int> seen;
    while (!stack.empty()) {
        const int n = stack.back();
        stack.pop_back();
        if (n == target) return true;
        if (seen.contains(n)) continue;
        seen.insert(n);
        for (const strata::Edge& e : g.edgesFrom(n))
            if (!(e.to == ignored)) stack.push_back(e.to.node);
    }
    return false;
}

std::string uniqueName(const strata::Graph& g, const std::string& base) {
    if (!g.nodeByName(base)) return base;
    for (int i = 1;; ++i) {
        const std::string candidate = base + (i == 1 ? "_copy" : "_copy" + std::to_string(i));
        if (!g.nodeByName(candidate)) return candidate;
    }
}

}  // namespace

ProjectDocument::ProjectDocument(QObject* parent) : QObject(parent), m_undo(new QUndoStack(this)) {
    connect(m_undo, &QUndoStack::cleanChanged, this, &ProjectDocument::fileChanged);
    m_project.id = strata::newProjectId();  // even the empty project's runs belong to it
    reanalyze();
}

void ProjectDocument::setRunHistory(RunHistory* history) {
    if (m_history == history) return;
    m_history = history;
    emit runsChanged();
}

ProjectDocument::~ProjectDocument() = default;

QString ProjectDocument::displayName() const {
    return m_path.isEmpty() ? tr("untitled") : QFileInfo(m_path).fileName();
}

bool ProjectDocument::isModified() const { return !m_undo->isClean(); }

bool ProjectDocument::load(const QString& path, QString* error) {
    strata::Project loaded;
    try {
        loaded = strata::readProject(path.toStdString());
    } catch (const std::exception& e) {
        if (error) *error = QString::fromStdString(e.what());
        return false;
    }
    m_project = std::move(loaded);
    m_path = QFileInfo(path).absoluteFilePath();
    m_undo->clear();
    m_undo->setClean();
    reanalyze();
    emit projectReset();
    emit identityChanged();
    emit graphChanged();
    emit settingsChanged();
    emit analysisChanged();
    emit fileChanged();
    return true;
}

namespace {

// Whether the project file at `path` is there and holds the project `id` (a file without one: id "").
bool fileHoldsProject(const QString& path, const std::string& id) {
    try {
        return strata::readProject(path.toStdString()).id == id;
    } catch (const std::exception&) {
        return false;  // gone, or no longer this project's file
    }
}

}  // namespace

bool ProjectDocument::save(const QString& pathIn, QString* error) {
    const QString path = QFileInfo(pathIn).absoluteFilePath();
    const bool unsaved = m_path.isEmpty();
    // A copy when the file it came from still holds it: two files with one id would each claim the runs of the
    // other, and export would offer weights of a graph the copy may no longer have. When that file is gone, Save
    // As is a move and the project stays itself.
    const bool copy = !unsaved && path != m_path && fileHoldsProject(m_path, m_project.id);
    strata::Project written = m_project;
    if (copy || written.id.empty()) written.id = strata::newProjectId();
    try {
        strata::writeProject(written, path.toStdString());
    } catch (const std::exception& e) {
        if (error) *error = QString::fromStdString(e.what());
        return false;
    }
    const std::string oldId = m_project.id;
    const QString oldPath = m_path;
    m_project.id = written.id;
    m_path = path;
    m_undo->setClean();
    if (m_history) {
        if (unsaved)
            m_history->adoptUnsavedRuns(projectId(), m_path);
        else if (!copy && oldId.empty())
            m_history->adoptRunsOfFile(oldPath, projectId());
    }
    emit fileChanged();
    if (oldPath != m_path || oldId != m_project.id) emit identityChanged();
    return true;
}

void ProjectDocument::newProject(const strata::Project& project) {
    m_project = project;
    if (m_project.id.empty()) m_project.id = strata::newProjectId();
    m_path.clear();
    m_undo->clear();
    m_undo->setClean();
    reanalyze();
    emit projectReset();
    emit identityChanged();
    emit graphChanged();
    emit settingsChanged();
    emit analysisChanged();
    emit fileChanged();
}

int ProjectDocument::addNode(const QString& type, const QPointF& pos, const strata::Json& params, const QString& name,
                             QString* error) {
    if (refuseWhenLocked(error)) return -1;
    const strata::LayerType* lt = strata::layerRegistry().find(type.toStdString());
    if (!lt) {
        if (error) *error = tr("Unknown layer type '%1'").arg(type);
        return -1;
    }
    // Store the defaults explicitly, so the file says what the canvas shows.
    strata::Json full = params;
    try {
        full = lt->normalizeParams(params);
    } catch (const std::exception&) {
        // Kept as given: analysis lists the bad parameter as a problem.
    }
    strata::Graph after = m_project.graph;
    int id = -1;
    try {
        id = after.addNode(type.toStdString(), name.toStdString(), full, pos.x(), pos.y());
    } catch (const std::exception& e) {
        if (error) *error = QString::fromStdString(e.what());
        return -1;
    }
    pushGraph(after, tr("Add %1").arg(QString::fromStdString(after.node(id)->name)));
    return id;
}

bool ProjectDocument::removeNodes(const QList<int>& ids) {
    if (refuseWhenLocked(nullptr)) return false;
    strata::Graph after = m_project.graph;
    int removed = 0;
    for (int id : ids) {
        if (after.node(id)) {
            after.removeNode(id);
            ++removed;
        }
    }
    if (removed == 0) return false;
    QString text = tr("Delete %n nodes", nullptr, removed);
    if (removed == 1)
        for (int id : ids)
            if (const strata::Node* n = graph().node(id)) text = tr("Delete %1").arg(QString::fromStdString(n->name));
    pushGraph(after, text);
    return true;
}

bool ProjectDocument::connectPorts(const strata::PortRef& from, const strata::PortRef& to, QString* error) {
    if (auto existing = graph().edgeInto(to); existing && existing->from.node == from.node) {
        if (error) *error = tr("Already connected");
        return false;
    }
    return connectInto(m_project.graph, from, to, error);
}

bool ProjectDocument::moveEdge(const strata::PortRef& oldTo, const strata::PortRef& newTo, QString* error) {
    const auto existing = graph().edgeInto(oldTo);
    if (!existing) {
        if (error) *error = tr("No edge to move");
        return false;
    }
    if (oldTo == newTo) return false;
    strata::Graph after = m_project.graph;
    after.disconnect(oldTo);
    return connectInto(std::move(after), existing->from, newTo, error);
}

bool ProjectDocument::connectInto(strata::Graph after, const strata::PortRef& from, const strata::PortRef& to,
                                  QString* error) {
    if (refuseWhenLocked(error)) return false;
    auto fail = [&](const QString& why) {
        if (error) *error = why;
        return false;
    };
    const strata::Node* src = after.node(from.node);
    const strata::Node* dst = after.node(to.node);
    if (!src || !dst) return fail(tr("No such node"));
    if (from.node == to.node) return fail(tr("%1: a node cannot feed itself").arg(QString::fromStdString(dst->name)));
    if (reaches(after, to.node, from.node, to))
        return fail(tr("Connecting %1 to %2 would make a cycle")
                        .arg(QString::fromStdString(src->name), QString::fromStdString(dst->name)));
    const QString text =
        tr("Connect %1 to %2.%3")
            .arg(QString::fromStdString(src->name), QString::fromStdString(dst->name), QString::fromStdString(to.port));
    try {
        after.disconnect(to);
        after.connect({from.node, "out"}, to);
    } catch (const std::exception& e) {
        return fail(QString::fromStdString(e.what()));
    }
    pushGraph(after, text);
    return true;
}

bool ProjectDocument::disconnectPort(const strata::PortRef& to) {
    if (refuseWhenLocked(nullptr)) return false;
    if (!graph().edgeInto(to)) return false;
    strata::Graph after = m_project.graph;
    after.disconnect(to);
    const strata::Node* dst = graph().node(to.node);
    pushGraph(after,
              tr("Disconnect %1.%2")
                  .arg(QString::fromStdString(dst ? dst->name : std::string()), QString::fromStdString(to.port)));
    return true;
}

void ProjectDocument::moveNodes(const QMap<int, QPointF>& positions) {
    QMap<int, QPointF> before, after;
    for (auto it = positions.begin(); it != positions.end(); ++it) {
        const strata::Node* n = graph().node(it.key());
        if (!n) continue;
        const QPointF old(n->x, n->y);
        if (old == it.value()) continue;
        before.insert(it.key(), old);
        after.insert(it.key(), it.value());
    }
    if (after.isEmpty()) return;
    m_undo->push(
        new MoveNodesCommand(this, before, after, true,
                             after.size() == 1 ? tr("Move node") : tr("Move %n nodes", nullptr, int(after.size()))));
}

void ProjectDocument::autoLayout() {
    const strata::Graph& g = graph();
    if (g.empty()) return;
    std::vector<int> order;
    try {
        order = g.topologicalOrder();
    } catch (const std::exception&) {
        // A cycle (possible in a hand-edited file): keep id order; depths then come from the edges seen so far.
        for (const strata::Node* n : g.nodes()) order.push_back(n->id);
    }
    std::map<int, int> depth;
    for (int id : order) {
        int d = 0;
        for (const std::string& port : g.inputPorts(id))
            if (auto e = g.edgeInto({id, port}); e && depth.count(e->from.node))
                d = std::max(d, depth[e->from.node] + 1);
        depth[id] = d;
    }
    std::map<int, std::vector<int>> layers;
    for (int id : order) layers[depth[id]].push_back(id);

    // Within a layer, order nodes by the mean column of their inputs so edges cross less;
    // ties keep the current left-to-right order on the canvas.
    std::map<int, double> column;
    QMap<int, QPointF> before, after;
    for (auto& [d, ids] : layers) {
        std::map<int, double> key;
        for (int id : ids) {
            double sum = 0;
            int count = 0;
            for (const std::string& port : g.inputPorts(id))
                if (auto e = g.edgeInto({id, port}); e && column.count(e->from.node)) {
                    sum += column[e->from.node];
                    ++count;
                }
            key[id] = count ? sum / count : 0.0;
        }
        std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) {
            if (key[a] != key[b]) return key[a] < key[b];
            return g.node(a)->x < g.node(b)->x;
        });
        const double n = double(ids.size());
        for (size_t i = 0; i < ids.size(); ++i) {
            const double col = double(i) - (n - 1) / 2.0;
            column[ids[i]] = col;
            const strata::Node* node = g.node(ids[i]);
            before.insert(ids[i], QPointF(node->x, node->y));
            after.insert(ids[i], QPointF(col * kColumnSpacing, d * kLayerSpacing));
        }
    }
    if (before == after) return;
    m_undo->push(new MoveNodesCommand(this, before, after, false, tr("Auto-layout")));
}

bool ProjectDocument::setParams(int id, const strata::Json& params) {
    if (refuseWhenLocked(nullptr)) return false;
    const strata::Node* n = graph().node(id);
    if (!n || n->params == params) return false;
    pushParams(id, params, tr("Change parameters of %1").arg(QString::fromStdString(n->name)));
    return true;
}

bool ProjectDocument::setParam(int id, const QString& name, const strata::Json& value) {
    if (refuseWhenLocked(nullptr)) return false;
    const strata::Node* n = graph().node(id);
    if (!n) return false;
    strata::Json params = n->params.is_object() ? n->params : strata::Json::object();
    params[name.toStdString()] = value;
    if (params == n->params) return false;
    pushParams(id, params,
               tr("Set %1.%2 to %3").arg(QString::fromStdString(n->name), name, QString::fromStdString(value.dump())));
    return true;
}

bool ProjectDocument::setTrainable(int id, bool trainable) {
    if (refuseWhenLocked(nullptr)) return false;
    const strata::Node* n = graph().node(id);
    if (!n || n->trainable == trainable) return false;
    strata::Graph after = m_project.graph;
    after.setTrainable(id, trainable);
    pushGraph(after, trainable ? tr("Unfreeze %1").arg(QString::fromStdString(n->name))
                               : tr("Freeze %1").arg(QString::fromStdString(n->name)));
    return true;
}

bool ProjectDocument::replaceHead(int classes, QString* error) {
    if (refuseWhenLocked(error)) return false;
    strata::Graph after = m_project.graph;
    try {
        const strata::HeadReplacement r = strata::replaceHead(after, classes);
        pushGraph(after, tr("Replace head %1 (%2 classes)").arg(QString::fromStdString(r.oldName)).arg(classes));
    } catch (const std::exception& e) {
        if (error) *error = QString::fromStdString(e.what());
        return false;
    }
    return true;
}

int ProjectDocument::knownClassCount() const {
    const strata::DatasetSettings& d = m_project.dataset;
    if (!d.classNames.empty()) return int(d.classNames.size());
    if (d.kind == strata::DatasetKind::Synthetic) return d.syntheticClasses;
    return -1;
}

bool ProjectDocument::rename(int id, const QString& name, QString* error) {
    if (refuseWhenLocked(error)) return false;
    const strata::Node* n = graph().node(id);
    const std::string newName = name.trimmed().toStdString();
    auto fail = [&](const QString& why) {
        if (error) *error = why;
        return false;
    };
    if (!n) return fail(tr("No such node"));
    if (newName == n->name) return false;
    if (newName.empty()) return fail(tr("A node needs a name"));
    if (graph().nodeByName(newName)) return fail(tr("The name '%1' is taken").arg(QString::fromStdString(newName)));
    m_undo->push(new RenameCommand(this, id, n->name, newName));
    return true;
}

QList<int> ProjectDocument::paste(const std::vector<strata::Node>& nodes, const std::vector<strata::Edge>& edges,
                                  const QPointF& offset) {
    QList<int> created;
    if (refuseWhenLocked(nullptr)) return created;
    if (nodes.empty()) return created;
    strata::Graph after = m_project.graph;
    std::map<int, int> idMap;
    for (const strata::Node& n : nodes) {
        const int id = after.addNode(n.type, uniqueName(after, n.name), n.params, n.x + offset.x(), n.y + offset.y());
        idMap[n.id] = id;
        created.append(id);
    }
    for (const strata::Edge& e : edges) {
        auto f = idMap.find(e.from.node), t = idMap.find(e.to.node);
        if (f == idMap.end() || t == idMap.end()) continue;  // only edges inside the pasted set
        try {
            after.connect({f->second, "out"}, {t->second, e.to.port});
        } catch (const std::exception&) {
            // The port vanished (params changed between copy and paste): the copy stays unconnected there.
        }
    }
    pushGraph(after, tr("Paste %n nodes", nullptr, int(nodes.size())));
    return created;
}

QList<int> ProjectDocument::insertBlock(const QString& id, const QPointF& pos, int from, QString* error) {
    QList<int> created;
    if (refuseWhenLocked(error)) return created;
    const BlockTemplate* block = findBlockTemplate(id);
    if (!block) {
        if (error) *error = tr("Unknown block '%1'").arg(id);
        return created;
    }
    const strata::Graph& g = graph();
    int width = 128;
    const strata::Shape* fromShape = from >= 0 ? m_analysis.shapeOf(from) : nullptr;
    if (fromShape && fromShape->rank() == 2)
        width = static_cast<int>((*fromShape)[1]);
    else
        from = -1;
    int mask = -1;  // the token ids: an Input of rank 1 that feeds a layer reading ids (an Embedding)
    for (const strata::Node* n : g.nodes()) {
        const strata::LayerType* type = g.layerType(n->id);
        if (!type || !type->isGraphInput() || mask >= 0) continue;
        const strata::Shape* s = m_analysis.shapeOf(n->id);
        if (!s || s->rank() != 1) continue;
        for (const strata::Edge& e : g.edgesFrom(n->id))
            if (const strata::LayerType* to = g.layerType(e.to.node); to && !to->vocabularyParam().empty())
                mask = n->id;
    }
    strata::Graph after = m_project.graph;
    std::string prefix;
    for (int k = 1;; ++k) {  // block1_, block2_, ...: the first prefix no node name starts with
        prefix = "block" + std::to_string(k) + "_";
        bool taken = false;
        for (const strata::Node* n : after.nodes()) taken = taken || n->name.rfind(prefix, 0) == 0;
        if (!taken) break;
    }
    const AddedBlock added = addBlock(after, id, prefix, pos.x(), pos.y(), from, width, mask);
    for (int n : added.nodes) created.append(n);
    pushGraph(after, tr("Add %1").arg(block->title));
    return created;
}

void ProjectDocument::setDatasetSettings(const strata::DatasetSettings& settings) {
    if (settings == m_project.dataset) return;
    m_undo->push(new DatasetSettingsCommand(this, m_project.dataset, settings));
}

void ProjectDocument::setTrainingSettings(const strata::TrainingSettings& settings) {
    if (settings == m_project.training) return;
    m_undo->push(new TrainingSettingsCommand(this, m_project.training, settings));
}

void ProjectDocument::setSweep(const strata::Json& sweep) {
    if (sweep == m_project.sweep) return;
    strata::Project after = m_project;
    after.sweep = sweep;
    setProjectSettings(after, sweep.is_null() ? tr("Remove the sweep") : tr("Change the sweep"));
}

bool ProjectDocument::setProjectSettings(const strata::Project& after, const QString& text, QString* error) {
    if (!(after.graph == m_project.graph) && refuseWhenLocked(error)) return false;
    if (after.graph == m_project.graph && after.dataset == m_project.dataset && after.training == m_project.training &&
        after.sweep == m_project.sweep)
        return true;
    m_undo->push(new ProjectSettingsCommand(this, m_project, after, text));
    return true;
}

std::vector<strata::Problem> ProjectDocument::problemsOf(int id) const {
    std::vector<strata::Problem> out;
    for (const strata::Problem& p : m_analysis.problems)
        if (p.node == id) out.push_back(p);
    return out;
}

qint64 ProjectDocument::parameterCountOf(int id) const {
    const strata::Node* n = graph().node(id);
    auto params = m_analysis.params.find(id);
    if (!n || params == m_analysis.params.end() || !m_analysis.shapeOf(id)) return -1;
    const strata::LayerType* lt = strata::layerRegistry().find(n->type);
    if (!lt) return -1;
    std::vector<strata::Shape> inputs;
    for (const std::string& port : graph().inputPorts(id)) {
        const auto e = graph().edgeInto({id, port});
        const strata::Shape* s = e ? m_analysis.shapeOf(e->from.node) : nullptr;
        if (!s) return -1;
        inputs.push_back(*s);
    }
    qint64 count = 0;
    try {
        for (const strata::ParameterSpec& spec : lt->parameterSpecs(params->second, inputs))
            if (spec.trainable) count += spec.shape.numel();
    } catch (const std::exception&) {
        return -1;
    }
    return count;
}

QString ProjectDocument::shapeText(int id) const {
    const strata::Shape* s = m_analysis.shapeOf(id);
    if (!s) return QStringLiteral("?");
    QStringList dims{QStringLiteral("N")};
    for (int64_t d : s->dims()) dims << QString::number(d);
    return QLatin1Char('[') + dims.join(QStringLiteral(", ")) + QLatin1Char(']');
}

void ProjectDocument::applyGraph(const strata::Graph& graph) {
    m_project.graph = graph;
    reanalyze();
    emit graphChanged();
    emit analysisChanged();
}

void ProjectDocument::applyPositions(const QMap<int, QPointF>& positions) {
    for (auto it = positions.begin(); it != positions.end(); ++it)
        m_project.graph.setPosition(it.key(), it.value().x(), it.value().y());
    for (auto it = positions.begin(); it != positions.end(); ++it) emit nodeMoved(it.key());
}

void ProjectDocument::applyName(int id, const std::string& name) {
    m_project.graph.rename(id, name);
    reanalyze();
    emit graphChanged();
    emit analysisChanged();
}

void ProjectDocument::applyDatasetSettings(const strata::DatasetSettings& settings) {
    m_project.dataset = settings;
    emit settingsChanged();
}

void ProjectDocument::applyTrainingSettings(const strata::TrainingSettings& settings) {
    m_project.training = settings;
    emit settingsChanged();
}

void ProjectDocument::applyProjectSettings(const strata::Project& project) {
    const bool graph = !(project.graph == m_project.graph), sweep = project.sweep != m_project.sweep;
    const bool settings = !(project.dataset == m_project.dataset) || !(project.training == m_project.training);
    m_project.graph = project.graph;
    m_project.dataset = project.dataset;
    m_project.training = project.training;
    m_project.sweep = project.sweep;
    if (graph) {
        reanalyze();
        emit graphChanged();
        emit analysisChanged();
    }
    if (settings) emit settingsChanged();
    if (sweep) emit sweepChanged();
}

void ProjectDocument::setGraphLocked(const QString& reason) {
    const bool was = graphLocked();
    m_lockReason = reason;
    if (was != graphLocked()) emit graphLockChanged(graphLocked());
}

bool ProjectDocument::refuseWhenLocked(QString* error) const {
    if (!graphLocked()) return false;
    if (error) *error = m_lockReason;
    return true;
}

void ProjectDocument::reanalyze() { m_analysis = strata::analyzeGraph(m_project.graph); }

void ProjectDocument::pushParams(int id, const strata::Json& params, const QString& text) {
    // A snapshot, not a params swap: fewer input ports (Add "inputs") drop edges, which undo must bring back.
    strata::Graph after = m_project.graph;
    after.setParams(id, params);
    pushGraph(after, text);
}

void ProjectDocument::pushGraph(const strata::Graph& after, const QString& text) {
    m_undo->push(new GraphSnapshotCommand(this, m_project.graph, after, text));
}

}  // namespace strata::ui
