// Examples: where the workbench finds the example projects (File > Open Example...), and whether a project file
// can be saved where it is: an installed example (/usr/share/strata/examples) cannot, so Save becomes Save As
// with a copy in the user's own folder suggested.
#pragma once

#include <QString>
#include <QStringList>

#include "core/train/RunFolder.h"

namespace strata::ui {

// The examples folder: $STRATA_EXAMPLES_DIR when set; the installed one beside the program
// (<bin>/../share/strata/examples, /usr/share/strata/examples for the .deb); else, for a program run from a build
// folder, the source tree's examples/ (the first folder above the program holding CMakeLists.txt and
// examples/). Empty when none holds a .strata file. `programDir` is QCoreApplication::applicationDirPath().
QString examplesFolder(const QString& programDir);

// The .strata files of the folder, sorted by name.
QStringList exampleFiles(const QString& folder);

// Whether Save can write `path` where it is: its folder is writable (the document is written beside it and
// renamed over it) and the file is, if it exists.
bool savesInPlace(const QString& path, const WritableCheck& writable = folderWritable);

// Where Save As suggests a copy of a project that cannot be saved in place: the same file name in `home`.
QString copySuggestion(const QString& path, const QString& home);

}  // namespace strata::ui
