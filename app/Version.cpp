// strata-train --version: the version, the commit and build type of this build (StrataVersion.h, written at
// every build by app/Version.cmake) and the backends the program has.
#include <string>

#include "StrataVersion.h"
#include "app/Cli.h"
#include "core/backend/BackendRegistry.h"

namespace strata::cli {

std::string versionText() {
    // The CUDA provider is there when main() registered it: a build with CUDA (STRATA_HAVE_CUDA).
    std::string backends = "cpu";
    if (backendRegistry().provider(DeviceType::Cuda)) backends += ", cuda";
    return std::string("strata-train ") + STRATA_VERSION + "\ncommit " + STRATA_COMMIT + "\nbuild type " +
           STRATA_BUILD_TYPE + "\nbackends " + backends;
}

}  // namespace strata::cli
