// strata-train profile: options declared and the table printed here; the measuring is core/train/Profile's.
#include <fstream>
#include <memory>

#include "app/Cli.h"
#include "core/backend/BackendRegistry.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/Profile.h"

namespace strata {

namespace {

struct ProfileArgs {
    std::string projectPath, jsonPath, cachePath;
    ProfileOptions options;
    bool refresh = false;
    std::vector<SettingValue> settings;  // --device, --batch: from the settings table
};

int profileCommand(ProfileArgs& a, std::ostream& out) {
    const std::string &projectPath = a.projectPath, &jsonPath = a.jsonPath, &cachePath = a.cachePath;
    ProfileOptions& options = a.options;
    const bool refresh = a.refresh;
    Project project = readProject(projectPath);
    for (const SettingValue& v : a.settings) applySetting(project.dataset, project.training, *v.setting, v.value);
    std::unique_ptr<Backend> backend =
        backendRegistry().create(Device::parseFirst(project.training.device), backendOptionsFor(project.training));
    options.rooflineCache = cachePath;
    options.measureRoofline = false;
    ProfileReport report = profileProject(project, projectPath, *backend, options);
    report.roofline = deviceRoofline(*backend, cachePath, refresh);
    out << formatProfile(report);
    if (!jsonPath.empty()) {
        std::ofstream f(jsonPath, std::ios::trunc);
        if (!(f << profileToJson(report).dump(2) << "\n")) throw std::runtime_error("cannot write '" + jsonPath + "'");
    }
    return 0;
}

}  // namespace

cli::CommandRun cli::declareProfile(CLI::App& app) {
    auto a = std::make_shared<ProfileArgs>();
    app.footer(
        "Times every layer's forward and backward over N training steps, with FLOPs, bytes moved, achieved GFLOP/s "
        "and GB/s against the device's roofline (measured once per device, cached), and splits the step into "
        "compute, data wait and framework overhead.");
    app.add_option("project", a->projectPath, "The project to profile.")->type_name("PROJECT.strata");
    cli::addSettingOption(app, trainingSetting("device"), a->settings, {}, "Default: the project's.");
    cli::addSettingOption(app, trainingSetting("batch_size"), a->settings, {}, "Default: the project's.");
    cli::addIntegerOption(app, "--steps", a->options.steps, 1, 100000,
                          "Timed steps, and as many plain ones (default 10).");
    app.add_option("--json", a->jsonPath, "Also write the report as JSON.")->type_name("FILE");
    app.add_option("--roofline-cache", a->cachePath, "Where the device's measured roofline is cached.")
        ->type_name("FILE");
    app.add_flag("--refresh-roofline", a->refresh, "Measure the roofline again.");
    return [a](std::ostream& out, std::ostream&) {
        if (a->projectPath.empty()) throw cli::UsageError("profile needs a project file");
        return profileCommand(*a, out);
    };
}

}  // namespace strata
