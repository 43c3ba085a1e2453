// strata-train lr-find: options declared and the curve printed here; the sweep is core/train/LrFinder's.
#include <cmath>
#include <fstream>
#include <memory>

#include "app/Cli.h"
#include "core/backend/BackendRegistry.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/LrFinder.h"

namespace strata {

namespace {

struct LrFindArgs {
    std::string projectPath, jsonPath;
    LrFindOptions options;
    std::vector<SettingValue> settings;  // --device, --batch: from the settings table
};

int lrFindCommand(LrFindArgs& a, std::ostream& out, std::ostream& err) {
    Project project = readProject(a.projectPath);
    for (const SettingValue& v : a.settings) applySetting(project.dataset, project.training, *v.setting, v.value);
    std::unique_ptr<Backend> backend =
        backendRegistry().create(Device::parseFirst(project.training.device), backendOptionsFor(project.training));
    const LrFindResult r = findLearningRate(project, a.projectPath, *backend, a.options);
    out << formatLrFind(r);
    if (!a.jsonPath.empty()) {
        std::ofstream f(a.jsonPath, std::ios::trunc);
        if (!(f << lrFindToJson(r).dump(2) << "\n")) throw std::runtime_error("cannot write '" + a.jsonPath + "'");
    }
    if (!std::isfinite(r.suggestion.steepest)) {
        err << "strata-train lr-find: the loss never fell between " << a.options.minLearningRate << " and "
            << a.options.maxLearningRate << "; widen the range or check the data\n";
        return cli::kFailureExit;
    }
    return 0;
}

}  // namespace

cli::CommandRun cli::declareLrFind(CLI::App& app) {
    auto a = std::make_shared<LrFindArgs>();
    app.footer(
        "Trains a copy of the model for N steps while the learning rate grows exponentially from --start to --end, "
        "prints the loss against the rate and suggests one: where the smoothed loss falls fastest, and a tenth of "
        "the rate at its minimum. The project, its checkpoints and --init-from's file are only read.");
    app.add_option("project", a->projectPath, "The project whose model and data to use.")->type_name("PROJECT.strata");
    cli::addSettingOption(app, trainingSetting("device"), a->settings, {}, "Default: the project's.");
    cli::addSettingOption(app, trainingSetting("batch_size"), a->settings, {}, "Default: the project's.");
    cli::addIntegerOption(app, "--steps", a->options.steps, 3, 100000, "Steps of the sweep (default 200).");
    const cli::NumberRange positive{0, 1e6, true, false, "above 0, at most 1000000"};
    cli::addNumberOption(app, "--start", a->options.minLearningRate, positive,
                         "The first learning rate (default 1e-7).");
    cli::addNumberOption(app, "--end", a->options.maxLearningRate, positive, "The last learning rate (default 10).");
    app.add_option("--init-from", a->options.initFrom,
                   "Start from this checkpoint file or folder's weights (by name and shape) rather than the seeded "
                   "initial ones.")
        ->type_name("CHECKPOINT");
    app.add_option("--json", a->jsonPath, "Also write every point and the suggestion as JSON.")->type_name("FILE");
    return [a](std::ostream& out, std::ostream& err) {
        if (a->projectPath.empty()) throw cli::UsageError("lr-find needs a project file");
        if (!(a->options.maxLearningRate > a->options.minLearningRate))
            throw cli::UsageError("--end must be above --start");
        return lrFindCommand(*a, out, err);
    };
}

}  // namespace strata
