// ProjectRuns: see ProjectRuns.h.
#include "ui/base/ProjectRuns.h"

#include <QDir>
#include <QFileInfo>
#include <QHash>
#include <QLocale>
#include <cmath>
#include <exception>

#include "core/graph/Project.h"
#include "core/train/Checkpoint.h"
#include "ui/base/ProjectDocument.h"
#include "ui/base/RunHistory.h"

namespace strata::ui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

// The checkpoint a folder offers (best, else latest), with the time it was written; empty when none.
struct FolderCheckpoint {
    QString file;
    QDateTime written;
    QString error;
};

FolderCheckpoint checkpointIn(const QString& folder) {
    FolderCheckpoint c;
    if (folder.isEmpty() || !QFileInfo(folder).isDir()) {
        c.error = folder.isEmpty() ? ProjectDocument::tr("no checkpoint folder was recorded")
                                   : ProjectDocument::tr("its folder %1 is gone").arg(folder);
        return c;
    }
    try {
        c.file = q(resolveCheckpointPath(folder.toStdString()));
        c.written = QFileInfo(c.file).lastModified();
    } catch (const std::exception&) {
        c.error = ProjectDocument::tr("it kept no weights (no checkpoint in %1)").arg(folder);
    }
    return c;
}

// A recorded folder as the Trainer used it: strata-train records a relative --checkpoint-dir as given, and the
// Trainer resolves it against the project file.
QString absoluteFolder(const QString& folder, const QString& projectPath) {
    if (folder.isEmpty() || QDir::isAbsolutePath(folder)) return QDir::cleanPath(folder);
    return QDir::cleanPath(q(resolveDatasetPath(projectPath.toStdString(), folder.toStdString())));
}

}  // namespace

QString ProjectRun::label() const {
    if (id == 0)
        return ProjectDocument::tr("checkpoint folder %1 (no recorded run)").arg(QDir::toNativeSeparators(folder));
    QStringList parts;
    parts << (name.isEmpty() ? ProjectDocument::tr("run %1").arg(id)
                             : ProjectDocument::tr("run %1 \"%2\"").arg(id).arg(name));
    if (started.isValid()) parts << started.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm"));
    parts << (epochs > 0 || steps <= 0 ? ProjectDocument::tr("%n epoch(s)", nullptr, epochs)
                                       : ProjectDocument::tr("%n step(s)", nullptr, int(steps)));
    if (std::isfinite(valAccuracy) && valAccuracy > 0)
        parts << ProjectDocument::tr("%1% validation accuracy").arg(valAccuracy * 100.0, 0, 'f', 2);
    if (!status.isEmpty()) parts << status;
    return parts.join(QStringLiteral(", "));
}

QVector<ProjectRun> projectRuns(const ProjectDocument& doc) {
    QVector<ProjectRun> out;
    QVector<RunHistory::RunSummary> recorded;
    if (RunHistory* history = doc.runHistory()) recorded = history->runsOfProject(doc.projectId(), doc.filePath());
    // Runs that share a folder (a checkpoint folder set in the project) overwrite each other's files: the file
    // there belongs to the newest run that started before it was written.
    QHash<QString, FolderCheckpoint> folders;
    QHash<QString, qint64> owner;                                      // folder -> the run its checkpoint belongs to
    for (const RunHistory::RunSummary& r : std::as_const(recorded)) {  // newest first
        const QString folder = absoluteFolder(r.runFolder, r.projectPath);
        if (!folders.contains(folder)) folders.insert(folder, checkpointIn(folder));
        const FolderCheckpoint& c = folders[folder];
        if (!owner.contains(folder) && !c.file.isEmpty() && r.started.isValid() && r.started <= c.written)
            owner.insert(folder, r.id);
    }
    for (const RunHistory::RunSummary& r : std::as_const(recorded)) {
        ProjectRun run;
        run.id = r.id;
        run.name = r.name;
        run.started = r.started;
        run.status = r.status;
        run.epochs = r.epochsCompleted;
        run.steps = r.steps;
        if (r.bestEpoch > 0) run.valAccuracy = r.bestValAccuracy;
        run.folder = absoluteFolder(r.runFolder, r.projectPath);
        const FolderCheckpoint& c = folders[run.folder];
        const qint64 by = owner.value(run.folder, 0);
        if (by == r.id)
            run.checkpoint = c.file;
        else if (by > r.id)
            run.unavailable =
                ProjectDocument::tr("its weights were overwritten by run %1 (same checkpoint folder)").arg(by);
        else if (r.status == QLatin1String("running"))
            run.unavailable = ProjectDocument::tr("it has written no checkpoint yet");
        else if (!c.error.isEmpty())
            run.unavailable = c.error;
        else
            run.unavailable = ProjectDocument::tr("it kept no weights (the checkpoint in its folder is older)");
        out.append(run);
    }
    // The project's own checkpoint folder, when its weights are no recorded run's.
    const std::string dir = doc.project().training.checkpointDir;
    if (!dir.empty()) {
        const QString folder = absoluteFolder(q(dir), doc.filePath());
        if (!owner.contains(folder)) {
            const FolderCheckpoint c = folders.contains(folder) ? folders[folder] : checkpointIn(folder);
            ProjectRun run;
            run.folder = folder;
            run.checkpoint = c.file;
            if (c.file.isEmpty()) run.unavailable = ProjectDocument::tr("no checkpoint yet in %1").arg(folder);
            out.append(run);
        }
    }
    return out;
}

std::optional<ProjectRun> latestUsableRun(const QVector<ProjectRun>& runs, const ProjectDocument& doc, QString* why) {
    for (const ProjectRun& r : runs)
        if (r.usable()) return r;
    if (why) {
        if (runs.size() == 1 && runs.front().id == 0)
            *why = ProjectDocument::tr("No checkpoint yet in %1: train the project first.").arg(runs.front().folder);
        else if (!runs.isEmpty())
            *why = ProjectDocument::tr(
                       "No run of this project has kept weights: the latest, %1, %2. Train it, or "
                       "pick a checkpoint file or folder.")
                       .arg(runs.front().label(), runs.front().unavailable);
        else if (!doc.runHistory())
            *why = ProjectDocument::tr(
                "No run of this project has kept weights yet (no run history is open to "
                "find them in): train it first, or pick a checkpoint file or folder.");
        else
            *why = ProjectDocument::tr(
                "No run of this project has kept weights yet: train it first, or pick a "
                "checkpoint file or folder.");
    }
    return std::nullopt;
}

std::optional<ProjectRun> runWithId(const QVector<ProjectRun>& runs, qint64 id) {
    for (const ProjectRun& r : runs)
        if (r.id == id) return r;
    return std::nullopt;
}

}  // namespace strata::ui
