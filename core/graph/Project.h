// Project: what a *.strata file holds: its id, the graph (with canvas positions),
// the dataset and the training settings. JSON, format_version 2; a project without an id is written as
// format 1, as older builds wrote it.
// Reading is strict: a newer format_version, a truncated file, a wrong type or
// an unknown layer type is a ProjectError naming the JSON path ("/graph/nodes/3/params/units").
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/graph/Graph.h"
#include "core/graph/Settings.h"

namespace strata {

// 2 added "id"; format 1 files read as projects without one.
constexpr int kProjectFormatVersion = 2;

class ProjectError : public std::runtime_error {
public:
    ProjectError(std::string jsonPath, const std::string& what) : ProjectError({}, std::move(jsonPath), what) {}
    // With the file (or other source) in front: "net.strata: /graph/nodes/2/id: expected an integer, got string".
    ProjectError(std::string source, std::string jsonPath, const std::string& what)
        : std::runtime_error((source.empty() ? "" : source + ": ") + (jsonPath.empty() ? "" : jsonPath + ": ") + what),
          m_source(std::move(source)),
          m_path(std::move(jsonPath)),
          m_message(what) {}
    const std::string& jsonPath() const { return m_path; }
    const std::string& source() const { return m_source; }
    const std::string& message() const { return m_message; }  // without source and path

private:
    std::string m_source;
    std::string m_path;
    std::string m_message;
};

struct Project {
    int formatVersion = kProjectFormatVersion;
    // Who the project is, whatever its file is called: the run history records it with every run, so a moved or
    // renamed file keeps its runs. Empty for a file written before ids existed (its runs are matched by path);
    // the workbench gives a project one when it is created or first saved (newProjectId). Not a setting.
    std::string id;
    std::string name;
    Graph graph;
    DatasetSettings dataset;
    TrainingSettings training;
    // The hyperparameter sweep definition ("sweep": an object, or null when the project has none), kept as
    // written; core/history/Sweep reads and checks it when a sweep runs.
    Json sweep;
    bool operator==(const Project& o) const {
        return formatVersion == o.formatVersion && id == o.id && name == o.name && graph == o.graph &&
               dataset == o.dataset && training == o.training && sweep == o.sweep;
    }
};

// A new random project id: 32 lowercase hex digits (128 bits from the system's random source).
std::string newProjectId();
// Whether `id` can be a project id: 1 to 64 characters, ASCII letters, digits, '-' and '_'.
bool isValidProjectId(const std::string& id);

Json projectToJson(const Project& project);
// `source` names the file in messages. Throws ProjectError.
Project projectFromJson(const Json& json);
Project parseProject(const std::string& text, const std::string& source = "project");
// Reads a file; relative dataset paths stay as written (see resolveDatasetPath).
Project readProject(const std::string& path);
// Writes to a temporary file beside `path` and renames it over `path`. Refuses (ProjectError, file untouched)
// a project that would not read back: non-finite numbers, settings out of range, names that are not UTF-8.
void writeProject(const Project& project, const std::string& path);
// One setting's value as the project file reads it: the JSON type, then the table's range or
// choices (Settings.h). Returns the value as SettingSpec::set takes it (a Choice's enum value);
// throws ProjectError at `path`. strata-train checks its overrides with it too.
Json checkSettingValue(const SettingInfo& setting, const Json& value, const std::string& path);
// A dataset path resolved against the project file's folder ("" stays "").
std::string resolveDatasetPath(const std::string& projectPath, const std::string& datasetPath);

}  // namespace strata
