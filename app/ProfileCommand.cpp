// strata-train profile: options parsed and the table printed here; the measuring is core/train/Profile's.
#include <fstream>

#include "app/CliArgs.h"
#include "app/CliCommands.h"
#include "core/backend/BackendRegistry.h"
#include "core/train/BackendOptionsFor.h"
#include "core/train/Profile.h"

namespace strata {

namespace {

using cli::UsageError;

const char* kProfileUsage =
    "usage: strata-train profile PROJECT.strata [--device D] [--batch B] [--steps N] [--json FILE]\n"
    "                            [--roofline-cache FILE] [--refresh-roofline]\n"
    "  Times every layer's forward and backward over N training steps (default 10), with FLOPs, bytes moved,\n"
    "  achieved GFLOP/s and GB/s against the device's roofline (measured once per device, cached), and splits\n"
    "  the step into compute, data wait and framework overhead.\n";

int profileCommand(const std::vector<std::string>& args, std::ostream& out) {
    std::string projectPath, device, jsonPath, cachePath;
    ProfileOptions options;
    bool refresh = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
            return args[++i];
        };
        if (a == "--device")
            device = value();
        else if (a == "--batch")
            options.batch = cli::parseInt(a, value(), 1, 1 << 24);
        else if (a == "--steps")
            options.steps = cli::parseInt(a, value(), 1, 100000);
        else if (a == "--json")
            jsonPath = value();
        else if (a == "--roofline-cache")
            cachePath = value();
        else if (a == "--refresh-roofline")
            refresh = true;
        else if (!a.empty() && a[0] == '-')
            throw UsageError("unknown option " + a);
        else if (projectPath.empty())
            projectPath = a;
        else
            throw UsageError("unexpected argument '" + a + "'");
    }
    if (projectPath.empty()) throw UsageError("profile needs a project file");
    Project project = readProject(projectPath);
    if (!device.empty()) project.training.device = device;
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

int runProfileCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    try {
        return profileCommand(args, out);
    } catch (const UsageError& e) {
        err << "strata-train profile: " << e.what() << "\n" << kProfileUsage;
        return 2;
    } catch (const std::exception& e) {
        err << "strata-train profile: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace strata
