// RunFolder: default per-run checkpoint folders (see RunFolder.h).
#include "core/train/RunFolder.h"

#include <cctype>
#include <ctime>
#include <filesystem>
#include <string_view>

namespace strata {

namespace fs = std::filesystem;

namespace {

std::string safeName(const std::string& name) {
    std::string out;
    for (const char ch : name) {
        const auto c = static_cast<unsigned char>(ch);
        out += (std::isalnum(c) != 0 || ch == '-' || ch == '_' || ch == '.') ? ch : '_';
    }
    while (!out.empty() && out.front() == '.') out.erase(out.begin());  // no hidden folders
    return out.empty() ? std::string("project") : out;
}

std::string stamp(std::chrono::system_clock::time_point when) {
    const std::time_t t = std::chrono::system_clock::to_time_t(when);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
    return buf;
}

// True when `rest` (a folder name after "<name>-") is a time stamp, optionally with a -N suffix.
bool isStamp(std::string_view rest) {
    if (rest.size() < 15 || rest[8] != '-') return false;
    for (size_t i = 0; i < 15; ++i)
        if (i != 8 && std::isdigit(static_cast<unsigned char>(rest[i])) == 0) return false;
    if (rest.size() == 15) return true;
    if (rest[15] != '-' || rest.size() == 16) return false;
    for (size_t i = 16; i < rest.size(); ++i)
        if (std::isdigit(static_cast<unsigned char>(rest[i])) == 0) return false;
    return true;
}

// Stamp order, with the -N suffix compared as a number (run-2 before run-10).
bool newer(const std::string& a, const std::string& b) {
    const std::string sa = a.substr(0, 15), sb = b.substr(0, 15);
    if (sa != sb) return sa > sb;
    const std::string na = a.size() > 16 ? a.substr(16) : "1", nb = b.size() > 16 ? b.substr(16) : "1";
    return na.size() != nb.size() ? na.size() > nb.size() : na > nb;
}

bool holdsCheckpoint(const fs::path& dir) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".safetensors") return true;
    return false;
}

}  // namespace

std::string runsFolder(const std::string& projectPath, const std::string& userDataDir) {
    if (!projectPath.empty()) return (fs::absolute(fs::path(projectPath)).parent_path() / "runs").string();
    if (!userDataDir.empty()) return (fs::path(userDataDir) / "runs").string();
    return {};
}

std::string newRunFolder(const std::string& projectPath, const std::string& projectName, const std::string& userDataDir,
                         std::chrono::system_clock::time_point when) {
    const std::string base = runsFolder(projectPath, userDataDir);
    if (base.empty()) return {};
    const std::string stem = (fs::path(base) / (safeName(projectName) + "-" + stamp(when))).string();
    std::error_code ec;
    std::string folder = stem;
    for (int n = 2; fs::exists(folder, ec); ++n) folder = stem + "-" + std::to_string(n);
    return folder;
}

std::string checkpointFolderForRun(const Project& project, const std::string& projectPath,
                                   const std::string& userDataDir, std::chrono::system_clock::time_point when) {
    if (!project.training.checkpointDir.empty()) return resolveDatasetPath(projectPath, project.training.checkpointDir);
    return newRunFolder(projectPath, project.name, userDataDir, when);
}

std::string latestRunFolder(const std::string& projectPath, const std::string& projectName,
                            const std::string& userDataDir) {
    const std::string base = runsFolder(projectPath, userDataDir);
    if (base.empty()) return {};
    const std::string prefix = safeName(projectName) + "-";
    std::string best, bestRest;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(base, ec)) {
        if (!e.is_directory(ec)) continue;
        const std::string n = e.path().filename().string();
        if (n.rfind(prefix, 0) != 0) continue;
        const std::string rest = n.substr(prefix.size());
        if (!isStamp(rest) || !holdsCheckpoint(e.path())) continue;
        if (best.empty() || newer(rest, bestRest)) {
            best = e.path().string();
            bestRest = rest;
        }
    }
    return best;
}

}  // namespace strata
