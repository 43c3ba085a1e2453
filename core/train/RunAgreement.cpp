// RunAgreement: see RunAgreement.h.
#include "core/train/RunAgreement.h"

#include <cstdio>
#include <filesystem>

namespace strata {
namespace {

AgreementField plain(const std::string& name, const std::string& value) { return {name, {{name, value}}}; }

std::string hex(uint64_t h) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

uint64_t hashTensors(const std::map<std::string, std::vector<float>>& tensors, uint64_t h) {
    for (const auto& [name, values] : tensors) {
        h = fnv1a64(name.data(), name.size(), h);
        h = fnv1a64(values.data(), values.size() * sizeof(float), h);
    }
    return h;
}

}  // namespace

void flattenJson(const Json& value, const std::string& path, std::vector<std::pair<std::string, std::string>>& out,
                 const std::string& skip) {
    if (value.is_object() && !value.empty()) {
        for (auto it = value.begin(); it != value.end(); ++it)
            if (it.key() != skip) flattenJson(it.value(), path.empty() ? it.key() : path + "." + it.key(), out, skip);
        return;
    }
    if (value.is_array() && !value.empty()) {
        bool named = true;
        for (const Json& e : value) named = named && e.is_object() && e.contains("name") && e["name"].is_string();
        size_t i = 0;
        for (const Json& e : value) {
            const std::string at = named ? e["name"].get<std::string>() : std::to_string(i);
            flattenJson(e, path + "[" + at + "]", out, skip);
            ++i;
        }
        return;
    }
    out.emplace_back(path, value.dump());
}

std::vector<AgreementField> runAgreementFields(const Project& project, const TrainerOptions& options) {
    std::vector<AgreementField> fields;
    const Json j = projectToJson(project);
    // The project in three parts, so that the message says which; what is left (name, sweep) in a fourth.
    const std::pair<const char*, const char*> parts[] = {
        {"graph", "the project's graph"},
        {"dataset", "the project's data set settings"},
        {"training", "the project's training settings"},
    };
    for (const auto& [part, name] : parts) {
        AgreementField f{name, {}};
        if (j.contains(part)) flattenJson(j[part], part, f.entries);
        fields.push_back(std::move(f));
    }
    AgreementField rest{"the project", {}};
    for (auto it = j.begin(); it != j.end(); ++it)
        if (it.key() != "graph" && it.key() != "dataset" && it.key() != "training")
            flattenJson(it.value(), it.key(), rest.entries);
    fields.push_back(std::move(rest));

    // Options: each changes the number or the size of the collectives.
    fields.push_back(
        plain("max_steps (--max-steps)", options.maxSteps > 0 ? std::to_string(options.maxSteps) : "none"));
    fields.push_back(plain("bucket_size (--bucket-mb)",
                           options.bucketBytes > 0 ? std::to_string(options.bucketBytes) + " bytes" : "automatic"));
    fields.push_back(plain("dist_mode (--dist-mode)",
                           options.distMode == DistMode::LocalSgd
                               ? settingName(options.distMode) + ":" + std::to_string(options.localSgdSteps)
                               : settingName(options.distMode)));
    std::string resume = "none";
    if (!options.resumeFrom.empty()) {
        std::error_code ec;
        const std::filesystem::path absolute = std::filesystem::absolute(options.resumeFrom, ec);
        resume = (ec ? options.resumeFrom : absolute.lexically_normal().string()) +
                 (options.resumeBest ? " (best)" : " (latest)");
    }
    fields.push_back(plain("resume (--resume)", resume));
    fields.push_back(plain("pruning", options.pruning ? pruningSettingsToJson(*options.pruning).dump() : "none"));
    char scale[64];
    std::snprintf(scale, sizeof scale, "%.9g, doubling after %d finite steps", options.initialLossScale,
                  options.lossScaleGrowthInterval);
    fields.push_back(plain("the fp16 loss scale", scale));
    // Every rank's device sample rides on the stop vote when telemetry is gathered: a longer vote.
    const bool gather = options.gatherTelemetry && options.telemetryIntervalMs > 0;
    fields.push_back(plain("telemetry gathering (--metrics-out)", gather ? "on" : "off"));
    return fields;
}

std::vector<AgreementField> resumeAgreementFields(const Checkpoint& c) {
    std::vector<AgreementField> fields;
    fields.push_back(plain("the resume point", "epoch " + std::to_string(c.epoch) + ", step " + std::to_string(c.step) +
                                                   " (" + std::to_string(c.stepInEpoch) + " into its epoch)"));
    uint64_t h = hashTensors(c.optimizerState, 0xcbf29ce484222325ull);
    h = hashTensors(c.masks, h);
    const std::string state = c.trainerState.dump();
    h = fnv1a64(state.data(), state.size(), h);
    fields.push_back(plain("the checkpoint's optimizer and trainer state (its hash)", hex(h)));
    return fields;
}

}  // namespace strata
