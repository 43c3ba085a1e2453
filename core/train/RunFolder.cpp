// RunFolder: default per-run checkpoint folders (see RunFolder.h).
#include "core/train/RunFolder.h"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string_view>
#include <vector>

#include <unistd.h>

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

bool folderWritable(const std::string& folder) { return ::access(folder.c_str(), W_OK) == 0; }

std::string defaultUserDataDir() {
    std::string base;
    if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && xdg[0] == '/')
        base = xdg;
    else if (const char* home = std::getenv("HOME"); home && home[0])
        base = std::string(home) + "/.local/share";
    else
        base = ".";
    return base + "/Strata/Strata";
}

std::string perUserRunsFolder(const Project& project, const std::string& projectPath, const std::string& userDataDir) {
    const std::string data = userDataDir.empty() ? defaultUserDataDir() : userDataDir;
    std::string who = project.id;
    if (who.empty()) {
        // A file without an id: its path tells it from another project of the same name (FNV-1a).
        uint64_t h = 14695981039346656037ULL;
        for (const char ch : fs::absolute(fs::path(projectPath)).lexically_normal().string()) {
            h ^= static_cast<unsigned char>(ch);
            h *= 1099511628211ULL;
        }
        char buf[20];
        std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(h >> 32U));
        who = buf;
    }
    return (fs::path(data) / "runs" / (safeName(project.name) + "-" + safeName(who))).string();
}

RunsPlace runsPlace(const Project& project, const std::string& projectPath, const std::string& userDataDir,
                    const WritableCheck& writable) {
    if (projectPath.empty()) {
        const std::string data = userDataDir.empty() ? defaultUserDataDir() : userDataDir;
        return {(fs::path(data) / "runs").string(), false};
    }
    const fs::path dir = fs::absolute(fs::path(projectPath)).parent_path();
    const fs::path runs = dir / "runs";
    std::error_code ec;
    if (writable(fs::is_directory(runs, ec) ? runs.string() : dir.string())) return {runs.string(), false};
    return {perUserRunsFolder(project, projectPath, userDataDir), true};
}

std::string newRunFolder(const Project& project, const std::string& projectPath, const std::string& userDataDir,
                         std::chrono::system_clock::time_point when, const WritableCheck& writable) {
    const std::string base = runsPlace(project, projectPath, userDataDir, writable).folder;
    if (base.empty()) return {};
    const std::string stem = (fs::path(base) / (safeName(project.name) + "-" + stamp(when))).string();
    std::error_code ec;
    std::string folder = stem;
    for (int n = 2; fs::exists(folder, ec); ++n) folder = stem + "-" + std::to_string(n);
    return folder;
}

std::string checkpointFolderForRun(const Project& project, const std::string& projectPath,
                                   const std::string& userDataDir, std::chrono::system_clock::time_point when,
                                   const WritableCheck& writable) {
    if (!project.training.checkpointDir.empty()) return resolveDatasetPath(projectPath, project.training.checkpointDir);
    return newRunFolder(project, projectPath, userDataDir, when, writable);
}

std::string checkpointFolderProblem(const Project& project, const std::string& projectPath,
                                    const WritableCheck& writable) {
    const std::string& named = project.training.checkpointDir;
    if (named.empty()) return {};
    const fs::path folder = fs::absolute(fs::path(resolveDatasetPath(projectPath, named))).lexically_normal();
    // The folder itself when it exists, else the nearest folder above it that does (where it would be created).
    fs::path existing = folder;
    std::error_code ec;
    while (!existing.empty() && !fs::exists(existing, ec) && existing != existing.parent_path())
        existing = existing.parent_path();
    if (existing.empty() || writable(existing.string())) return {};
    std::string text = "cannot write checkpoints to " + folder.string() + " (training.checkpoint_dir '" + named + "'";
    if (fs::path(named).is_relative()) text += ", relative to the project's folder";
    text += "): " + existing.string() + " is not writable";
    return text;
}

std::string latestRunFolder(const Project& project, const std::string& projectPath, const std::string& userDataDir) {
    std::vector<std::string> places;
    if (projectPath.empty()) {
        places.push_back(runsPlace(project, projectPath, userDataDir).folder);
    } else {
        places.push_back((fs::absolute(fs::path(projectPath)).parent_path() / "runs").string());
        places.push_back(perUserRunsFolder(project, projectPath, userDataDir));
    }
    const std::string prefix = safeName(project.name) + "-";
    std::string best, bestRest;
    std::error_code ec;
    for (const std::string& base : places) {
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
    }
    return best;
}

}  // namespace strata
