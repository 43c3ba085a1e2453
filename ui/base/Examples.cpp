// Examples: finding the example projects, and saving read-only ones (see Examples.h).
#include "ui/base/Examples.h"

#include <QDir>
#include <QFileInfo>

namespace strata::ui {

namespace {

bool holdsProjects(const QString& folder) {
    return !folder.isEmpty() && !QDir(folder).entryList({QStringLiteral("*.strata")}, QDir::Files).isEmpty();
}

}  // namespace

QString examplesFolder(const QString& programDir) {
    if (const QString env = qEnvironmentVariable("STRATA_EXAMPLES_DIR"); holdsProjects(env))
        return QDir(env).absolutePath();
    const QString installed = QDir::cleanPath(programDir + QStringLiteral("/../share/strata/examples"));
    if (holdsProjects(installed)) return installed;
    // A build folder: build/bin/strata's source tree is a few folders up.
    QDir dir(programDir);
    for (int up = 0; up < 4 && dir.cdUp(); ++up)
        if (dir.exists(QStringLiteral("CMakeLists.txt")) && holdsProjects(dir.filePath(QStringLiteral("examples"))))
            return dir.filePath(QStringLiteral("examples"));
    return {};
}

QStringList exampleFiles(const QString& folder) {
    QStringList out;
    if (folder.isEmpty()) return out;
    const QDir dir(folder);
    for (const QString& name : dir.entryList({QStringLiteral("*.strata")}, QDir::Files, QDir::Name))
        out.append(dir.filePath(name));
    return out;
}

bool savesInPlace(const QString& path, const WritableCheck& writable) {
    const QFileInfo info(path);
    if (!writable(info.absolutePath().toStdString())) return false;
    return !info.exists() || writable(info.absoluteFilePath().toStdString());
}

QString copySuggestion(const QString& path, const QString& home) {
    return QDir(home).filePath(QFileInfo(path).fileName());
}

}  // namespace strata::ui
